// The client-side commands: Show IR, Compile Function, Run Function, Profile
// Function on GPU, Debug on CPU (debugAdapter.ts starts the session), Restart.
// `kdsl.compile`, `kdsl.run` and `kdsl.profile` are the
// server's own commands; the client library registers them from the server's
// executeCommandProvider.

import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import type { ServerManager } from './client';
import { stageNamed } from './capabilities';
import { commandNotice } from './commandResult';
import { debugFunction } from './debugAdapter';
import { availableStages, orderFunctions, stageDescription } from './functionPick';
import { IR_SCHEME } from './irUri';
import { IrViewManager, parseIrDocumentUri } from './irView';
import {
  COMPILE_COMMAND,
  DEBUG_FUNCTION_COMMAND,
  PROFILE_COMMAND,
  RUN_COMMAND,
  STAGES_REQUEST,
  type Capabilities,
  type CommandResult,
  type FunctionInfo,
  type StageInfo,
  type StagesParams,
  type StagesResult,
} from './protocol';

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The source document's URI string, from a command argument or the active editor. */
function sourceUriFrom(arg: unknown): string | undefined {
  if (arg instanceof vscode.Uri) {
    return arg.toString();
  }
  if (typeof arg === 'string' && arg !== '') {
    // Normalise to the form VS Code (and so the server) uses for the document.
    return vscode.Uri.parse(arg).toString();
  }
  const document = vscode.window.activeTextEditor?.document;
  if (!document) {
    return undefined;
  }
  if (document.uri.scheme === IR_SCHEME) {
    return parseIrDocumentUri(document.uri)?.sourceUri;
  }
  return document.languageId === 'python' ? document.uri.toString() : undefined;
}

async function requireClient(server: ServerManager): Promise<LanguageClient | undefined> {
  const client = server.running;
  if (client) {
    return client;
  }
  const restart = 'Restart Server';
  const choice = await vscode.window.showErrorMessage('The kdsl language server is not running.', restart);
  if (choice === restart) {
    await server.restart();
  }
  return server.running;
}

async function listFunctions(client: LanguageClient, uri: string): Promise<FunctionInfo[]> {
  const params: StagesParams = { uri };
  const result = await client.sendRequest<StagesResult | null>(STAGES_REQUEST, params);
  return Array.isArray(result?.functions) ? result.functions : [];
}

function cursorLineIn(uri: string): number | undefined {
  const editor = vscode.window.activeTextEditor;
  return editor && editor.document.uri.toString() === uri ? editor.selection.active.line : undefined;
}

async function pickFunction(
  functions: FunctionInfo[],
  uri: string,
  what = 'kernel or jit function',
): Promise<FunctionInfo | undefined> {
  if (functions.length === 0) {
    void vscode.window.showInformationMessage(`kdsl: no ${what} found in this file.`);
    return undefined;
  }
  if (functions.length === 1) {
    return functions[0];
  }
  const items = orderFunctions(functions, cursorLineIn(uri)).map((fn) => ({
    label: fn.name,
    description: fn.kind,
    detail: `line ${fn.range.start.line + 1}`,
    fn,
  }));
  const picked = await vscode.window.showQuickPick(items, { title: 'kdsl: choose a function', placeHolder: 'Function' });
  return picked?.fn;
}

async function pickStage(fn: FunctionInfo | undefined, capabilities: Capabilities): Promise<StageInfo | undefined> {
  const items = availableStages(fn, capabilities.stages).map((stage) => ({
    label: stage.name,
    description: stageDescription(stage),
    stage,
  }));
  const picked = await vscode.window.showQuickPick(items, {
    title: fn ? `kdsl: IR of ${fn.name}` : 'kdsl: choose a stage',
    placeHolder: 'Stage',
  });
  return picked?.stage;
}

/** `kdsl.showIr [uri, functionName, stage]`: any missing argument is asked for. */
async function showIr(server: ServerManager, irView: IrViewManager, uriArg?: unknown, fnArg?: unknown, stageArg?: unknown): Promise<void> {
  const uri = sourceUriFrom(uriArg);
  if (!uri) {
    void vscode.window.showInformationMessage('kdsl: open a Python file to show its IR.');
    return;
  }
  const client = await requireClient(server);
  if (!client) {
    return;
  }
  let capabilities: Capabilities;
  try {
    capabilities = await server.capabilities();
  } catch (error) {
    void vscode.window.showErrorMessage(`kdsl: could not list the stages: ${errorMessage(error)}`);
    return;
  }
  let functionName = typeof fnArg === 'string' && fnArg !== '' ? fnArg : undefined;
  let stage = stageNamed(capabilities, stageArg);
  if (functionName === undefined || stage === undefined) {
    let functions: FunctionInfo[];
    try {
      functions = await listFunctions(client, uri);
    } catch (error) {
      void vscode.window.showErrorMessage(`kdsl: could not list the functions: ${errorMessage(error)}`);
      return;
    }
    let fn = functions.find((f) => f.name === functionName);
    if (functionName === undefined) {
      fn = await pickFunction(functions, uri);
      if (!fn) {
        return;
      }
      functionName = fn.name;
    }
    stage = await pickStage(fn, capabilities);
    if (!stage) {
      return;
    }
  }
  await irView.open({ sourceUri: uri, functionName, stage: stage.name }, stage);
}

