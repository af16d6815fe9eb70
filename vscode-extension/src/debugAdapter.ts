// The kdsl debugger in VS Code: wiring only. The adapter is `<python> -m lsp.dap` (DAP over
// stdio), started in the interpreter the language server runs in (`ServerManager.interpreter`:
// kdsl.interpreterPath, then the Python extension's, then python3) and in the workspace
// folder; it runs kernels in kdsl's CPU interpreter and owns stopping, the focus thread and
// the values. Here: the adapter's command line, F5 without a launch.json, checking a
// configuration before the adapter starts (debugConfig.ts), "Debug on CPU" and
// "kdsl: Set Focus Thread" (the adapter's `kdsl/focus` request).

import * as vscode from 'vscode';
import { runCheck, type ServerManager } from './client';
import {
  adapterCwd,
  adapterEnv,
  checkLaunchConfiguration,
  DEBUG_TYPE,
  fillEmptyConfiguration,
  FOCUS_REQUEST,
  focusArguments,
  formatDim3,
  functionLaunchConfiguration,
  initialFocus,
  parseDim3,
  readDim3,
  readFocusAnswer,
  type ActiveFile,
  type Dim3,
} from './debugConfig';
import { debugAdapterCheckCommand, debugAdapterCommand, debugAdapterProblem, shellCommandLine } from './interpreter';
import { IR_SCHEME } from './irUri';
import { parseIrDocumentUri } from './irView';

type Focus = { block: Dim3; thread: Dim3 };

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function filePath(uri: vscode.Uri | undefined): string | undefined {
  return uri?.scheme === 'file' ? uri.fsPath : undefined;
}

/** The active editor's Python file; for an IR view, the file it shows the IR of. */
function activeFile(): ActiveFile | undefined {
  const document = vscode.window.activeTextEditor?.document;
  if (!document) {
    return undefined;
  }
  if (document.uri.scheme === IR_SCHEME) {
    const source = parseIrDocumentUri(document.uri)?.sourceUri;
    const uri = source === undefined ? undefined : vscode.Uri.parse(source);
    return uri ? { path: uri.fsPath, languageId: 'python', scheme: uri.scheme } : undefined;
  }
  return { path: document.uri.fsPath, languageId: document.languageId, scheme: document.uri.scheme };
}

/** Starts `<python> -m lsp.dap` once its interpreter is known to have it; else says why, as the server does. */
class AdapterFactory implements vscode.DebugAdapterDescriptorFactory {
  constructor(
    private readonly server: ServerManager,
    private readonly output: vscode.OutputChannel,
  ) {}

  async createDebugAdapterDescriptor(session: vscode.DebugSession): Promise<vscode.DebugAdapterDescriptor> {
    const config = session.configuration;
    const program = typeof config.program === 'string' ? config.program : '';
    const cwd = adapterCwd(filePath(session.workspaceFolder?.uri), program);
    const interpreter = await this.server.interpreter();
    const check = await runCheck(debugAdapterCheckCommand(interpreter.python), cwd);
    if (!check.ok) {
      this.output.appendLine(check.detail);
      throw new Error(debugAdapterProblem(interpreter, check.notFound, check.code === 3, check.detail));
    }
    const line = debugAdapterCommand(interpreter.python);
    this.output.appendLine(`Debugging ${program || session.name}: ${shellCommandLine(line)} (in ${cwd})`);
    return new vscode.DebugAdapterExecutable(line.command, line.args, { cwd, env: adapterEnv(config) });
  }
}

class ConfigurationProvider implements vscode.DebugConfigurationProvider {
  /** F5 with no launch.json: debug the active Python file. */
  resolveDebugConfiguration(
    _folder: vscode.WorkspaceFolder | undefined,
    config: vscode.DebugConfiguration,
  ): vscode.DebugConfiguration | undefined {
    const filled = fillEmptyConfiguration(config, activeFile());
    if ('error' in filled) {
      void vscode.window.showErrorMessage(filled.error);
      return undefined; // undefined (not null): stop, without opening launch.json
    }
    return filled.config as vscode.DebugConfiguration;
  }

