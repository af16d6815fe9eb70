import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { availableStages, functionAtLine, orderFunctions, stageDescription } from '../functionPick';
import type { FunctionInfo } from '../protocol';
import { CAPABILITIES } from './fixtures';

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
  const names = (fnInfo: FunctionInfo | undefined, stages = CAPABILITIES.stages) =>
    availableStages(fnInfo, stages).map((s) => s.name);

  it('keeps the stages the server lists, in the order of its table', () => {
    assert.deepEqual(names(fn('k', 0, ['ptx', 'lowered', 'bogus', 'traced'])), ['traced', 'lowered', 'ptx']);
  });
  it('offers every stage when none is listed', () => {
    const all = ['traced', 'lowered', 'llvm', 'ptx', 'sass', 'launcher'];
    assert.deepEqual(names(undefined), all);
    assert.deepEqual(names(fn('k', 0, ['bogus'])), all);
  });
  it('knows no stage of its own', () => {
    const hlo = { ...CAPABILITIES.stages[0], name: 'hlo' };
    assert.deepEqual(names(fn('k', 0, ['hlo', 'ptx']), [hlo]), ['hlo']);
    assert.deepEqual(names(fn('k', 0, ['ptx']), []), []);
  });
});

describe('stageDescription', () => {
  it('gives the language, the file extension and when a stage is made', () => {
    assert.deepEqual(CAPABILITIES.stages.map(stageDescription), [
      'mlir .mlir',
      'mlir .mlir',
      'llvm .ll',
      'ptx .ptx',
      'sass .sass (made on request)',
      'python .py',
    ]);
  });

  it('says which stage a stage is made from', () => {
    const c = { name: 'c', language: 'c', extension: '.c', binary: false, needsViews: true, madeBy: 'launcher' };
    assert.equal(stageDescription(c), 'c .c (made from the launcher)');
  });
});
