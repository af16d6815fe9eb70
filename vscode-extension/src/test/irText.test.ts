import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  commentLines,
  commentPrefix,
  editorLanguageId,
  normalizeIrResult,
  renderFailure,
  renderIr,
} from '../irText';

describe('renderIr', () => {
  it('returns the IR text with one final newline', () => {
    assert.equal(
      renderIr({ text: 'func.func @add() {\n  return\n}\n\n', language: 'mlir', sourceMap: [], diagnostics: [] }),
      'func.func @add() {\n  return\n}\n',
    );
  });

  it('appends the diagnostics as comments after the text', () => {
    const text = renderIr({
      text: '// add: compilation failed',
      language: 'mlir',
      sourceMap: [],
      diagnostics: [
        { message: 'cannot add f32 and i32', code: 'KD101', range: { start: { line: 4, character: 8 }, end: { line: 4, character: 13 } } },
        { message: 'first line\nsecond line', code: null, range: null },
      ],
    });
    assert.equal(
      text,
      [
        '// add: compilation failed',
        '',
        '// kdsl diagnostics:',
        '// [KD101] line 5, column 9: cannot add f32 and i32',
        '// first line',
        '// second line',
        '',
      ].join('\n'),
    );
  });

  it('uses the comment syntax of the language', () => {
    const diagnostics = [{ message: 'boom', code: 'E1' }];
    assert.equal(
      renderIr({ text: '', language: 'python', sourceMap: [], diagnostics }),
      '# kdsl diagnostics:\n# [E1]: boom\n',
    );
    assert.equal(
      renderIr({ text: '; failed', language: 'llvm', sourceMap: [], diagnostics }),
      '; failed\n\n; kdsl diagnostics:\n; [E1]: boom\n',
    );
  });

  it('does not repeat messages the text already shows', () => {
    const diagnostics = [
      { message: 'cannot add f32 and i32', code: 'KD101' },
      { message: 'tile size must be a power of two', code: 'KD202' },
    ];
    assert.equal(
      renderIr({ text: '// add: compile failed\n//   KD101 line 5: cannot add f32 and i32\n', language: 'mlir', sourceMap: [], diagnostics }),
      '// add: compile failed\n//   KD101 line 5: cannot add f32 and i32\n\n// kdsl diagnostics:\n// [KD202]: tile size must be a power of two\n',
    );
    assert.equal(
      renderIr({ text: '// add: compile failed\n// cannot add f32 and i32', language: 'mlir', sourceMap: [], diagnostics: diagnostics.slice(0, 1) }),
      '// add: compile failed\n// cannot add f32 and i32\n',
    );
  });

  it('never renders an empty page', () => {
    assert.equal(renderIr({ text: '  \n', language: 'ptx', sourceMap: [], diagnostics: [] }), '// (no output)\n');
  });
});

describe('language helpers', () => {
  it('maps IR languages to registered editor languages, the kdsl ones first', () => {
    // what VS Code lists with this extension and a Sass (CSS) extension installed
    const registered = ['plaintext', 'python', 'sass', 'mlir', 'llvm', 'ptx', 'kdsl-sass'];
    assert.deepEqual(
      ['mlir', 'llvm', 'ptx', 'sass', 'python', 'cobol', ''].map((l) => editorLanguageId(l, registered)),
      ['mlir', 'llvm', 'ptx', 'kdsl-sass', 'python', 'plaintext', 'plaintext'],
    );
    assert.equal(editorLanguageId('sass', ['sass']), 'sass');
  });

  it('knows the comment prefixes', () => {
    assert.deepEqual(['mlir', 'llvm', 'ptx', 'sass', 'python'].map(commentPrefix), ['//', ';', '//', '//', '#']);
    assert.equal(commentLines('a\n\nb', 'python'), '# a\n#\n# b');
  });

  it('renders a request failure as a comment', () => {
    assert.equal(
      renderFailure('timed out', 'llvm'),
      '; Could not get the IR from the kdsl language server:\n; timed out\n',
    );
  });
});

describe('normalizeIrResult', () => {
  it('fills in missing fields, the language from the stage', () => {
    assert.deepEqual(normalizeIrResult(null, 'ptx'), { text: '', language: 'ptx', sourceMap: [], diagnostics: [] });
    assert.deepEqual(
      normalizeIrResult({ text: 'x', diagnostics: [{ message: 'm' }, { nope: 1 }, null] }, 'python'),
      { text: 'x', language: 'python', sourceMap: [], diagnostics: [{ message: 'm' }] },
    );
    assert.equal(normalizeIrResult({ text: 'x', language: 'llvm' }, 'python').language, 'llvm');
  });
});
