import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import {
  declaredSettings,
  DEFAULT_SETTINGS,
  needsRestart,
  parseSettings,
  readSettings,
  SETTING_KEYS,
  toInitializationOptions,
  type Manifest,
  type SettingKey,
} from '../settings';

// out/test/ -> vscode-extension/package.json
const MANIFEST = JSON.parse(readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8')) as Manifest;

describe('parseSettings', () => {
  it('returns the defaults for an empty or missing object', () => {
    const expected = {
      target: '',
      device: 0,
      workerTimeoutSeconds: 10,
      workerMemoryLimitMb: 4096,
      workerSandbox: 'standard',
      debounceMs: 300,
      executeUserCode: true,
      interpreterPath: '',
      traceServer: 'off',
    };
    assert.deepEqual(parseSettings({}), expected);
    assert.deepEqual(parseSettings(undefined), expected);
    assert.deepEqual(parseSettings(null), expected);
    assert.deepEqual({ ...DEFAULT_SETTINGS }, expected);
  });

  it('keeps valid values', () => {
    assert.deepEqual(
      parseSettings({
        target: 'sm_90',
        device: 3,
        'worker.timeoutSeconds': 2.5,
        'worker.memoryLimitMb': 1024,
        'worker.sandbox': 'strict',
        debounceMs: 0,
        executeUserCode: false,
        interpreterPath: '  /opt/py/bin/python  ',
        'trace.server': 'verbose',
      }),
      {
        target: 'sm_90',
        device: 3,
        workerTimeoutSeconds: 2.5,
        workerMemoryLimitMb: 1024,
        workerSandbox: 'strict',
        debounceMs: 0,
        executeUserCode: false,
        interpreterPath: '/opt/py/bin/python',
        traceServer: 'verbose',
      },
    );
  });

  it('replaces bad values with the defaults', () => {
    assert.deepEqual(
      parseSettings({
        target: 90,
        device: 1.5,
        'worker.timeoutSeconds': -1,
        'worker.memoryLimitMb': Number.NaN,
        'worker.sandbox': 'off',
        debounceMs: '300',
        executeUserCode: 'no',
        interpreterPath: 42,
        'trace.server': 'loud',
      }),
      { ...DEFAULT_SETTINGS },
    );
    assert.equal(parseSettings({ 'worker.timeoutSeconds': 0 }).workerTimeoutSeconds, 10);
    assert.equal(parseSettings({ 'worker.timeoutSeconds': Infinity }).workerTimeoutSeconds, 10);
    assert.equal(parseSettings({ debounceMs: -5 }).debounceMs, 300);
    assert.equal(parseSettings({ target: null }).target, '');
    assert.equal(parseSettings({ device: -1 }).device, 0);
    assert.equal(parseSettings({ device: '1' }).device, 0);
  });

  it('rounds the memory limit and the debounce delay to integers', () => {
    const s = parseSettings({ 'worker.memoryLimitMb': 511.6, debounceMs: 99.4 });
    assert.equal(s.workerMemoryLimitMb, 512);
    assert.equal(s.debounceMs, 99);
  });

  it('passes any target name through, trimmed: the server knows its targets', () => {
    for (const t of ['sm_80', 'sm_90', 'sm_100']) {
      assert.equal(parseSettings({ target: ` ${t} ` }).target, t);
    }
  });
});

describe('declaredSettings', () => {
  const manifest = (properties: Record<string, { default?: unknown; enum?: unknown[] }>): Manifest => ({
    contributes: { configuration: { properties } },
  });
  const complete = Object.fromEntries(
    Object.entries(MANIFEST.contributes?.configuration?.properties ?? {}).map(([k, v]) => [k, { ...v }]),
  );

  it('reads the defaults and enums of package.json', () => {
    const declared = declaredSettings(MANIFEST);
    assert.deepEqual(declared.defaults, DEFAULT_SETTINGS);
    assert.deepEqual(declared.choices, {
      target: ['', 'sm_80', 'sm_86', 'sm_89', 'sm_90', 'sm_90a'],
      'worker.sandbox': ['standard', 'strict'],
      'trace.server': ['off', 'messages', 'verbose'],
    });
  });

  it('falls back to what a manifest declares', () => {
    const declared = declaredSettings(
      manifest({ ...complete, 'kdsl.debounceMs': { default: 50 }, 'kdsl.worker.sandbox': { default: 'b', enum: ['a', 'b'] } }),
    );
    assert.equal(parseSettings({ debounceMs: -1 }, declared).debounceMs, 50);
    assert.equal(parseSettings({ 'worker.sandbox': 'strict' }, declared).workerSandbox, 'b');
    assert.equal(parseSettings({ 'worker.sandbox': 'a' }, declared).workerSandbox, 'a');
  });

  it('refuses a manifest without a valid default for a setting', () => {
    assert.throws(() => declaredSettings(manifest({})), /no valid default for kdsl\.target/);
    assert.throws(
      () => declaredSettings(manifest({ ...complete, 'kdsl.worker.sandbox': { default: 'loose', enum: ['standard'] } })),
      /kdsl\.worker\.sandbox/,
    );
  });
});

describe('readSettings', () => {
  it('asks for every key once through the lookup function', () => {
    const asked: SettingKey[] = [];
    const settings = readSettings((key) => {
      asked.push(key);
      return key === 'target' ? 'sm_86' : undefined;
    });
    assert.deepEqual(asked, [...SETTING_KEYS]);
    assert.deepEqual(settings, { ...DEFAULT_SETTINGS, target: 'sm_86' });
  });
});

describe('toInitializationOptions', () => {
  const settings = parseSettings({
    target: 'sm_89',
    device: 1,
    'worker.timeoutSeconds': 30,
    'worker.memoryLimitMb': 2048,
    'worker.sandbox': 'strict',
    debounceMs: 150,
  });

  it('maps the settings to the server names', () => {
    assert.deepEqual(toInitializationOptions(settings, true), {
      target: 'sm_89',
      device: 1,
      timeoutSeconds: 30,
      memoryLimitMb: 2048,
      sandbox: 'strict',
      debounceMs: 150,
      trusted: true,
    });
  });

  it('is untrusted when the workspace is untrusted or execution is off', () => {
    assert.equal(toInitializationOptions(settings, false).trusted, false);
    assert.equal(toInitializationOptions({ ...settings, executeUserCode: false }, true).trusted, false);
    assert.equal(toInitializationOptions({ ...settings, executeUserCode: false }, false).trusted, false);
  });

  it('passes an empty target through as the server default', () => {
    assert.equal(toInitializationOptions(parseSettings({}), true).target, '');
  });
});

describe('needsRestart', () => {
  const base = parseSettings({});
  it('is false for equal settings and for a trace change only', () => {
    assert.equal(needsRestart(base, parseSettings({})), false);
    assert.equal(needsRestart(base, { ...base, traceServer: 'messages' }), false);
  });
  it('is true when a server setting changes', () => {
    assert.equal(needsRestart(base, { ...base, target: 'sm_80' }), true);
    assert.equal(needsRestart(base, { ...base, interpreterPath: '/usr/bin/python3' }), true);
    assert.equal(needsRestart(base, { ...base, executeUserCode: false }), true);
    assert.equal(needsRestart(base, { ...base, debounceMs: 301 }), true);
    assert.equal(needsRestart(base, { ...base, workerSandbox: 'strict' }), true);
  });
});
