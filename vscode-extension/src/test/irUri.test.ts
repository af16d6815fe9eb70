import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  buildIrUri,
  formatIrUri,
  IR_SCHEME,
  parseIrUri,
  parseIrUriString,
  sourceBaseName,
  type IrTarget,
} from '../irUri';
import { CAPABILITIES, stageOf } from './fixtures';

/** The file extension the server's stage table gives `target`'s stage. */
const ext = (target: IrTarget) => stageOf(target.stage).extension;

describe('buildIrUri', () => {
  it('builds the scheme, path and query', () => {
    assert.deepEqual(buildIrUri({ sourceUri: 'file:///home/u/kernels.py', functionName: 'add', stage: 'ptx' }, '.ptx'), {
      scheme: 'kdsl-ir',
      path: '/kernels.add.ptx.ptx',
      query: 'source=file%3A%2F%2F%2Fhome%2Fu%2Fkernels.py&function=add&stage=ptx',
    });
  });

  it('gives every stage the file extension of the server stage table', () => {
    assert.deepEqual(
      CAPABILITIES.stages.map((s) => buildIrUri({ sourceUri: 'file:///k.py', functionName: 'f', stage: s.name }, s.extension).path),
      ['/k.f.traced.mlir', '/k.f.lowered.mlir', '/k.f.llvm.ll', '/k.f.ptx.ptx', '/k.f.sass.sass', '/k.f.launcher.py'],
    );
  });

  it('takes any stage and extension, sanitised for the path', () => {
    const target = { sourceUri: 'file:///k.py', functionName: 'f', stage: 'h/lo' };
    assert.equal(buildIrUri(target, '.hlo').path, '/k.f.h_lo.hlo');
    assert.equal(buildIrUri(target, 'hlo').path, '/k.f.h_lo.hlo');
    assert.equal(buildIrUri(target, '').path, '/k.f.h_lo');
    assert.equal(buildIrUri(target, './x?').path, '/k.f.h_lo._x_');
    assert.deepEqual(parseIrUri(buildIrUri(target, '.hlo')), target);
  });

  it('decodes and sanitises the source name for the path', () => {
    assert.equal(sourceBaseName('file:///home/u/my%20kernels/k%23v2.py'), 'k_v2');
    assert.equal(sourceBaseName('file:///c%3A/Users/a/gemm.pyw'), 'gemm');
    assert.equal(sourceBaseName('untitled:Untitled-1'), 'Untitled-1');
    assert.equal(sourceBaseName('file:///a/b.py?x=1#frag'), 'b');
    assert.equal(sourceBaseName('file:///a/%E2%82%AC.py'), '\u20ac');
    assert.equal(sourceBaseName('file:///a/100%25.py'), '100_');
    assert.equal(sourceBaseName('file:///a/.py'), 'source');
  });
});

describe('IR URI round trip', () => {
  const targets: IrTarget[] = [
    { sourceUri: 'file:///home/u/kernels.py', functionName: 'add', stage: 'lowered' },
    { sourceUri: 'file:///home/u/my%20dir/a&b=c?.py', functionName: 'matmul_tiled', stage: 'sass' },
    { sourceUri: 'file:///c%3A/Users/J%C3%BCrgen/%E6%A0%B8.py', functionName: 'k\u00e9rnel_\u03b1', stage: 'llvm' },
    { sourceUri: 'untitled:Untitled-1', functionName: 'f', stage: 'traced' },
    { sourceUri: 'vscode-remote://ssh-remote%2Bbox/w/x.py#L3', functionName: 'weird%name&x=1/y?z#', stage: 'launcher' },
    { sourceUri: 'file:///tmp/sp ace/+plus%2B.py', functionName: 'a b', stage: 'ptx' },
  ];

  it('parses the components back exactly', () => {
    for (const target of targets) {
      const c = buildIrUri(target, ext(target));
      assert.equal(c.scheme, IR_SCHEME);
      assert.ok(!c.path.slice(1).includes('/'), c.path);
      assert.deepEqual(parseIrUri(c), target);
    }
  });

  it('parses the string form back exactly', () => {
    for (const target of targets) {
      const s = formatIrUri(target, ext(target));
      assert.ok(s.startsWith('kdsl-ir:/'));
      assert.deepEqual(parseIrUriString(s), target);
    }
  });

  it('formats the string form', () => {
    assert.equal(
      formatIrUri({ sourceUri: 'file:///w/k.py', functionName: 'add', stage: 'ptx' }, '.ptx'),
      'kdsl-ir:/k.add.ptx.ptx?source=file%3A%2F%2F%2Fw%2Fk.py&function=add&stage=ptx',
    );
  });

  it('rejects other schemes and missing fields', () => {
    const query = buildIrUri({ sourceUri: 'file:///k.py', functionName: 'f', stage: 'ptx' }, '.ptx').query;
    assert.equal(parseIrUri({ scheme: 'file', query }), undefined);
    assert.equal(parseIrUri({ scheme: IR_SCHEME, query: query.replace('stage=ptx', 'stage=') }), undefined);
    assert.equal(parseIrUri({ scheme: IR_SCHEME, query: 'source=file%3A%2F%2F%2Fk.py&function=f' }), undefined);
    assert.equal(parseIrUri({ scheme: IR_SCHEME, query: 'source=file%3A%2F%2F%2Fk.py&stage=ptx' }), undefined);
    assert.equal(parseIrUri({ scheme: IR_SCHEME, query: 'function=f&stage=ptx' }), undefined);
    assert.equal(parseIrUri({ scheme: IR_SCHEME, query: 'source=%E0%A4%A&function=f&stage=ptx' }), undefined);
    assert.equal(parseIrUriString('kdsl-ir:/k.f.ptx.ptx'), undefined);
    assert.equal(parseIrUriString('nothing'), undefined);
  });
});
