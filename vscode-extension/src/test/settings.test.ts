import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import {
  answerConfiguration,
  CLIENT_ONLY_KEYS,
  declaredSettings,
  DEFAULT_SETTINGS,
  LIVE_KEYS,
  overlaySettings,
  parseSettings,
  readSettings,
  SECTION,
  SETTING_FIELDS,
  SETTING_KEYS,
  settingsChange,
  toServerSettings,
  type JsonObject,
  type Manifest,
  type RawSettings,
  type SettingKey,
} from '../settings';

// out/test/ -> vscode-extension/package.json
const EXTENSION = path.join(__dirname, '..', '..');
const MANIFEST = JSON.parse(readFileSync(path.join(EXTENSION, 'package.json'), 'utf8')) as Manifest;

/** What the extension sends the server, shared with the server's tests (see its "//" entry). */
interface SentCase {
  settings: RawSettings;
  sent: JsonObject;
}
const SENT = JSON.parse(readFileSync(path.join(EXTENSION, 'src', 'test', 'data', 'server-settings.json'), 'utf8')) as {
  workspaceTrusted: boolean;
  defaults: SentCase;
  changed: SentCase;
};

/** The value at a dotted key of a nested object (`worker.sandbox`). */
function at(object: unknown, key: string): unknown {
  return key.split('.').reduce<unknown>((o, part) => (typeof o === 'object' && o !== null ? (o as JsonObject)[part] : undefined), object);
}

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
      inlayHintsLineCost: false,
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
        'inlayHints.lineCost': true,
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
        inlayHintsLineCost: true,
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
        'inlayHints.lineCost': 1,
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

describe('package.json and the settings read', () => {
  it('declares every setting the extension reads, and no other', () => {
    const declared = Object.keys(MANIFEST.contributes?.configuration?.properties ?? {});
    assert.deepEqual(declared.sort(), SETTING_KEYS.map((key) => `${SECTION}.${key}`).sort());
  });
});

describe('toServerSettings', () => {
  // The server's side of this: tests/lsp/test_capabilities_manifest.py reads every setting of
  // lsp/settings.py from the same file, so a setting the extension does not send fails there.
  for (const name of ['defaults', 'changed'] as const) {
    it(`sends what the server's tests read (server-settings.json, ${name})`, () => {
      const { settings, sent } = SENT[name];
      assert.deepEqual(toServerSettings(parseSettings(settings), SENT.workspaceTrusted), sent);
    });
  }

  it('sends every declared setting but the extension\'s own, at its place in the section', () => {
    const sent = toServerSettings(parseSettings(SENT.changed.settings), true);
    for (const key of SETTING_KEYS) {
      const value = at(sent, key);
      if (CLIENT_ONLY_KEYS.includes(key)) {
        assert.equal(value, undefined, key);
      } else {
        assert.notEqual(value, DEFAULT_SETTINGS[SETTING_FIELDS[key]], `${key}: the changed case changes it`);
        assert.equal(value, parseSettings(SENT.changed.settings)[SETTING_FIELDS[key]], key);
      }
    }
  });

  it('sends the workspace trust beside the setting: the server runs code only when both are true', () => {
    const settings = parseSettings({});
    assert.deepEqual([toServerSettings(settings, false).executeUserCode, toServerSettings(settings, false).trusted], [true, false]);
    const off = toServerSettings({ ...settings, executeUserCode: false }, true);
    assert.deepEqual([off.executeUserCode, off.trusted], [false, true]);
  });

  it('sends bad values as the defaults', () => {
    const sent = toServerSettings(parseSettings({ 'inlayHints.lineCost': 'yes', 'worker.sandbox': 'off' }), true);
    assert.equal(at(sent, 'inlayHints.lineCost'), false);
    assert.equal(at(sent, 'worker.sandbox'), 'standard');
  });
});

describe('overlaySettings and answerConfiguration', () => {
  const ours = toServerSettings(parseSettings({ 'inlayHints.lineCost': true }), true);

  it('keeps keys the extension does not know, at any depth, under its own values', () => {
    const section = {
      target: 'sm_90',
      futureSetting: 7,
      worker: { timeoutSeconds: 'ten', futureLimit: 3 },
      inlayHints: { lineCost: true, futureHint: 'x' },
    };
    const merged = overlaySettings(section, ours);
    assert.equal(merged.futureSetting, 7);
    assert.equal(at(merged, 'worker.futureLimit'), 3);
    assert.equal(at(merged, 'inlayHints.futureHint'), 'x');
    assert.equal(at(merged, 'worker.timeoutSeconds'), 10, 'a bad value is replaced by the parsed one');
    assert.equal(merged.target, '', 'the extension\'s value wins');
    assert.equal(at(merged, 'inlayHints.lineCost'), true);
    assert.deepEqual(section.worker, { timeoutSeconds: 'ten', futureLimit: 3 }, 'the section is not changed');
  });

  it('is the extension\'s object where VS Code has no section', () => {
    assert.deepEqual(overlaySettings(undefined, ours), ours);
    assert.deepEqual(overlaySettings(null, ours), ours);
  });

  it('answers the kdsl section with it, and other sections as VS Code does', () => {
    const answers = [{ inlayHints: { lineCost: false }, trusted: true }, { pythonPath: 'python3' }, null];
    const answer = answerConfiguration([{ section: 'kdsl' }, { section: 'python' }, { section: null }], answers, ours);
    assert.equal(at(answer[0], 'inlayHints.lineCost'), true);
    assert.deepEqual(answer.slice(1), [{ pythonPath: 'python3' }, null]);
  });

  it('answers every setting the server reads, as initializationOptions carry them', () => {
    const sent = toServerSettings(parseSettings(SENT.changed.settings), true);
    const [answer] = answerConfiguration([{ section: SECTION }], [{}], sent);
    assert.deepEqual(answer, SENT.changed.sent);
  });
});

describe('settingsChange', () => {
  const base = parseSettings({});
  it('is none for equal settings and for a trace change only', () => {
    assert.equal(settingsChange(base, parseSettings({})), 'none');
    assert.equal(settingsChange(base, { ...base, traceServer: 'messages' }), 'none');
  });
  it('sends what the server applies while it runs', () => {
    assert.deepEqual([...LIVE_KEYS], ['inlayHints.lineCost', 'debounceMs', 'device']);
    assert.equal(settingsChange(base, { ...base, inlayHintsLineCost: true }), 'send');
    assert.equal(settingsChange(base, { ...base, debounceMs: 301 }), 'send');
    assert.equal(settingsChange(base, { ...base, device: 1, traceServer: 'verbose' }), 'send');
  });
  it('restarts the server for the others', () => {
    assert.equal(settingsChange(base, { ...base, target: 'sm_80' }), 'restart');
    assert.equal(settingsChange(base, { ...base, interpreterPath: '/usr/bin/python3' }), 'restart');
    assert.equal(settingsChange(base, { ...base, executeUserCode: false }), 'restart');
    assert.equal(settingsChange(base, { ...base, workerSandbox: 'strict' }), 'restart');
    assert.equal(settingsChange(base, { ...base, workerTimeoutSeconds: 20, inlayHintsLineCost: true }), 'restart');
  });
});
