// Navigation through the source map returned by `kdsl/ir`: from a Python line
// to the IR lines it produced, and from an IR line to the Python range.
// This module does not import `vscode`.

import type { LspRange, SourceMapEntry } from './protocol';

/**
 * The last source line a range covers. A multi-line range ending at
 * character 0 does not cover its end line.
 */
export function lastLine(range: LspRange): number {
  if (range.end.line > range.start.line && range.end.character === 0) {
    return range.end.line - 1;
  }
  return Math.max(range.start.line, range.end.line);
}

export function coversLine(range: LspRange, line: number): boolean {
  return range.start.line <= line && line <= lastLine(range);
}

/**
 * IR lines produced by source line `line` (0-based), sorted, without duplicates:
 * those whose range starts on the line (a statement inside a loop maps to its own
 * ops, not to the loop's branch ops, whose range spans the whole loop; the `for`
 * line maps to the loop's ops), else those of the narrowest ranges covering it
 * (the second line of a long expression, a comment in a loop's body). The
 * server's `ir_lines_for` follows the same rule.
 */
export function irLinesForSourceLine(sourceMap: readonly SourceMapEntry[], line: number): number[] {
  const covering = sourceMap.filter((entry) => coversLine(entry.range, line));
  const span = (entry: SourceMapEntry): number => lastLine(entry.range) - entry.range.start.line;
  let chosen = covering.filter((entry) => entry.range.start.line === line);
  if (chosen.length === 0 && covering.length > 0) {
    const narrowest = Math.min(...covering.map(span));
    chosen = covering.filter((entry) => span(entry) === narrowest);
  }
  return [...new Set(chosen.map((entry) => entry.irLine))].sort((a, b) => a - b);
}

function compareRange(a: LspRange, b: LspRange): number {
  return (
    a.start.line - b.start.line ||
    a.start.character - b.start.character ||
    a.end.line - b.end.line ||
    a.end.character - b.end.character
  );
}

function spanSize(range: LspRange): [number, number] {
  return [range.end.line - range.start.line, range.end.character - range.start.character];
}

/**
 * The source range IR line `irLine` maps to, or undefined when it has no
 * mapping. When several entries name the line, the narrowest range wins (ties:
 * the one starting first).
 */
export function sourceRangeForIrLine(sourceMap: readonly SourceMapEntry[], irLine: number): LspRange | undefined {
  let best: LspRange | undefined;
  for (const entry of sourceMap) {
    if (entry.irLine !== irLine) {
      continue;
    }
    if (best === undefined) {
      best = entry.range;
      continue;
    }
    const [bl, bc] = spanSize(best);
    const [el, ec] = spanSize(entry.range);
    if (el < bl || (el === bl && ec < bc) || (el === bl && ec === bc && compareRange(entry.range, best) < 0)) {
      best = entry.range;
    }
  }
  return best;
}

export interface LineBlock {
  /** First line (inclusive). */
  start: number;
  /** Last line (inclusive). */
  end: number;
}

/** Merges sorted line numbers into blocks of consecutive lines. */
export function toLineBlocks(lines: readonly number[]): LineBlock[] {
  const sorted = [...new Set(lines)].sort((a, b) => a - b);
  const blocks: LineBlock[] = [];
  for (const line of sorted) {
    const last = blocks[blocks.length - 1];
    if (last !== undefined && line === last.end + 1) {
      last.end = line;
    } else {
      blocks.push({ start: line, end: line });
    }
  }
  return blocks;
}

/** Keeps only well-formed entries (non-negative integer lines and positions). */
export function sanitizeSourceMap(value: unknown): SourceMapEntry[] {
  if (!Array.isArray(value)) {
    return [];
  }
  const isCount = (n: unknown): n is number => typeof n === 'number' && Number.isInteger(n) && n >= 0;
  const isPos = (p: unknown): boolean =>
    typeof p === 'object' && p !== null && isCount((p as { line?: unknown }).line) && isCount((p as { character?: unknown }).character);
  return value.filter((e): e is SourceMapEntry => {
    if (typeof e !== 'object' || e === null) {
      return false;
    }
    const entry = e as { irLine?: unknown; range?: { start?: unknown; end?: unknown } };
    return isCount(entry.irLine) && typeof entry.range === 'object' && entry.range !== null && isPos(entry.range.start) && isPos(entry.range.end);
  });
}
