// Ordering functions and stages for the pickers. This module does not import `vscode`.

import type { FunctionInfo, StageInfo } from './protocol';

/**
 * The function whose `def` is the closest one at or above `line`, i.e. the
 * function the cursor is most likely in; undefined when none starts above.
 */
export function functionAtLine(functions: readonly FunctionInfo[], line: number): FunctionInfo | undefined {
  let best: FunctionInfo | undefined;
  for (const fn of functions) {
    const start = fn.range.start.line;
    if (start <= line && (best === undefined || start > best.range.start.line)) {
      best = fn;
    }
  }
  return best;
}

/** Functions in file order, with the one at the cursor (if any) first. */
export function orderFunctions(functions: readonly FunctionInfo[], cursorLine?: number): FunctionInfo[] {
  const sorted = [...functions].sort((a, b) => a.range.start.line - b.range.start.line || a.name.localeCompare(b.name));
  const current = cursorLine === undefined ? undefined : functionAtLine(sorted, cursorLine);
  return current === undefined ? sorted : [current, ...sorted.filter((fn) => fn !== current)];
}

/**
 * The stages a function offers, in the order of `stages` (the server's table);
 * every stage when the function lists none of them (it has not compiled yet).
 */
export function availableStages(fn: FunctionInfo | undefined, stages: readonly StageInfo[]): StageInfo[] {
  const listed = stages.filter((s) => fn?.stages.includes(s.name));
  return listed.length === 0 ? [...stages] : listed;
}

/**
 * The quick pick's description of a stage: its language and file extension, and
 * when it is made: `(made on request)`, or from which stage (`c` is made from the
 * `launcher`); nothing for the pipeline's own stages.
 */
export function stageDescription(stage: StageInfo): string {
  let made = '';
  if (stage.madeBy === 'on request') {
    made = ' (made on request)';
  } else if (stage.madeBy !== 'pipeline' && stage.madeBy !== stage.name) {
    made = ` (made from the ${stage.madeBy})`;
  }
  return `${stage.language} ${stage.extension}${made}`.trim();
}
