import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CapabilitiesCache, compareSettings, parseCapabilities, stageNamed } from '../capabilities';
import { DEFAULT_SETTINGS, parseSettings } from '../settings';
import { CAPABILITIES, FakeClient } from './fixtures';

describe('parseCapabilities', () => {
  it('keeps a complete answer as it is', () => {
    assert.deepEqual(parseCapabilities(structuredClone(CAPABILITIES)), CAPABILITIES);
  });

  it('leaves out binary and malformed stages and fills in missing fields', () => {
    const parsed = parseCapabilities({
      stages: [
        { name: 'ptx', language: 'ptx', extension: '.ptx' },
        { name: 'cubin', language: '', extension: '.cubin', binary: true },
        { name: '', language: 'x', extension: '.x' },
        'sass',
        null,
      ],
      targets: ['sm_90', 7],
      choices: { 'worker.sandbox': ['standard', null] },
    });
    assert.deepEqual(parsed, {
      stages: [{ name: 'ptx', language: 'ptx', extension: '.ptx', binary: false, needsViews: true, madeBy: 'pipeline' }],
      targets: ['sm_90'],
      defaultTarget: '',
      settings: {},
      choices: { 'worker.sandbox': ['standard'] },
    });
  });

  it('refuses an answer without stages (a server that does not know the request)', () => {
    for (const raw of [null, undefined, {}, { stages: [] }, { stages: [{ name: 'cubin', language: '', extension: '', binary: true }] }]) {
      assert.throws(() => parseCapabilities(raw), /did not list its stages/);
    }
  });
});

describe('CapabilitiesCache', () => {
  it('asks each client once', async () => {
    const cache = new CapabilitiesCache();
    const client = new FakeClient();
    assert.equal(cache.known, undefined);
    const [a, b] = await Promise.all([cache.get(client), cache.get(client)]);
    assert.deepEqual(a, CAPABILITIES);
    assert.equal(a, b);
    assert.equal(await cache.get(client), a);
    assert.deepEqual(client.asked, ['kdsl/capabilities']);
    assert.equal(cache.known, a);
  });

  it('asks again when the server restarted (a new client)', async () => {
    const cache = new CapabilitiesCache();
    await cache.get(new FakeClient());
    const restarted = new FakeClient({ ...CAPABILITIES, targets: ['sm_100'] });
    assert.deepEqual((await cache.get(restarted)).targets, ['sm_100']);
    assert.deepEqual(cache.known?.targets, ['sm_100']);
    assert.deepEqual(restarted.asked, ['kdsl/capabilities']);
  });

  it('asks again after a failure, and keeps the last good answer meanwhile', async () => {
    const cache = new CapabilitiesCache();
    await cache.get(new FakeClient());
    const client = new FakeClient(new Error('server busy'));
    await assert.rejects(cache.get(client), /server busy/);
    assert.deepEqual(cache.known, CAPABILITIES);
    client.answerWith(null);
    await assert.rejects(cache.get(client), /did not list its stages/);
    client.answerWith(CAPABILITIES);
    assert.deepEqual(await cache.get(client), CAPABILITIES);
    assert.equal(client.asked.length, 3);
  });
});

describe('stageNamed', () => {
  it('finds a stage of the answer by name', () => {
    assert.equal(stageNamed(CAPABILITIES, 'llvm')?.extension, '.ll');
    assert.equal(stageNamed(CAPABILITIES, 'cubin'), undefined);
    assert.equal(stageNamed(CAPABILITIES, 3), undefined);
    assert.equal(stageNamed(undefined, 'llvm'), undefined);
  });
});

describe('compareSettings', () => {
  it('has nothing to say when the settings and defaults agree with the server', () => {
    assert.deepEqual(compareSettings(CAPABILITIES, parseSettings({ target: 'sm_80' }), DEFAULT_SETTINGS), {
      warnings: [],
      notes: [],
    });
  });

  it('warns of a target or sandbox the server does not know', () => {
    const settings = { ...parseSettings({ target: 'sm_75' }), workerSandbox: 'jail' };
    assert.deepEqual(compareSettings(CAPABILITIES, settings, DEFAULT_SETTINGS).warnings, [
      'kdsl.target "sm_75" is not a target of this kdsl server (sm_80, sm_86, sm_89, sm_90).',
      'kdsl.worker.sandbox "jail" is not one of standard, strict for this kdsl server.',
    ]);
  });

  it('notes the defaults of a server of another version', () => {
    const server = { ...CAPABILITIES, settings: { ...CAPABILITIES.settings, 'worker.timeoutSeconds': 20, newKey: 1 } };
    assert.deepEqual(compareSettings(server, parseSettings({}), DEFAULT_SETTINGS).notes, [
      "kdsl.worker.timeoutSeconds: the server's default is 20, the extension's 10.",
    ]);
  });
});
