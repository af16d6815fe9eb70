// Types of the custom requests and commands of the kdsl language server.
// This module does not import `vscode` so that it can be used by unit tests.

export interface LspPosition {
  line: number;
  character: number;
}

export interface LspRange {
  start: LspPosition;
  end: LspPosition;
}

/** The compilation stages the server can show, in pipeline order. */
export const STAGES = ['traced', 'lowered', 'llvm', 'ptx', 'sass', 'launcher'] as const;
export type Stage = (typeof STAGES)[number];

export function isStage(value: unknown): value is Stage {
  return typeof value === 'string' && (STAGES as readonly string[]).includes(value);
}

/** `kdsl/stages` request. */
export const STAGES_REQUEST = 'kdsl/stages';

export interface StagesParams {
  uri: string;
}

export interface FunctionInfo {
  name: string;
  kind: 'kernel' | 'jit';
  /** Range of the function's name in its `def`. */
  range: LspRange;
  stages: string[];
}

export interface StagesResult {
  functions: FunctionInfo[];
}

/** `kdsl/ir` request. */
export const IR_REQUEST = 'kdsl/ir';

export interface IrParams {
  uri: string;
  function: string;
  stage: string;
}

export type IrLanguage = 'mlir' | 'llvm' | 'ptx' | 'sass' | 'python';

export interface SourceMapEntry {
  /** 0-based line in the IR text. */
  irLine: number;
  /** Range in the source document that produced the IR line. */
  range: LspRange;
}

export interface IrDiagnostic {
  message: string;
  code?: string | number | null;
  range?: LspRange | null;
}

export interface IrResult {
  text: string;
  language: IrLanguage | string;
  sourceMap: SourceMapEntry[];
  diagnostics: IrDiagnostic[];
}

/** Server commands (run through `workspace/executeCommand`). */
export const COMPILE_COMMAND = 'kdsl.compile';
export const RUN_COMMAND = 'kdsl.run';

export interface CommandResult {
  message?: string;
  /** False when the server refused or failed (for example in an untrusted workspace). */
  ok?: boolean;
  [key: string]: unknown;
}
