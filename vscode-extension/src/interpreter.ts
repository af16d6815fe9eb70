// Choosing the Python interpreter that runs the kdsl language server and
// building its command lines. This module does not import `vscode`.

import * as path from 'path';

export type InterpreterSource = 'setting' | 'pythonExtension' | 'default';

export interface ResolvedInterpreter {
  /** Path or name of the Python executable. */
  python: string;
  /** Where it came from. */
  source: InterpreterSource;
}

export interface ResolveOptions {
  /** The `kdsl.interpreterPath` setting ('' when unset). */
  settingPath: string;
  /** The interpreter selected in the Python extension, if any. */
  pythonExtensionPath?: string;
  /** Folder `${workspaceFolder}` expands to. */
  workspaceFolder?: string;
  /** Home directory a leading `~` expands to. */
  homeDir?: string;
  /** Defaults to `process.platform`. */
  platform?: NodeJS.Platform;
  /** False in an untrusted workspace: an interpreter inside a workspace folder is then ignored. */
  workspaceTrusted?: boolean;
  /** Workspace folders (file system paths), used with workspaceTrusted. */
  workspaceFolders?: readonly string[];
}

/** `${workspaceFolder}` and a leading `~` are expanded. */
export function expandPath(value: string, workspaceFolder?: string, homeDir?: string): string {
  let result = value.trim();
  if (workspaceFolder !== undefined) {
    result = result.split('${workspaceFolder}').join(workspaceFolder);
  }
  if (homeDir !== undefined && (result === '~' || result.startsWith('~/') || result.startsWith('~\\'))) {
    result = homeDir + result.slice(1);
  }
  return result;
}

/** Whether `file` lies inside `folder` (both absolute paths). */
export function isInside(file: string, folder: string, platform: NodeJS.Platform = process.platform): boolean {
  const p = platform === 'win32' ? path.win32 : path.posix;
  const norm = (s: string) => (platform === 'win32' ? p.normalize(s).toLowerCase() : p.normalize(s));
  const rel = p.relative(norm(folder), norm(file));
  return rel !== '' && !rel.startsWith('..') && !p.isAbsolute(rel);
}

export function defaultPython(platform: NodeJS.Platform = process.platform): string {
  return platform === 'win32' ? 'python' : 'python3';
}

/**
 * Resolution order: the `kdsl.interpreterPath` setting, then the Python
 * extension's selected interpreter, then `python3` (`python` on Windows).
 */
export function resolveInterpreter(options: ResolveOptions): ResolvedInterpreter {
  const platform = options.platform ?? process.platform;
  const setting = expandPath(options.settingPath ?? '', options.workspaceFolder, options.homeDir);
  if (setting !== '') {
    return { python: setting, source: 'setting' };
  }
  const fromExtension = (options.pythonExtensionPath ?? '').trim();
  if (fromExtension !== '') {
    const untrusted = options.workspaceTrusted === false;
    const inWorkspace = (options.workspaceFolders ?? []).some((folder) => isInside(fromExtension, folder, platform));
    if (!(untrusted && inWorkspace)) {
      return { python: fromExtension, source: 'pythonExtension' };
    }
  }
  return { python: defaultPython(platform), source: 'default' };
}

export interface CommandLine {
  command: string;
  args: string[];
}

/** The language server: `<python> -m lsp`, speaking LSP over stdio. */
export function serverCommand(python: string): CommandLine {
  return { command: python, args: ['-m', 'lsp'] };
}

/** The debug adapter: `<python> -m lsp.dap`, speaking DAP over stdio, in the server's interpreter. */
export function debugAdapterCommand(python: string): CommandLine {
  return { command: python, args: ['-m', 'lsp.dap'] };
}

/**
 * Exits with status 0 when `python` has kdsl's debug adapter (`lsp.dap`), without importing
 * it: with 3 when its kdsl has none (an older kdsl), with 1 and a traceback when it has no kdsl.
 */
export function debugAdapterCheckCommand(python: string): CommandLine {
  return {
    command: python,
    args: ['-c', 'import importlib.util, sys; sys.exit(0 if importlib.util.find_spec("lsp.dap") else 3)'],
  };
}

/** Exits with status 0 when kdsl is importable by `python`. */
export function checkCommand(python: string): CommandLine {
  return { command: python, args: ['-c', 'import dsl, lsp'] };
}

/** Where the interpreter came from, as the message about it says it. */
const SOURCE_WORDS: Record<InterpreterSource, string> = {
  setting: 'set in kdsl.interpreterPath',
  pythonExtension: 'selected in the Python extension',
  default: 'the default: kdsl.interpreterPath is empty and the Python extension selected none',
};