  /** Checks the attributes once `${file}` and the like are substituted; a relative program is made absolute. */
  resolveDebugConfigurationWithSubstitutedVariables(
    folder: vscode.WorkspaceFolder | undefined,
    config: vscode.DebugConfiguration,
  ): vscode.DebugConfiguration | undefined {
    if (!vscode.workspace.isTrusted) {
      void vscode.window.showErrorMessage('kdsl: debugging runs your code; trust the workspace to debug it.');
      return undefined;
    }
    const checked = checkLaunchConfiguration(config, filePath(folder?.uri));
    if ('error' in checked) {
      void vscode.window.showErrorMessage(checked.error);
      return undefined;
    }
    return checked.config as vscode.DebugConfiguration;
  }
}

/** "Debug on CPU": debugs the jit function `fn` of the file `uri` on its examples. */
export async function debugFunction(uri: vscode.Uri, fn: string): Promise<boolean> {
  if (uri.scheme !== 'file') {
    void vscode.window.showInformationMessage('kdsl: save the file to debug it.');
    return false;
  }
  return vscode.debug.startDebugging(vscode.workspace.getWorkspaceFolder(uri), functionLaunchConfiguration(uri.fsPath, fn));
}

/** Asks for a block or thread index, starting from `current`; undefined when dismissed. */
async function askDim3(what: 'block' | 'thread', current: Dim3, session: string): Promise<Dim3 | undefined> {
  const text = await vscode.window.showInputBox({
    title: `kdsl: focus thread of ${session}`,
    prompt: what === 'block' ? 'Block index (blockIdx): x,y,z' : 'Thread index in the block (threadIdx): x,y,z',
    value: formatDim3(current),
    validateInput: (value) => {
      const parsed = parseDim3(value);
      return 'error' in parsed ? parsed.error : undefined;
    },
  });
  if (text === undefined) {
    return undefined;
  }
  const parsed = parseDim3(text);
  return 'value' in parsed ? parsed.value : undefined;
}

/**
 * `kdsl.setFocusThread [block, thread]`: the thread whose values the stopped session shows.
 * A missing argument is asked for (`1,0,0`); the adapter's answer says where the focus is.
 */
async function setFocusThread(focus: Map<string, Focus>, blockArg?: unknown, threadArg?: unknown): Promise<void> {
  const session = vscode.debug.activeDebugSession;
  if (!session || session.type !== DEBUG_TYPE) {
    void vscode.window.showInformationMessage(
      'kdsl: the focus thread is that of a kdsl debug session: start one with "Debug on CPU" or a kdsl launch configuration.',
    );
    return;
  }
  const current = focus.get(session.id) ?? initialFocus(session.configuration);
  const given = (arg: unknown) => (arg === undefined ? undefined : (readDim3(arg) ?? null));
  let block = given(blockArg);
  let thread = given(threadArg);
  if (block === null || thread === null) {
    void vscode.window.showErrorMessage('kdsl: a block or thread is up to three integers >= 0, as [1,0,0] or "1,0,0".');
    return;
  }
  block = block ?? (await askDim3('block', current.block, session.name));
  if (block === undefined) {
    return;
  }
  thread = thread ?? (await askDim3('thread', current.thread, session.name));
  if (thread === undefined) {
    return;
  }
  try {
    const answer: unknown = await session.customRequest(FOCUS_REQUEST, focusArguments(block, thread));
    const read = readFocusAnswer(answer, { block, thread });
    focus.set(session.id, { block: read.block, thread: read.thread });
    void vscode.window.showInformationMessage(read.message);
  } catch (error) {
    void vscode.window.showErrorMessage(`kdsl: the focus thread stays: ${errorMessage(error)}`);
  }
}

export function registerDebugging(context: vscode.ExtensionContext, server: ServerManager, output: vscode.OutputChannel): void {
  const focus = new Map<string, Focus>(); // per session: the focus the adapter last answered
  context.subscriptions.push(
    vscode.debug.registerDebugAdapterDescriptorFactory(DEBUG_TYPE, new AdapterFactory(server, output)),
    vscode.debug.registerDebugConfigurationProvider(DEBUG_TYPE, new ConfigurationProvider()),
    vscode.debug.onDidTerminateDebugSession((session) => focus.delete(session.id)),
    vscode.commands.registerCommand('kdsl.setFocusThread', (block?: unknown, thread?: unknown) =>
      setFocusThread(focus, block, thread),
    ),
    // `${command:kdsl.interpreterPath}` in a launch configuration (the cuda-gdb one) is the server's Python.
    vscode.commands.registerCommand('kdsl.interpreterPath', async () => (await server.interpreter()).python),
  );
}
