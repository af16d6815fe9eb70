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

/**
 * `kdsl/capabilities` request (no params): what the server can show and its setting
 * defaults. The extension keeps no copy of these; it asks once per server start.
 */
export const CAPABILITIES_REQUEST = 'kdsl/capabilities';

/** One row of the server's stage table. */
export interface StageInfo {
  name: string;
  /** The server's language name of the stage's text (`mlir`, `sass`, ...). */
  language: string;
  /** File extension of the stage's text, with its dot (`.ll`). */
  extension: string;
  binary: boolean;
  /** Made only when a build keeps its views. */
  needsViews: boolean;
  /** `pipeline`, `on request` (made when first asked for) or `launcher`. */
  madeBy: string;
}

export interface Capabilities {
  /** The stages that can be shown, in pipeline order. */
  stages: StageInfo[];
  targets: string[];
  /** The target used when none is set and no GPU is found. */
  defaultTarget: string;
  /** Default of each server setting, keyed as in the configuration (`worker.timeoutSeconds`). */
  settings: Record<string, unknown>;
  /** The allowed values of the settings that take one of a list. */
  choices: Record<string, string[]>;
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
  /** The server's language name (a `StageInfo.language`, or `plaintext`). */
  language: string;
  sourceMap: SourceMapEntry[];
  diagnostics: IrDiagnostic[];
}

/** Server commands (run through `workspace/executeCommand`). */
export const COMPILE_COMMAND = 'kdsl.compile';
export const RUN_COMMAND = 'kdsl.run';
/** Answers `{ok, message, profile}`: `profile` is the report that profileReport.ts reads. */
export const PROFILE_COMMAND = 'kdsl.profile';

export interface CommandResult {
  message?: string;
  /** False when the server refused or failed (for example in an untrusted workspace). */
  ok?: boolean;
  /** True when the user dismissed a question the server asked (no GPU: run on the CPU?): nothing more to show. */
  dismissed?: boolean;
  [key: string]: unknown;
}

/**
 * A command of this extension that the server's "Debug on CPU" code lens runs, with
 * `[uri, jitName]`: it starts the kdsl debugger (debugAdapter.ts). The server offers the lens
 * only to a client whose capabilities say `experimental.kdsl.debugLens` (lsp/features/code_lens.py).
 */
export const DEBUG_FUNCTION_COMMAND = 'kdsl.debugFunction';

/** What this client can do beyond LSP, as the server reads it from `capabilities.experimental.kdsl`. */
export const KDSL_CLIENT_CAPABILITIES = { debugLens: true } as const;

/** `experimental` (a client capability, any JSON) with `kdsl` set to KDSL_CLIENT_CAPABILITIES; other keys are kept. */
export function withKdslCapabilities(experimental: unknown): Record<string, unknown> {
  const others = typeof experimental === 'object' && experimental !== null && !Array.isArray(experimental) ? experimental : {};
  return { ...others, kdsl: { ...KDSL_CLIENT_CAPABILITIES } };
}
