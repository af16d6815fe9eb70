// Read-only IR documents (`kdsl-ir:` URIs) and the linked highlighting between
// a Python source and its IR views.

import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import { buildIrUri, IR_SCHEME, parseIrUri, type IrTarget } from './irUri';
import { editorLanguageId, normalizeIrResult, renderFailure, renderIr } from './irText';
import { IR_REQUEST, type IrParams, type IrResult, type LspRange, type StageInfo } from './protocol';
import { irLinesForSourceLine, sanitizeSourceMap, sourceRangeForIrLine, toLineBlocks } from './sourceMap';

export function irUri(target: IrTarget, stage: StageInfo): vscode.Uri {
  return vscode.Uri.from(buildIrUri(target, stage.extension));
}

export function parseIrDocumentUri(uri: vscode.Uri): IrTarget | undefined {
  return parseIrUri({ scheme: uri.scheme, query: uri.query });
}

function toRange(range: LspRange): vscode.Range {
  return new vscode.Range(range.start.line, range.start.character, range.end.line, range.end.character);
}

export class IrViewManager implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;

  /** Latest result per IR document (key: IR URI string). */
  private readonly results = new Map<string, IrResult>();
  /** Pending refresh per source document (key: source URI string). */
  private readonly timers = new Map<string, ReturnType<typeof setTimeout>>();
  private readonly disposables: vscode.Disposable[] = [];

  private readonly irLineDecoration = vscode.window.createTextEditorDecorationType({
    backgroundColor: new vscode.ThemeColor('editor.rangeHighlightBackground'),
    isWholeLine: true,
    overviewRulerColor: new vscode.ThemeColor('editorOverviewRuler.rangeHighlightForeground'),
    overviewRulerLane: vscode.OverviewRulerLane.Center,
  });
  private readonly sourceRangeDecoration = vscode.window.createTextEditorDecorationType({
    backgroundColor: new vscode.ThemeColor('editor.rangeHighlightBackground'),
    overviewRulerColor: new vscode.ThemeColor('editorOverviewRuler.rangeHighlightForeground'),
    overviewRulerLane: vscode.OverviewRulerLane.Center,
  });

  /**
   * `knownStage` looks a stage up in the server's last `kdsl/capabilities`
   * answer (undefined before one came); it only labels pages that have no result.
   */
  constructor(
    private readonly getClient: () => LanguageClient | undefined,
    private readonly debounceMs: () => number,
    private readonly knownStage: (name: string) => StageInfo | undefined,
  ) {
    this.disposables.push(
      this.changed,
      this.irLineDecoration,
      this.sourceRangeDecoration,
      vscode.window.onDidChangeTextEditorSelection((e) => this.onSelection(e.textEditor)),
      vscode.window.onDidChangeVisibleTextEditors(() => this.rehighlight()),
      vscode.workspace.onDidChangeTextDocument((e) => this.onDocumentChanged(e.document)),
      vscode.workspace.onDidSaveTextDocument((doc) => this.refreshSource(doc.uri.toString(), 0)),
      vscode.workspace.onDidCloseTextDocument((doc) => {
        if (doc.uri.scheme === IR_SCHEME) {
          this.results.delete(doc.uri.toString());
        }
      }),
    );
  }

  dispose(): void {
    for (const timer of this.timers.values()) {
      clearTimeout(timer);
    }
    this.timers.clear();
    for (const d of this.disposables) {
      d.dispose();
    }
  }

  async provideTextDocumentContent(uri: vscode.Uri, token: vscode.CancellationToken): Promise<string> {
    const target = parseIrDocumentUri(uri);
    if (!target) {
      return '// Not a kdsl IR document.\n';
    }
    const key = uri.toString();
    const language = this.knownStage(target.stage)?.language ?? 'plaintext';
    const client = this.getClient();
    if (!client) {
      this.results.delete(key);
      return renderFailure('the server is not running (see the "kdsl" output channel).', language);
    }
    const params: IrParams = { uri: target.sourceUri, function: target.functionName, stage: target.stage };
    try {
      const raw = await client.sendRequest<unknown>(IR_REQUEST, params, token);
      const result = normalizeIrResult(raw, language);
      result.sourceMap = sanitizeSourceMap(result.sourceMap);
      this.results.set(key, result);
      return renderIr(result);
    } catch (error) {
      this.results.delete(key);
      const message = error instanceof Error ? error.message : String(error);
      return renderFailure(message, language);
    }
  }

  /** Opens (or refreshes) the IR view of `target` (of stage `stage`) beside the source, keeping the focus. */
  async open(target: IrTarget, stage: StageInfo): Promise<void> {
    const uri = irUri(target, stage);
    const alreadyOpen = vscode.workspace.textDocuments.some((d) => d.uri.toString() === uri.toString());
    if (alreadyOpen) {
      this.changed.fire(uri);
    }
    let document = await vscode.workspace.openTextDocument(uri);
    const result = this.results.get(uri.toString());
    const languageId = editorLanguageId(result?.language ?? stage.language, await vscode.languages.getLanguages());
    if (document.languageId !== languageId) {
      document = await vscode.languages.setTextDocumentLanguage(document, languageId);
    }
    await vscode.window.showTextDocument(document, {
      viewColumn: vscode.ViewColumn.Beside,
      preserveFocus: true,
      preview: false,
    });
    this.rehighlight();
  }

  /** Re-requests every open IR document (after a server restart, for example). */
  refreshAll(): void {
    for (const doc of vscode.workspace.textDocuments) {
      if (doc.uri.scheme === IR_SCHEME) {
        this.changed.fire(doc.uri);
      }
    }
  }

  private openIrDocumentsOf(sourceUri: string): vscode.TextDocument[] {
    return vscode.workspace.textDocuments.filter(
      (doc) => doc.uri.scheme === IR_SCHEME && parseIrDocumentUri(doc.uri)?.sourceUri === sourceUri,
    );
  }

  private onDocumentChanged(document: vscode.TextDocument): void {
    if (document.uri.scheme === IR_SCHEME) {
      // New IR text arrived: highlight again from the source's cursor.
      this.rehighlight();
      return;
    }
    this.refreshSource(document.uri.toString(), this.debounceMs());
  }

  private refreshSource(sourceUri: string, delayMs: number): void {
    if (this.openIrDocumentsOf(sourceUri).length === 0) {
      return;
    }
    const pending = this.timers.get(sourceUri);
    if (pending !== undefined) {
      clearTimeout(pending);
    }
    this.timers.set(
      sourceUri,
      setTimeout(() => {
        this.timers.delete(sourceUri);
        for (const doc of this.openIrDocumentsOf(sourceUri)) {
          this.changed.fire(doc.uri);
        }
      }, Math.max(0, delayMs)),
    );
  }

  private rehighlight(): void {
    const active = vscode.window.activeTextEditor;
    if (active) {
      this.onSelection(active);
    }
  }

  private onSelection(editor: vscode.TextEditor): void {
    if (editor.document.uri.scheme === IR_SCHEME) {
      this.highlightFromIr(editor);
    } else if (editor.document.languageId === 'python') {
      this.highlightFromSource(editor);
    }
  }

  /** Cursor in a Python editor: highlight the IR lines of its line in every visible IR view. */
  private highlightFromSource(editor: vscode.TextEditor): void {
    const sourceUri = editor.document.uri.toString();
    const line = editor.selection.active.line;
    editor.setDecorations(this.sourceRangeDecoration, []);
    for (const irEditor of vscode.window.visibleTextEditors) {
      const target = irEditor.document.uri.scheme === IR_SCHEME ? parseIrDocumentUri(irEditor.document.uri) : undefined;
      if (!target || target.sourceUri !== sourceUri) {
        continue;
      }
      const result = this.results.get(irEditor.document.uri.toString());
      const lastLine = irEditor.document.lineCount - 1;
      const blocks = result
        ? toLineBlocks(irLinesForSourceLine(result.sourceMap, line).filter((l) => l <= lastLine))
        : [];
      const ranges = blocks.map((b) => new vscode.Range(b.start, 0, b.end, 0));
      irEditor.setDecorations(this.irLineDecoration, ranges);
      if (ranges.length > 0) {
        irEditor.revealRange(ranges[0], vscode.TextEditorRevealType.InCenterIfOutsideViewport);
      }
    }
  }

  /** Cursor in an IR view: highlight (and reveal) the Python range of its line. */
  private highlightFromIr(editor: vscode.TextEditor): void {
    const target = parseIrDocumentUri(editor.document.uri);
    if (!target) {
      return;
    }
    editor.setDecorations(this.irLineDecoration, []);
    const result = this.results.get(editor.document.uri.toString());
    const lspRange = result ? sourceRangeForIrLine(result.sourceMap, editor.selection.active.line) : undefined;
    for (const sourceEditor of vscode.window.visibleTextEditors) {
      if (sourceEditor.document.uri.toString() !== target.sourceUri) {
        continue;
      }
      if (!lspRange) {
        sourceEditor.setDecorations(this.sourceRangeDecoration, []);
        continue;
      }
      let range = sourceEditor.document.validateRange(toRange(lspRange));
      if (range.isEmpty) {
        range = sourceEditor.document.lineAt(range.start.line).range;
      }
      sourceEditor.setDecorations(this.sourceRangeDecoration, [range]);
      sourceEditor.revealRange(range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
    }
  }
}
