import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { availableStages, functionAtLine, orderFunctions } from '../functionPick';
import type { FunctionInfo } from '../protocol';

function fn(name: string, line: number, stages: string[] = []): FunctionInfo {
  return {
    name,
    kind: 'kernel',
    range: { start: { line, character: 4 }, end: { line, character: 4 + name.length } },
    stages,
  };
}

const FUNCTIONS = [fn('softmax', 30), fn('add', 3), fn('matmul', 12)];

describe('functionAtLine', () => {
  it('finds the closest def at or above the line', () => {
    assert.equal(functionAtLine(FUNCTIONS, 3)?.name, 'add');
    assert.equal(functionAtLine(FUNCTIONS, 11)?.name, 'add');
    assert.equal(functionAtLine(FUNCTIONS, 12)?.name, 'matmul');
    assert.equal(functionAtLine(FUNCTIONS, 99)?.name, 'softmax');
    assert.equal(functionAtLine(FUNCTIONS, 2), undefined);
  });
});

describe('orderFunctions', () => {
  it('sorts by position and puts the function at the cursor first', () => {
    assert.deepEqual(orderFunctions(FUNCTIONS).map((f) => f.name), ['add', 'matmul', 'softmax']);
    assert.deepEqual(orderFunctions(FUNCTIONS, 20).map((f) => f.name), ['matmul', 'add', 'softmax']);
    assert.deepEqual(orderFunctions(FUNCTIONS, 0).map((f) => f.name), ['add', 'matmul', 'softmax']);
  });
});

describe('availableStages', () => {
  it('keeps the known stages in pipeline order', () => {
    assert.deepEqual(availableStages(fn('k', 0, ['ptx', 'lowered', 'bogus', 'traced'])), ['traced', 'lowered', 'ptx']);
  });
  it('offers every stage when none is known', () => {
    const all = ['traced', 'lowered', 'llvm', 'ptx', 'sass', 'launcher'];
    assert.deepEqual(availableStages(undefined), all);
    assert.deepEqual(availableStages(fn('k', 0, ['bogus'])), all);
  });
});
