// Entry point: wires the language client, the IR views, the profile's heat map, the debugger and the commands together.

import * as vscode from 'vscode';
import { currentSettings, ServerManager } from './client';
import { registerCommands } from './commands';
import { registerDebugging } from './debugAdapter';
import { IR_SCHEME } from './irUri';
import { IrViewManager } from './irView';
import { registerProfileView } from './profileView';
import { SECTION, settingsChange } from './settings';

let server: ServerManager | undefined;

export function activate(context: vscode.ExtensionContext): void {
  const output = vscode.window.createOutputChannel('kdsl');
  const trace = vscode.window.createOutputChannel('kdsl Trace');
  server = new ServerManager(context, output, trace);
  const manager = server;
  const irView = new IrViewManager(
    () => manager.running,
    () => currentSettings().debounceMs,
    (stage) => manager.knownStage(stage),
  );

  context.subscriptions.push(
    output,
    trace,
    manager,
    irView,
    vscode.workspace.registerTextDocumentContentProvider(IR_SCHEME, irView),
    manager.onDidStart(() => irView.refreshAll()),
  );
  registerCommands(context, manager, irView);
  registerProfileView(context, manager);
  registerDebugging(context, manager, output);

  // A setting the server applies while it runs is sent to it; any other
  // change restarts it (see LIVE_KEYS in settings.ts). The client library
  // applies the trace level itself.
  let settings = currentSettings();
  context.subscriptions.push(
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (!event.affectsConfiguration(SECTION)) {
        return;
      }
      const next = currentSettings();
      const change = settingsChange(settings, next);
      settings = next;
      if (change === 'restart') {
        output.appendLine('kdsl settings changed; restarting the server.');
        void manager.restart();
      } else if (change === 'send') {
        void manager.sendSettings();
      }
    }),
    vscode.workspace.onDidGrantWorkspaceTrust(() => {
      output.appendLine('The workspace is now trusted; restarting the server.');
      settings = currentSettings();
      void manager.restart();
    }),
  );

  void manager.start();
}

export function deactivate(): Promise<void> | undefined {
  const current = server;
  server = undefined;
  return current?.stop();
}
