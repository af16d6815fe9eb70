// Ordering functions and stages for the pickers. This module does not import `vscode`.

import { isStage, STAGES, type FunctionInfo, type Stage } from './protocol';

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

/** The stages a function offers, in pipeline order; all stages when the server lists none we know. */
export function availableStages(fn: FunctionInfo | undefined): Stage[] {
  const listed = (fn?.stages ?? []).filter(isStage);
  return listed.length === 0 ? [...STAGES] : STAGES.filter((s) => listed.includes(s));
}

export const STAGE_DESCRIPTIONS: Record<Stage, string> = {
  traced: 'kdsl IR as traced from Python (MLIR)',
  lowered: 'after kdsl lowering (MLIR)',
  llvm: 'LLVM IR',
  ptx: 'PTX assembly',
  sass: 'SASS machine code',
  launcher: 'generated Python launcher',
};
