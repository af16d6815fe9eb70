// The extension's settings: parsing the raw configuration values into a typed,
// defaulted object, and turning it into the server's initializationOptions.
// This module does not import `vscode` so that it can be unit-tested.

export const SECTION = 'kdsl';

export const TARGETS = ['sm_80', 'sm_86', 'sm_89', 'sm_90'] as const;
/** A GPU architecture, or '' for the server default. */
export type Target = (typeof TARGETS)[number] | '';

export const TRACE_LEVELS = ['off', 'messages', 'verbose'] as const;
export type TraceLevel = (typeof TRACE_LEVELS)[number];

export interface KdslSettings {
  target: Target;
  workerTimeoutSeconds: number;
  workerMemoryLimitMb: number;
  debounceMs: number;
  executeUserCode: boolean;
  interpreterPath: string;
  traceServer: TraceLevel;
}

export const DEFAULT_SETTINGS: Readonly<KdslSettings> = Object.freeze({
  target: '',
  workerTimeoutSeconds: 10,
  workerMemoryLimitMb: 4096,
  debounceMs: 300,
  executeUserCode: true,
  interpreterPath: '',
  traceServer: 'off',
});

/** Keys (relative to the `kdsl` section) read from the configuration. */
export const SETTING_KEYS = [
  'target',
  'worker.timeoutSeconds',
  'worker.memoryLimitMb',
  'debounceMs',
  'executeUserCode',
  'interpreterPath',
  'trace.server',
] as const;
export type SettingKey = (typeof SETTING_KEYS)[number];

/** Raw values keyed by the dotted setting names of SETTING_KEYS. */
export type RawSettings = Partial<Record<SettingKey, unknown>>;

/** The options the server expects in `initialize` and `workspace/didChangeConfiguration`. */
export interface InitializationOptions {
  target: Target;
  timeoutSeconds: number;
  memoryLimitMb: number;
  debounceMs: number;
  trusted: boolean;
}

function positiveNumber(value: unknown, fallback: number): number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : fallback;
}

function nonNegativeNumber(value: unknown, fallback: number): number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : fallback;
}

function oneOf<T extends string>(allowed: readonly T[], value: unknown, fallback: T): T {
  if (typeof value !== 'string') {
    return fallback;
  }
  const trimmed = value.trim();
  return (allowed as readonly string[]).includes(trimmed) ? (trimmed as T) : fallback;
}

/**
 * Parses raw configuration values. Missing values and values of the wrong
 * type or out of range fall back to the defaults.
 */
export function parseSettings(raw: RawSettings | undefined | null): KdslSettings {
  const r: RawSettings = raw ?? {};
  return {
    target: oneOf<Target>(['', ...TARGETS], r['target'], DEFAULT_SETTINGS.target),
    workerTimeoutSeconds: positiveNumber(r['worker.timeoutSeconds'], DEFAULT_SETTINGS.workerTimeoutSeconds),
    workerMemoryLimitMb: Math.round(positiveNumber(r['worker.memoryLimitMb'], DEFAULT_SETTINGS.workerMemoryLimitMb)),
    debounceMs: Math.round(nonNegativeNumber(r['debounceMs'], DEFAULT_SETTINGS.debounceMs)),
    executeUserCode:
      typeof r['executeUserCode'] === 'boolean' ? r['executeUserCode'] : DEFAULT_SETTINGS.executeUserCode,
    interpreterPath: typeof r['interpreterPath'] === 'string' ? r['interpreterPath'].trim() : '',
    traceServer: oneOf<TraceLevel>(TRACE_LEVELS, r['trace.server'], DEFAULT_SETTINGS.traceServer),
  };
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
    timeoutSeconds: settings.workerTimeoutSeconds,
    memoryLimitMb: settings.workerMemoryLimitMb,
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
