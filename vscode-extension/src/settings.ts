// The extension's settings: parsing the raw configuration values into a typed,
// defaulted object, and turning it into what the server reads.
// This module does not import `vscode` so that it can be unit-tested.
//
// The server reads one object, the `kdsl` section in VS Code's own shape
// (`{worker: {timeoutSeconds}}`, lsp/settings.py's CLIENT_KEYS), from three
// messages: `initialize` (initializationOptions), the `workspace/configuration`
// answer and `workspace/didChangeConfiguration`. `toServerSettings` makes that
// object for all three, so no setting can reach the server by one and not the
// others; src/test/data/server-settings.json holds what it makes, and
// tests/lsp/test_capabilities_manifest.py checks that the server reads every
// one of its settings from it.
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
  /** Inlay hints also show each kernel line's SASS instructions. */
  inlayHintsLineCost: boolean;
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
  'inlayHints.lineCost': 'inlayHintsLineCost',
  interpreterPath: 'interpreterPath',
  'trace.server': 'traceServer',
} as const satisfies Record<string, keyof KdslSettings>;
export type SettingKey = keyof typeof SETTING_FIELDS;
export const SETTING_KEYS = Object.keys(SETTING_FIELDS) as SettingKey[];

/** Raw values keyed by the dotted setting names of SETTING_KEYS. */
export type RawSettings = Partial<Record<SettingKey, unknown>>;

/** Settings only the extension reads (which Python runs the server, the protocol trace): never sent. */
export const CLIENT_ONLY_KEYS: readonly SettingKey[] = ['interpreterPath', 'trace.server'];

/**
 * Settings the server applies while it runs, so a change is sent to it
 * (`workspace/didChangeConfiguration`). A change of any other server setting
 * restarts the server: the target shapes every report and IR view already
 * shown, the worker's limits and sandbox how your code runs, and trust whether
 * it runs at all.
 */
export const LIVE_KEYS: readonly SettingKey[] = ['inlayHints.lineCost', 'debounceMs', 'device'];

/** A JSON object, as the configuration and the protocol carry it. */
export type JsonObject = { [key: string]: unknown };

/** What a change of the settings asks for: nothing, telling the running server, or a new server. */
export type SettingsChange = 'none' | 'send' | 'restart';

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

function boolean(value: unknown): boolean | undefined {
  return typeof value === 'boolean' ? value : undefined;
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
  executeUserCode: boolean,
  'inlayHints.lineCost': boolean,
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

function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The `kdsl` section as the server reads it: every setting but the
 * extension's own, as parsed (a bad value is already the default), nested by
 * its dotted name as VS Code nests it, and `trusted`, the workspace's trust.
 * The server runs user code only when both `executeUserCode` and `trusted` are true.
 */
export function toServerSettings(settings: KdslSettings, workspaceTrusted: boolean): JsonObject {
  const section: JsonObject = {};
  for (const key of SETTING_KEYS) {
    if (CLIENT_ONLY_KEYS.includes(key)) {
      continue;
    }
    const path = key.split('.');
    let parent = section;
    for (const part of path.slice(0, -1)) {
      const child = isJsonObject(parent[part]) ? parent[part] : {};
      parent[part] = child;
      parent = child;
    }
    parent[path[path.length - 1]] = settings[SETTING_FIELDS[key]];
  }
  section.trusted = workspaceTrusted;
  return section;
}

/**
 * `ours` laid over `section` (the `kdsl` section as VS Code has it), object by
 * object: the extension's values win, and keys it does not know (a setting of
 * a newer server, written in settings.json) still reach the server.
 */
export function overlaySettings(section: unknown, ours: JsonObject): JsonObject {
  const out: JsonObject = isJsonObject(section) ? { ...section } : {};
  for (const [key, value] of Object.entries(ours)) {
    out[key] = isJsonObject(value) ? overlaySettings(out[key], value) : value;
  }
  return out;
}

/** One item of a `workspace/configuration` request, as the client library passes it. */
export interface ConfigurationItem {
  section?: string | null;
}

/**
 * The answer to `workspace/configuration`: VS Code's own answer, with the
 * `kdsl` section overlaid with what the server reads (`server`).
 */
export function answerConfiguration(items: readonly ConfigurationItem[], answers: readonly unknown[], server: JsonObject): unknown[] {
  return items.map((item, i) => (item.section === SECTION ? overlaySettings(answers[i], server) : answers[i]));
}

/** What changed settings need: see LIVE_KEYS; the trace level the client library applies itself. */
export function settingsChange(before: KdslSettings, after: KdslSettings): SettingsChange {
  const changed = SETTING_KEYS.filter((key) => before[SETTING_FIELDS[key]] !== after[SETTING_FIELDS[key]]);
  if (changed.some((key) => key !== 'trace.server' && !LIVE_KEYS.includes(key))) {
    return 'restart';
  }
  return changed.some((key) => LIVE_KEYS.includes(key)) ? 'send' : 'none';
}
