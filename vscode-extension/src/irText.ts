// Rendering an IR response as document text, and the editor language of each
// IR language. This module does not import `vscode`.

import type { IrDiagnostic, IrResult } from './protocol';

/**
 * VS Code language id for a language the server names (a stage's `language`).
 * This extension's own language for it (`kdsl-sass` for `sass`: `sass` is the
 * id of the CSS preprocessor) comes first, then a language of that name, then
 * plain text. `registered` is `vscode.languages.getLanguages()`.
 */
export function editorLanguageId(language: string, registered: readonly string[]): string {
  for (const id of [`kdsl-${language}`, language]) {
    if (language !== '' && registered.includes(id)) {
      return id;
    }
  }
  return 'plaintext';
}

/** Line-comment prefix of an IR language. */
export function commentPrefix(language: string): string {
  switch (language) {
    case 'python':
      return '#';
    case 'llvm':
      return ';';
    default:
      return '//';
  }
}

export function commentLines(text: string, language: string): string {
  const prefix = commentPrefix(language);
  return text
    .split(/\r?\n/)
    .map((line) => (line === '' ? prefix : `${prefix} ${line}`))
    .join('\n');
}

function describeDiagnostic(d: IrDiagnostic): string {
  const where = d.range ? `line ${d.range.start.line + 1}, column ${d.range.start.character + 1}` : '';
  const code = d.code !== undefined && d.code !== null && d.code !== '' ? `[${d.code}]` : '';
  const head = [code, where].filter((s) => s !== '').join(' ');
  return head === '' ? d.message : `${head}: ${d.message}`;
}

/**
 * The document text: the IR followed by the diagnostics as comments. The
 * diagnostics come after the IR so that the source map's line numbers stay
 * valid; those whose message the text already contains are not repeated.
 */
export function renderIr(result: IrResult): string {
  const text = result.text.replace(/\s+$/, '');
  // Leave out messages the text already shows (the server may list them there).
  const diagnostics = (result.diagnostics ?? []).filter((d) => d.message === '' || !text.includes(d.message));
  if (diagnostics.length === 0) {
    return text === '' ? commentLines('(no output)', result.language) + '\n' : text + '\n';
  }
  const lines = ['kdsl diagnostics:'];
  for (const d of diagnostics) {
    lines.push(describeDiagnostic(d));
  }
  const block = commentLines(lines.join('\n'), result.language);
  return (text === '' ? '' : text + '\n\n') + block + '\n';
}

/** Text shown when the IR could not be requested at all. */
export function renderFailure(message: string, language: string): string {
  return commentLines(`Could not get the IR from the kdsl language server:\n${message}`, language) + '\n';
}

/**
 * Fills in missing fields of a `kdsl/ir` result so the rest of the code can
 * rely on them; `language` is the stage's, for a result that names none.
 */
export function normalizeIrResult(value: unknown, language: string): IrResult {
  const v = (typeof value === 'object' && value !== null ? value : {}) as Partial<IrResult>;
  return {
    text: typeof v.text === 'string' ? v.text : '',
    language: typeof v.language === 'string' && v.language !== '' ? v.language : language,
    sourceMap: Array.isArray(v.sourceMap) ? v.sourceMap : [],
    diagnostics: Array.isArray(v.diagnostics)
      ? v.diagnostics.filter((d): d is IrDiagnostic => typeof d === 'object' && d !== null && typeof d.message === 'string')
      : [],
  };
}
