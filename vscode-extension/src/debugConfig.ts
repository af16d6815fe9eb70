// The kdsl debugger's launch configurations and the focus thread, as plain data: filling an
// empty configuration (F5 with no launch.json), checking one before the adapter starts,
// and reading a block or thread typed as `1,0,0`. The adapter (`<python> -m lsp.dap`)
// reads the same attributes; package.json's `contributes.debuggers` declares them for
// launch.json (src/test/debugConfig.test.ts keeps the two lists equal). This module does
// not import `vscode`.

import * as path from 'path';

/** The debugger type of package.json's `contributes.debuggers`. */
export const DEBUG_TYPE = 'kdsl';
/** The adapter's custom request that moves the focus thread while stopped. */
export const FOCUS_REQUEST = 'kdsl/focus';

export type Dim3 = [number, number, number];

/** The attributes of a `kdsl` launch configuration (besides VS Code's own, such as `preLaunchTask`). */
export interface KdslLaunchConfiguration {
  type: string;
  request: string;
  name: string;
  /** The Python file. */
  program: string;
  /** A `@dsl.jit` function of `program`, run on its `examples=`; without it the whole script runs. */
  function?: string;
  /** Which `examples=` entry (0-based). */
  example?: number;
  /** The script's command-line arguments. */
  args?: string[];
  block?: Dim3;
  thread?: Dim3;
  stopOnEntry?: boolean;
  cwd?: string;
  env?: Record<string, string>;
  [key: string]: unknown;
}

/** The attributes of a launch configuration the adapter reads (package.json declares each of them). */
export const LAUNCH_ATTRIBUTES = ['program', 'function', 'example', 'args', 'block', 'thread', 'stopOnEntry', 'cwd', 'env'] as const;

/** The file of the active editor, as far as filling a configuration needs it. */
export interface ActiveFile {
  /** File system path. */
  path: string;
  languageId: string;
  /** URI scheme: only a `file` can be run. */
  scheme: string;
}

export type Checked = { config: KdslLaunchConfiguration } | { error: string };

type Json = Record<string, unknown>;

/** The configuration "Debug on CPU" starts for the jit function `fn` of `program`. */
export function functionLaunchConfiguration(program: string, fn: string): KdslLaunchConfiguration {
  return { type: DEBUG_TYPE, request: 'launch', name: `Debug ${fn} on CPU`, program, function: fn };
}

/**
 * The configuration VS Code passes when there is no launch.json (F5) is empty (`{}`, or only
 * the type the user picked): it
 * becomes "debug the active Python file" (the whole script, every jit call interpreted), or
 * an error when no Python file on disk is active. Any other configuration is returned as it
 * is; `checkLaunchConfiguration` judges it once VS Code has substituted its variables.
 */
export function fillEmptyConfiguration(config: Json, active: ActiveFile | undefined): { config: Json } | { error: string } {
  const empty = (config.type === undefined || config.type === DEBUG_TYPE) && config.request === undefined && config.name === undefined;
  if (!empty) {
    return { config };
  }
  if (!active || active.scheme !== 'file' || active.languageId !== 'python') {
    return { error: 'kdsl: open a Python file to debug it, or add a kdsl launch configuration with a "program".' };
  }
  return { config: { ...config, type: DEBUG_TYPE, request: 'launch', name: 'Debug the file on CPU (kdsl)', program: active.path } };
}

const DIM3_HINT = 'up to three integers >= 0, as 1,0,0';

/**
 * A block or thread index as typed: `1,0,0`, `1 0 0`, `(1, 0, 0)`, `[1,0,0]`, or fewer
 * components (`1` is `1,0,0`, the missing ones 0 as in CUDA's dim3). An error says why not.
 */
export function parseDim3(text: string): { value: Dim3 } | { error: string } {
  let body = text.trim();
  if (/^\(.*\)$|^\[.*\]$/.test(body)) {
    body = body.slice(1, -1).trim();
  }
  const parts = body === '' ? [] : body.split(/\s*,\s*|\s+/);
  if (parts.length < 1 || parts.length > 3 || !parts.every((p) => /^\d+$/.test(p))) {
    return { error: `Expected ${DIM3_HINT}; got "${text}".` };
  }
  const numbers = parts.map(Number);
  if (!numbers.every(Number.isSafeInteger)) {
    return { error: `"${text}" is too large.` };
  }
  const [x, y = 0, z = 0] = numbers;
  return { value: [x, y, z] };
}

export function formatDim3(value: readonly number[]): string {
  return value.join(',');
}

/**
 * A block or thread given as data: an array of up to three integers >= 0, or a string as
 * `parseDim3` reads it (an `${input:...}` in launch.json, a command argument); else undefined.
 */
export function readDim3(value: unknown): Dim3 | undefined {
  if (typeof value === 'string') {
    const parsed = parseDim3(value);
    return 'value' in parsed ? parsed.value : undefined;
  }
  const valid = (v: unknown) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
  if (Array.isArray(value) && value.length >= 1 && value.length <= 3 && value.every(valid)) {
    const [x, y = 0, z = 0] = value as number[];
    return [x, y, z];
  }
  return undefined;
}