/**
 * Why the server cannot start with `interpreter`, as the one message the user
 * sees: which Python, where it came from, what failed (the last line of its
 * error output: `ModuleNotFoundError: No module named 'dsl'`) and the setting
 * that chooses another.
 */
export function interpreterProblem(interpreter: ResolvedInterpreter, notFound: boolean, detail: string): string {
  const last = detail.split(/\r?\n/).map((line) => line.trim()).filter((line) => line !== '').pop();
  const failed = notFound ? 'was not found' : `cannot import kdsl${last ? ` (${last})` : ''}`;
  const fix = notFound ? '' : ', or install kdsl into this one';
  return `kdsl: the Python interpreter "${interpreter.python}" (${SOURCE_WORDS[interpreter.source]}) ${failed}. Set kdsl.interpreterPath to a Python that has kdsl installed${fix}.`;
}

/**
 * Why the debugger cannot start with `interpreter`, as `interpreterProblem` says it for the
 * server; `noAdapter`: its kdsl is one without the debug adapter (exit status 3 of
 * `debugAdapterCheckCommand`).
 */
export function debugAdapterProblem(
  interpreter: ResolvedInterpreter,
  notFound: boolean,
  noAdapter: boolean,
  detail: string,
): string {
  if (!noAdapter) {
    return interpreterProblem(interpreter, notFound, detail);
  }
  const which = `"${interpreter.python}" (${SOURCE_WORDS[interpreter.source]})`;
  return (
    `kdsl: the Python interpreter ${which} has a kdsl without the debug adapter (lsp.dap). ` +
    'Update kdsl there (python -m pip install -U kdsl), or set kdsl.interpreterPath to a Python with a newer kdsl.'
  );
}

export function installCommand(python: string): CommandLine {
  return { command: python, args: ['-m', 'pip', 'install', 'kdsl'] };
}

/** Quotes one word for a POSIX shell (only when needed). */
export function quotePosix(word: string): string {
  if (word !== '' && /^[A-Za-z0-9_\-./:=@%+,]+$/.test(word)) {
    return word;
  }
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/** Quotes one word for PowerShell (only when needed). */
export function quotePowerShell(word: string): string {
  if (word !== '' && /^[A-Za-z0-9_\-.\\/:=@+,]+$/.test(word)) {
    return word;
  }
  return `'${word.replace(/'/g, "''")}'`;
}

/**
 * A command line to type into a terminal: POSIX shell quoting, or PowerShell
 * quoting (with the call operator) on Windows.
 */
export function shellCommandLine(line: CommandLine, platform: NodeJS.Platform = process.platform): string {
  if (platform === 'win32') {
    return ['&', quotePowerShell(line.command), ...line.args.map(quotePowerShell)].join(' ');
  }
  return [line.command, ...line.args].map(quotePosix).join(' ');
}

/**
 * Working directory of the server. In an untrusted workspace the server starts
 * outside the workspace so that `-m lsp` cannot import a module of the
 * workspace by accident.
 */
export function serverCwd(workspaceTrusted: boolean, workspaceFolder: string | undefined, fallbackDir: string): string {
  return workspaceTrusted && workspaceFolder !== undefined ? workspaceFolder : fallbackDir;
}

/**
 * Asks the exports of the `ms-python.python` extension for the selected
 * interpreter. Supports the environments API (`environments.getActiveEnvironmentPath`)
 * and the older `settings.getExecutionDetails`. Returns undefined when neither
 * gives a path.
 */
export async function queryPythonExtension(exports: unknown, resource?: unknown): Promise<string | undefined> {
  if (typeof exports !== 'object' || exports === null) {
    return undefined;
  }
  const api = exports as {
    environments?: { getActiveEnvironmentPath?: (resource?: unknown) => unknown };
    settings?: { getExecutionDetails?: (resource?: unknown) => unknown };
  };
  try {
    const getActive = api.environments?.getActiveEnvironmentPath;
    if (typeof getActive === 'function') {
      const env = (await getActive.call(api.environments, resource)) as { path?: unknown } | undefined;
      if (env && typeof env.path === 'string' && env.path.trim() !== '') {
        return env.path.trim();
      }
    }
  } catch {
    // fall through to the older API
  }
  try {
    const getDetails = api.settings?.getExecutionDetails;
    if (typeof getDetails === 'function') {
      const details = (await getDetails.call(api.settings, resource)) as { execCommand?: unknown } | undefined;
      const exec = details?.execCommand;
      if (Array.isArray(exec) && exec.length === 1 && typeof exec[0] === 'string' && exec[0].trim() !== '') {
        return exec[0].trim();
      }
    }
  } catch {
    // no usable API
  }
  return undefined;
}
