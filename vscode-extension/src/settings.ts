// The extension's settings: parsing the raw configuration values into a typed,
// defaulted object, and turning it into the server's initializationOptions.
// This module does not import `vscode` so that it can be unit-tested.
//
// The defaults and the allowed values are the ones package.json declares
// (`contributes.configuration`), read from it here rather than written again:
// VS Code already applies those defaults to settings the user left alone, and
// this module falls back to the same ones for values of the wrong type. The
// server's own defaults (`kdsl/capabilities`) are kept equal to package.json by
// tests/lsp/test_capabilities_manifest.py.

export const SECTION = 'kdsl';

export interface KdslSettings {
  /** A GPU architecture such as `sm_90`, or '' for the server's choice. */
  target: string;
  /** The GPU ordinal "Run on GPU" runs on (`cuda:N`). */
  device: number;
  workerTimeoutSeconds: number;
  workerMemoryLimitMb: number;
  /** How the worker contains each run (one of package.json's `kdsl.worker.sandbox` enum). */
  workerSandbox: string;
  debounceMs: number;
  executeUserCode: boolean;
  interpreterPath: string;
  /** `off`, `messages` or `verbose` (package.json's `kdsl.trace.server` enum). */
  traceServer: string;
}

/** Keys (relative to the `kdsl` section) read from the configuration, and the field each fills. */
export const SETTING_FIELDS = {
  target: 'target',
  device: 'device',
  'worker.timeoutSeconds': 'workerTimeoutSeconds',
  'worker.memoryLimitMb': 'workerMemoryLimitMb',
  'worker.sandbox': 'workerSandbox',
  debounceMs: 'debounceMs',
  executeUserCode: 'executeUserCode',
  interpreterPath: 'interpreterPath',
  'trace.server': 'traceServer',
} as const satisfies Record<string, keyof KdslSettings>;
export type SettingKey = keyof typeof SETTING_FIELDS;
export const SETTING_KEYS = Object.keys(SETTING_FIELDS) as SettingKey[];

/** Raw values keyed by the dotted setting names of SETTING_KEYS. */
export type RawSettings = Partial<Record<SettingKey, unknown>>;

/** The options the server expects in `initialize` and `workspace/didChangeConfiguration`. */
export interface InitializationOptions {
  target: string;
  device: number;
  timeoutSeconds: number;
  memoryLimitMb: number;
  sandbox: string;
  debounceMs: number;
  trusted: boolean;
}

/** The part of package.json that declares the settings. */
export interface Manifest {
  contributes?: { configuration?: { properties?: Record<string, { default?: unknown; enum?: unknown[] }> } };
}

/** What package.json declares: each setting's default, and the allowed values of those with an enum. */
export interface Declared {
  defaults: Readonly<KdslSettings>;
  choices: Partial<Record<SettingKey, readonly string[]>>;
}

/** A valid value, or undefined (then the default is used). */
type Reader = (value: unknown, choices: readonly string[] | undefined) => unknown;

function positiveNumber(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : undefined;
}

function nonNegativeNumber(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : undefined;
}

function round(value: number | undefined): number | undefined {
  return value === undefined ? undefined : Math.round(value);
}

function trimmed(value: unknown): string | undefined {
  return typeof value === 'string' ? value.trim() : undefined;
}

function oneOf(value: unknown, choices: readonly string[] | undefined): string | undefined {
  const text = trimmed(value);
  return text !== undefined && (choices === undefined || choices.includes(text)) ? text : undefined;
}

const READERS: Record<SettingKey, Reader> = {
  // Any name: the server knows its targets (a newer one may know more than package.json's enum).
  target: trimmed,
  device: (v) => (typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : undefined),
  'worker.timeoutSeconds': positiveNumber,
  'worker.memoryLimitMb': (v) => round(positiveNumber(v)),
  'worker.sandbox': oneOf,
  debounceMs: (v) => round(nonNegativeNumber(v)),
  executeUserCode: (v) => (typeof v === 'boolean' ? v : undefined),
  interpreterPath: trimmed,
  'trace.server': oneOf,
};

/** Reads the declarations of every setting; throws when one has no valid default (a packaging error). */
export function declaredSettings(manifest: Manifest): Declared {
  const properties = manifest.contributes?.configuration?.properties ?? {};
  const defaults: Record<string, unknown> = {};
  const choices: Partial<Record<SettingKey, readonly string[]>> = {};
  for (const key of SETTING_KEYS) {
    const declaration = properties[`${SECTION}.${key}`];
    const values = declaration?.enum;
    if (Array.isArray(values) && values.every((v): v is string => typeof v === 'string')) {
      choices[key] = values;
    }
    const value = declaration === undefined ? undefined : READERS[key](declaration.default, choices[key]);
    if (value === undefined) {
      throw new Error(`package.json declares no valid default for ${SECTION}.${key}`);
    }
    defaults[SETTING_FIELDS[key]] = value;
  }
  return { defaults: Object.freeze(defaults as unknown as KdslSettings), choices };
}

// The extension's own package.json: `out/settings.js` and `src/settings.ts` both lie one level below it.
const DECLARED: Declared = declaredSettings(require('../package.json') as Manifest);
export const DEFAULT_SETTINGS: Readonly<KdslSettings> = DECLARED.defaults;

/**
 * Parses raw configuration values. Missing values and values of the wrong
 * type, out of range or not among the declared choices fall back to the defaults.
 */
export function parseSettings(raw: RawSettings | undefined | null, declared: Declared = DECLARED): KdslSettings {
  const r: RawSettings = raw ?? {};
  const settings: Record<string, unknown> = {};
  for (const key of SETTING_KEYS) {
    const field = SETTING_FIELDS[key];
    settings[field] = READERS[key](r[key], declared.choices[key]) ?? declared.defaults[field];
  }
  return settings as unknown as KdslSettings;
}

/**
 * Reads every setting through a lookup function such as
 * `vscode.workspace.getConfiguration('kdsl').get`.
 */
export function readSettings(get: (key: SettingKey) => unknown): KdslSettings {
  const raw: RawSettings = {};
  for (const key of SETTING_KEYS) {
    raw[key] = get(key);
  }
  return parseSettings(raw);
}

/**
 * The server's options. User code is executed only when the setting allows it
 * and the workspace is trusted.
 */
export function toInitializationOptions(settings: KdslSettings, workspaceTrusted: boolean): InitializationOptions {
  return {
    target: settings.target,
    device: settings.device,
    timeoutSeconds: settings.workerTimeoutSeconds,
    memoryLimitMb: settings.workerMemoryLimitMb,
    sandbox: settings.workerSandbox,
    debounceMs: settings.debounceMs,
    trusted: settings.executeUserCode && workspaceTrusted,
  };
}

/** Settings whose change needs a new server process (all but the trace level). */
export function needsRestart(before: KdslSettings, after: KdslSettings): boolean {
  return (Object.keys(before) as (keyof KdslSettings)[]).some(
    (key) => key !== 'traceServer' && before[key] !== after[key],
  );
}
