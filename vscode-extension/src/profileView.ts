// The gutter heat map of *Profile on GPU* in the editors: wiring only. What is
// hot, how hot, the hover and what survives an edit come from profileHeat.ts;
// the answer is read by profileReport.ts.
//
// One heat map per document, the latest profile's; it lives as long as the
// document is open. VS Code forgets an editor's decorations when the editor is
// hidden (another tab), so each visible editor of the document is drawn again
// whenever the visible editors change.

import * as vscode from 'vscode';
import type { CommandAnswer, ServerManager } from './client';
import { gutterIcon, HEAT_LEVELS, heatAfterEdit, heatHover, makeHeatMap, rulerColour, type HeatMap } from './profileHeat';
import { profileAnswer } from './profileReport';

/** Set while a document has a heat map: `kdsl: Clear Profile Heat Map` is offered then. */
const SHOWN_CONTEXT = 'kdsl.profileShown';

function makeDecorationTypes(): vscode.TextEditorDecorationType[] {
  const types: vscode.TextEditorDecorationType[] = [];
  for (let level = 1; level <= HEAT_LEVELS; level += 1) {
    types.push(
      vscode.window.createTextEditorDecorationType({
        isWholeLine: true,
        gutterIconPath: vscode.Uri.parse(gutterIcon(level)),
        gutterIconSize: 'cover',
        overviewRulerColor: rulerColour(level),
        overviewRulerLane: vscode.OverviewRulerLane.Left,
      }),
    );
  }
  return types;
}

function lineText(document: vscode.TextDocument): (line: number) => string | undefined {
  return (line) => (line >= 0 && line < document.lineCount ? document.lineAt(line).text : undefined);
}

/** The profile's own path and the document's: the server may spell the file either way. */
function documentFiles(document: vscode.TextDocument, profiledFile: string): string[] {
  return document.uri.scheme === 'file' ? [profiledFile, document.uri.fsPath] : [profiledFile];
}

/** The key of the document a command argument names (a URI or its string), undefined for none. */
function documentKey(arg: unknown): string | undefined {
  if (arg instanceof vscode.Uri) {
    return arg.toString();
  }
  return typeof arg === 'string' && arg !== '' ? vscode.Uri.parse(arg).toString() : undefined;
}

export class ProfileHeatView implements vscode.Disposable {
  private readonly types = makeDecorationTypes();
  private readonly maps = new Map<string, HeatMap>(); // document URI -> its heat map
  private readonly subscriptions: vscode.Disposable[];

  constructor() {
    this.subscriptions = [
      vscode.workspace.onDidChangeTextDocument((event) => this.documentChanged(event)),
      vscode.workspace.onDidCloseTextDocument((document) => this.clear(document.uri.toString())),
      vscode.window.onDidChangeVisibleTextEditors((editors) => this.redraw(editors)),
    ];
  }

  /** Shows the profile a `kdsl.profile` answer carries; other answers are not this view's. */
  accept(answer: CommandAnswer): void {
    const found = profileAnswer(answer.command, answer.arguments, answer.result);
    if (!found) {
      return;
    }
    if ('error' in found) {
      void vscode.window.showWarningMessage(`kdsl: the profile cannot be shown: ${found.error}.`);
      return;
    }
    const uri = vscode.Uri.parse(found.uri).toString(); // the form VS Code gives its documents
    const document = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri);
    if (!document) {
      return; // closed while it was profiled
    }
    const map = makeHeatMap(found.profile, documentFiles(document, found.profile.file), lineText(document));
    this.set(uri, map.lines.length > 0 ? map : undefined);
  }

  /** Removes the heat map of the document `uri`, or of every document. */
  clear(uri?: string): void {
    for (const key of uri === undefined ? [...this.maps.keys()] : [uri]) {
      this.set(key, undefined);
    }
  }

  dispose(): void {
    this.maps.clear();
    for (const disposable of [...this.subscriptions, ...this.types]) {
      disposable.dispose();
    }
  }

  private documentChanged(event: vscode.TextDocumentChangeEvent): void {
    const uri = event.document.uri.toString();
    const map = this.maps.get(uri);
    if (!map || event.contentChanges.length === 0) {
      return; // no heat map, or only the dirty state changed
    }
    const edits = event.contentChanges.map(({ range, text }) => ({ start: range.start, end: range.end, text }));
    const lines = heatAfterEdit(map.lines, edits, lineText(event.document));
    this.set(uri, lines.length > 0 ? { ...map, lines } : undefined);
  }

  private set(uri: string, map: HeatMap | undefined): void {
    const had = this.maps.has(uri);
    const shown = this.maps.size > 0;
    if (map) {
      this.maps.set(uri, map);
    } else {
      this.maps.delete(uri);
    }
    if (map || had) {
      for (const editor of vscode.window.visibleTextEditors.filter((e) => e.document.uri.toString() === uri)) {
        this.draw(editor, map);
      }
    }
    if (shown !== this.maps.size > 0) {
      void vscode.commands.executeCommand('setContext', SHOWN_CONTEXT, this.maps.size > 0);
    }
  }

  /** Draws the heat maps again in editors that were hidden (VS Code dropped their decorations). */
  private redraw(editors: readonly vscode.TextEditor[]): void {
    for (const editor of editors) {
      const map = this.maps.get(editor.document.uri.toString());
      if (map) {
        this.draw(editor, map);
      }
    }
  }

  /** Sets every level's decorations of `editor`: `map`'s lines, or none. */
  private draw(editor: vscode.TextEditor, map: HeatMap | undefined): void {
    const byLevel: vscode.DecorationOptions[][] = this.types.map(() => []);
    const lines = map?.lines.filter((heat) => heat.line < editor.document.lineCount) ?? [];
    for (const heat of lines) {
      // Untrusted text in a plain MarkdownString: no command links, no HTML.
      const hoverMessage = new vscode.MarkdownString(heatHover(map as HeatMap, heat));
      byLevel[heat.level - 1].push({ range: editor.document.lineAt(heat.line).range, hoverMessage });
    }
    this.types.forEach((type, k) => editor.setDecorations(type, byLevel[k]));
  }
}

/** Creates the heat map view, fed by every server command's answer, and its `kdsl.clearProfile` command. */
export function registerProfileView(context: vscode.ExtensionContext, server: ServerManager): void {
  const view = new ProfileHeatView();
  context.subscriptions.push(
    view,
    server.onDidAnswerCommand((answer) => view.accept(answer)),
    vscode.commands.registerCommand('kdsl.clearProfile', (uri?: unknown) => view.clear(documentKey(uri))),
  );
}