/**
 * Compile/Run/Profile: pick a function (only jit functions with `jitOnly`: a
 * profile runs one call of a jit function), then ask the server to run its command.
 */
async function serverCommand(
  server: ServerManager,
  command: string,
  uriArg?: unknown,
  fnArg?: unknown,
  jitOnly = false,
): Promise<void> {
  const uri = sourceUriFrom(uriArg);
  if (!uri) {
    void vscode.window.showInformationMessage('kdsl: open a Python file first.');
    return;
  }
  const client = await requireClient(server);
  if (!client) {
    return;
  }
  let functionName = typeof fnArg === 'string' && fnArg !== '' ? fnArg : undefined;
  try {
    if (functionName === undefined) {
      const functions = await listFunctions(client, uri);
      const fn = jitOnly
        ? await pickFunction(functions.filter((f) => f.kind === 'jit'), uri, 'jit function')
        : await pickFunction(functions, uri);
      if (!fn) {
        return;
      }
      functionName = fn.name;
    }
    // The server reports work-done progress (cancellable) while it works.
    const result = (await server.executeCommand(client, command, [uri, functionName])) as CommandResult | null;
    const notice = commandNotice(result, functionName);
    if (notice?.level === 'warning') {
      void vscode.window.showWarningMessage(notice.message);
    } else if (notice) {
      void vscode.window.showInformationMessage(notice.message);
    }
  } catch (error) {
    void vscode.window.showErrorMessage(`kdsl: ${errorMessage(error)}`);
  }
}

/**
 * `kdsl.debugFunction [uri, jitName]` (the "Debug on CPU" lens): debugs the jit function on
 * its examples in the CPU interpreter; without a function (the Command Palette) one of the
 * file's jit functions is picked, the one at the cursor first.
 */
async function debugFunctionCommand(server: ServerManager, uriArg?: unknown, fnArg?: unknown): Promise<void> {
  const uri = sourceUriFrom(uriArg);
  if (!uri) {
    void vscode.window.showInformationMessage('kdsl: open a Python file first.');
    return;
  }
  let functionName = typeof fnArg === 'string' && fnArg !== '' ? fnArg : undefined;
  if (functionName === undefined) {
    const client = await requireClient(server);
    if (!client) {
      return;
    }
    try {
      const functions = await listFunctions(client, uri);
      functionName = (await pickFunction(functions.filter((f) => f.kind === 'jit'), uri, 'jit function'))?.name;
    } catch (error) {
      void vscode.window.showErrorMessage(`kdsl: could not list the functions: ${errorMessage(error)}`);
      return;
    }
    if (functionName === undefined) {
      return;
    }
  }
  await debugFunction(vscode.Uri.parse(uri), functionName);
}

export function registerCommands(context: vscode.ExtensionContext, server: ServerManager, irView: IrViewManager): void {
  context.subscriptions.push(
    vscode.commands.registerCommand('kdsl.showIr', (uri?: unknown, fn?: unknown, stage?: unknown) =>
      showIr(server, irView, uri, fn, stage),
    ),
    vscode.commands.registerCommand('kdsl.compileFunction', (uri?: unknown, fn?: unknown) =>
      serverCommand(server, COMPILE_COMMAND, uri, fn),
    ),
    vscode.commands.registerCommand('kdsl.runFunction', (uri?: unknown, fn?: unknown) =>
      serverCommand(server, RUN_COMMAND, uri, fn),
    ),
    vscode.commands.registerCommand('kdsl.profileFunction', (uri?: unknown, fn?: unknown) =>
      serverCommand(server, PROFILE_COMMAND, uri, fn, true),
    ),
    vscode.commands.registerCommand(DEBUG_FUNCTION_COMMAND, (uri?: unknown, fn?: unknown) =>
      debugFunctionCommand(server, uri, fn),
    ),
    vscode.commands.registerCommand('kdsl.restart', () => server.restart()),
  );
}
