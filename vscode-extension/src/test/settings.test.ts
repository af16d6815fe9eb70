import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  DEFAULT_SETTINGS,
  needsRestart,
  parseSettings,
  readSettings,
  SETTING_KEYS,
  toInitializationOptions,
  type SettingKey,
} from '../settings';

describe('parseSettings', () => {
  it('returns the defaults for an empty or missing object', () => {
    const expected = {
      target: '',
      workerTimeoutSeconds: 10,
      workerMemoryLimitMb: 4096,
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
        'worker.timeoutSeconds': 2.5,
        'worker.memoryLimitMb': 1024,
        debounceMs: 0,
        executeUserCode: false,
        interpreterPath: '  /opt/py/bin/python  ',
        'trace.server': 'verbose',
      }),
      {
        target: 'sm_90',
        workerTimeoutSeconds: 2.5,
        workerMemoryLimitMb: 1024,
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
        target: 'sm_75',
        'worker.timeoutSeconds': -1,
        'worker.memoryLimitMb': Number.NaN,
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
  });

  it('rounds the memory limit and the debounce delay to integers', () => {
    const s = parseSettings({ 'worker.memoryLimitMb': 511.6, debounceMs: 99.4 });
    assert.equal(s.workerMemoryLimitMb, 512);
    assert.equal(s.debounceMs, 99);
  });

  it('accepts every target of the enum, trimmed', () => {
    for (const t of ['sm_80', 'sm_86', 'sm_89', 'sm_90']) {
      assert.equal(parseSettings({ target: ` ${t} ` }).target, t);
    }
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
  const settings = parseSettings({ target: 'sm_89', 'worker.timeoutSeconds': 30, 'worker.memoryLimitMb': 2048, debounceMs: 150 });

  it('maps the settings to the server names', () => {
    assert.deepEqual(toInitializationOptions(settings, true), {
      target: 'sm_89',
      timeoutSeconds: 30,
      memoryLimitMb: 2048,
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
  });
});