function isStringRecord(value: unknown): value is Record<string, string> {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    Object.values(value).every((v) => typeof v === 'string')
  );
}

/**
 * Checks a configuration after VS Code has substituted its variables, and makes a relative
 * `program` (and `cwd`) absolute: `cwd` against the workspace folder, `program` against `cwd`
 * (or the folder). The error names the configuration and the attribute and says what it takes.
 */
export function checkLaunchConfiguration(config: Json, folder: string | undefined): Checked {
  const name = typeof config.name === 'string' && config.name !== '' ? `"${config.name}"` : 'the kdsl launch configuration';
  const wrong = (attribute: string, what: string): Checked => ({
    error: `kdsl: in ${name}, "${attribute}" must be ${what}.`,
  });
  if (config.request !== 'launch') {
    return wrong('request', '"launch" (the kdsl debugger does not attach)');
  }
  if (config.program === undefined || config.program === '') {
    return { error: `kdsl: ${name} has no "program": set it to the Python file to debug (such as "\${file}").` };
  }
  if (typeof config.program !== 'string') {
    return wrong('program', 'the path of a Python file');
  }
  const out: KdslLaunchConfiguration = {
    ...config,
    type: DEBUG_TYPE,
    request: 'launch',
    name: String(config.name ?? ''),
    program: config.program,
  };
  if (config.function !== undefined && (typeof config.function !== 'string' || config.function.trim() === '')) {
    return wrong('function', 'the name of a @dsl.jit function of the program');
  }
  if (config.example !== undefined) {
    if (typeof config.example !== 'number' || !Number.isInteger(config.example) || config.example < 0) {
      return wrong('example', 'an integer >= 0 (which examples= entry)');
    }
    if (config.function === undefined) {
      return wrong('example', 'given with "function" (the jit function whose examples= it picks)');
    }
  }
  if (config.args !== undefined && !(Array.isArray(config.args) && config.args.every((a) => typeof a === 'string'))) {
    return wrong('args', 'an array of strings');
  }
  for (const key of ['block', 'thread'] as const) {
    if (config[key] !== undefined) {
      const value = readDim3(config[key]);
      if (value === undefined) {
        return wrong(key, `[x, y, z]: ${DIM3_HINT}`);
      }
      out[key] = value;
    }
  }
  if (config.stopOnEntry !== undefined && typeof config.stopOnEntry !== 'boolean') {
    return wrong('stopOnEntry', 'true or false');
  }
  if (config.cwd !== undefined && (typeof config.cwd !== 'string' || config.cwd === '')) {
    return wrong('cwd', 'the path of a folder');
  }
  if (config.env !== undefined && !isStringRecord(config.env)) {
    return wrong('env', 'an object of strings ({"NAME": "value"})');
  }
  if (typeof config.cwd === 'string' && folder !== undefined && !path.isAbsolute(config.cwd)) {
    out.cwd = path.join(folder, config.cwd);
  }
  const programBase = typeof out.cwd === 'string' ? out.cwd : folder;
  if (programBase !== undefined && !path.isAbsolute(out.program)) {
    out.program = path.join(programBase, out.program);
  }
  return { config: out };
}

/**
 * Where the adapter starts: the workspace folder, as the language server does; without one
 * (a single file opened), the program's folder.
 */
export function adapterCwd(folder: string | undefined, program: string): string {
  return folder ?? path.dirname(program);
}

/**
 * The environment the adapter's own process gets, over VS Code's: the configuration's `env`
 * (the adapter runs the program in it, so a variable read at import time applies too).
 */
export function adapterEnv(config: Json): Record<string, string> | undefined {
  return isStringRecord(config.env) ? { ...config.env } : undefined;
}

/** The arguments of a `kdsl/focus` request. */
export function focusArguments(block: Dim3, thread: Dim3): { block: Dim3; thread: Dim3 } {
  return { block, thread };
}

/** What the adapter answers `kdsl/focus`. */
export interface FocusAnswer {
  block?: unknown;
  thread?: unknown;
  description?: unknown;
}

/** The focus a session starts with: its configuration's `block` and `thread`, 0,0,0 where missing. */
export function initialFocus(config: Json): { block: Dim3; thread: Dim3 } {
  return { block: readDim3(config.block) ?? [0, 0, 0], thread: readDim3(config.thread) ?? [0, 0, 0] };
}

/**
 * The focus an answer reports (the adapter may have clamped or refused what was asked:
 * its answer wins), and the line that tells the user: the adapter's description, or the
 * indices when it gives none.
 */
export function readFocusAnswer(answer: unknown, asked: { block: Dim3; thread: Dim3 }): { block: Dim3; thread: Dim3; message: string } {
  const body: FocusAnswer = typeof answer === 'object' && answer !== null ? (answer as FocusAnswer) : {};
  const block = readDim3(body.block) ?? asked.block;
  const thread = readDim3(body.thread) ?? asked.thread;
  const described = typeof body.description === 'string' ? body.description.trim().replace(/\.$/, '') : '';
  const description = described !== '' ? described : `block (${formatDim3(block)}), thread (${formatDim3(thread)})`;
  return { block, thread, message: `kdsl: focus on ${description}.` };
}
