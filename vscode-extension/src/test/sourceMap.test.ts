import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { LspRange, SourceMapEntry } from '../protocol';
import {
  coversLine,
  irLinesForSourceLine,
  lastLine,
  sanitizeSourceMap,
  sourceRangeForIrLine,
  toLineBlocks,
} from '../sourceMap';

function r(sl: number, sc: number, el: number, ec: number): LspRange {
  return { start: { line: sl, character: sc }, end: { line: el, character: ec } };
}

// Source:
//   line 3: def add(a, b):          (no IR)
//   line 4:     c = a + b           -> IR lines 2, 3
//   line 5:     d = (c *            -> IR lines 5, 6 (multi-line range 5..6)
//   line 6:          2)
//   line 7:     return d            -> IR line 8
const MAP: SourceMapEntry[] = [
  { irLine: 2, range: r(4, 8, 4, 13) },
  { irLine: 3, range: r(4, 4, 4, 13) },
  { irLine: 5, range: r(5, 8, 6, 11) },
  { irLine: 6, range: r(5, 4, 7, 0) }, // ends at character 0 of line 7: covers 5..6 only
  { irLine: 8, range: r(7, 4, 7, 12) },
  { irLine: 3, range: r(4, 8, 4, 9) }, // a narrower second entry for IR line 3
  { irLine: 2, range: r(4, 8, 4, 13) }, // duplicate
];

describe('irLinesForSourceLine', () => {
  it('finds every IR line of a source line, sorted, without duplicates', () => {
    assert.deepEqual(irLinesForSourceLine(MAP, 4), [2, 3]);
    assert.deepEqual(irLinesForSourceLine(MAP, 7), [8]);
  });

  it('covers every line of a multi-line range', () => {
    assert.deepEqual(irLinesForSourceLine(MAP, 5), [5, 6]);
    assert.deepEqual(irLinesForSourceLine(MAP, 6), [5, 6]);
  });

  it("maps a line inside a loop to its own ops, not the loop's branch ops", () => {
    // line 10: for i in range(n):   -> IR 19 (range(n)), 20 and 21 (the loop's ops, range 10..12)
    // line 11:     acc += x[i]      -> IR 22
    // line 12:     # a comment      (no IR of its own: the loop's)
    const loop: SourceMapEntry[] = [
      { irLine: 19, range: r(10, 13, 10, 21) },
      { irLine: 20, range: r(10, 4, 12, 15) },
      { irLine: 21, range: r(10, 4, 12, 15) },
      { irLine: 22, range: r(11, 8, 11, 19) },
    ];
    assert.deepEqual(irLinesForSourceLine(loop, 11), [22]);
    assert.deepEqual(irLinesForSourceLine(loop, 12), [20, 21]);
    assert.deepEqual(irLinesForSourceLine(loop, 10), [19, 20, 21]);
  });

  it('returns nothing for lines with no mapping', () => {
    assert.deepEqual(irLinesForSourceLine(MAP, 0), []);
    assert.deepEqual(irLinesForSourceLine(MAP, 3), []);
    assert.deepEqual(irLinesForSourceLine(MAP, 100), []);
    assert.deepEqual(irLinesForSourceLine([], 4), []);
  });
});

describe('sourceRangeForIrLine', () => {
  it('finds the source range of an IR line', () => {
    assert.deepEqual(sourceRangeForIrLine(MAP, 2), r(4, 8, 4, 13));
    assert.deepEqual(sourceRangeForIrLine(MAP, 5), r(5, 8, 6, 11));
    assert.deepEqual(sourceRangeForIrLine(MAP, 8), r(7, 4, 7, 12));
  });

  it('picks the narrowest range when an IR line has several', () => {
    assert.deepEqual(sourceRangeForIrLine(MAP, 3), r(4, 8, 4, 9));
  });

  it('prefers fewer lines over fewer characters, then the earlier start', () => {
    const map: SourceMapEntry[] = [
      { irLine: 0, range: r(1, 0, 2, 0) },
      { irLine: 0, range: r(3, 0, 3, 40) },
      { irLine: 1, range: r(9, 2, 9, 5) },
      { irLine: 1, range: r(8, 2, 8, 5) },
    ];
    assert.deepEqual(sourceRangeForIrLine(map, 0), r(3, 0, 3, 40));
    assert.deepEqual(sourceRangeForIrLine(map, 1), r(8, 2, 8, 5));
  });

  it('returns undefined for IR lines with no mapping', () => {
    assert.equal(sourceRangeForIrLine(MAP, 0), undefined);
    assert.equal(sourceRangeForIrLine(MAP, 4), undefined);
    assert.equal(sourceRangeForIrLine([], 2), undefined);
  });

  it('navigates back and forth consistently', () => {
    for (const irLine of irLinesForSourceLine(MAP, 7)) {
      const range = sourceRangeForIrLine(MAP, irLine);
      assert.ok(range && coversLine(range, 7));
    }
  });
});

describe('line helpers', () => {
  it('lastLine excludes a final line ended at character 0', () => {
    assert.equal(lastLine(r(5, 4, 7, 0)), 6);
    assert.equal(lastLine(r(5, 4, 7, 1)), 7);
    assert.equal(lastLine(r(5, 0, 5, 0)), 5);
  });

  it('toLineBlocks merges consecutive lines', () => {
    assert.deepEqual(toLineBlocks([7, 2, 3, 4, 9, 3, 10]), [
      { start: 2, end: 4 },
      { start: 7, end: 7 },
      { start: 9, end: 10 },
    ]);
    assert.deepEqual(toLineBlocks([]), []);
  });

  it('sanitizeSourceMap drops malformed entries', () => {
    const good = { irLine: 1, range: r(0, 0, 0, 3) };
    assert.deepEqual(
      sanitizeSourceMap([
        good,
        { irLine: -1, range: r(0, 0, 0, 1) },
        { irLine: 1.5, range: r(0, 0, 0, 1) },
        { irLine: 2 },
        { irLine: 2, range: { start: { line: 0 }, end: { line: 0, character: 1 } } },
        null,
        'x',
      ]),
      [good],
    );
    assert.deepEqual(sanitizeSourceMap(undefined), []);
  });
});
