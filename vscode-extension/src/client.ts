// Creating, starting and restarting the LanguageClient of the kdsl server.

import { execFile } from 'child_process';
import * as os from 'os';
import * as vscode from 'vscode';
import {
  LanguageClient,
  RevealOutputChannelOn,
  type LanguageClientOptions,
  type ServerOptions,
  TransportKind,
} from 'vscode-languageclient/node';
import { CapabilitiesCache, compareSettings, stageNamed } from './capabilities';
import {
  checkCommand,
  installCommand,
  queryPythonExtension,
  resolveInterpreter,
  serverCommand,
  serverCwd,
  shellCommandLine,
  type ResolvedInterpreter,
} from './interpreter';
import type { Capabilities, StageInfo } from './protocol';
import {
  DEFAULT_SETTINGS,
  readSettings,
  SECTION,
  toInitializationOptions,
  type KdslSettings,
  type SettingKey,
} from './settings';

const PYTHON_EXTENSION_ID = 'ms-python.python';
const CHECK_TIMEOUT_MS = 30_000;

export function currentSettings(): KdslSettings {
  const config = vscode.workspace.getConfiguration(SECTION);
  return readSettings((key: SettingKey) => config.get(key));
}

async function pythonExtensionExports(): Promise<unknown> {
  const extension = vscode.extensions.getExtension(PYTHON_EXTENSION_ID);
  if (!extension) {
    return undefined;
  }
  try {
    return extension.isActive ? extension.exports : await extension.activate();
  } catch {
    return undefined;
  }
}

function primaryResource(): vscode.Uri | undefined {
  const editor = vscode.window.activeTextEditor;
  if (editor && editor.document.languageId === 'python' && editor.document.uri.scheme === 'file') {
    return editor.document.uri;
  }
  return vscode.workspace.workspaceFolders?.[0]?.uri;
}

type CheckResult = { ok: true } | { ok: false; notFound: boolean; detail: string };

function checkKdslInstalled(python: string, cwd: string): Promise<CheckResult> {
  const check = checkCommand(python);
  return new Promise((resolve) => {
    execFile(check.command, check.args, { cwd, timeout: CHECK_TIMEOUT_MS, windowsHide: true }, (error, _stdout, stderr) => {
      if (!error) {
        resolve({ ok: true });
        return;
      }
      const notFound = (error as NodeJS.ErrnoException).code === 'ENOENT';
      resolve({ ok: false, notFound, detail: (stderr || error.message).trim() });
    });
  });
}

export class ServerManager implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private queue: Promise<void> = Promise.resolve();
  private readonly disposables: vscode.Disposable[] = [];
  private readonly didStart = new vscode.EventEmitter<void>();
  /** Fires each time a server has started. */
  readonly onDidStart = this.didStart.event;
  private pythonWatch: vscode.Disposable | undefined;
  private readonly capabilityCache = new CapabilitiesCache();

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly output: vscode.OutputChannel,
    private readonly trace: vscode.OutputChannel,
  ) {
    this.disposables.push(
      this.didStart,
      vscode.tasks.onDidEndTaskProcess((event) => {
        if (event.execution.task.definition.type === 'kdsl' && event.execution.task.definition.action === 'install') {
          if (event.exitCode === 0) {
            void this.restart();
          } else {
            void vscode.window.showErrorMessage(`Installing kdsl failed (exit code ${event.exitCode}). See the terminal for details.`);
          }
        }
      }),
    );
  }

  /** The client when it is running. */
  get running(): LanguageClient | undefined {
    return this.client?.isRunning() ? this.client : undefined;
  }

  /**
   * The running server's stages, targets and defaults (`kdsl/capabilities`),
   * asked once per server; rejects when no server runs or it cannot answer.
   */
  capabilities(): Promise<Capabilities> {
    const client = this.running;
    return client ? this.capabilityCache.get(client) : Promise.reject(new Error('the kdsl language server is not running'));
  }

  /** A stage of the last server that answered, also while none runs. */
  knownStage(name: string): StageInfo | undefined {
    return stageNamed(this.capabilityCache.known, name);
  }

  start(): Promise<void> {
    return this.enqueue(() => this.doStart());
  }

  restart(): Promise<void> {
    return this.enqueue(async () => {
      await this.doStop();
      await this.doStart();
    });
  }

  stop(): Promise<void> {
    return this.enqueue(() => this.doStop());
  }

  dispose(): void {
    this.pythonWatch?.dispose();
    for (const d of this.disposables) {
      d.dispose();
    }
    void this.stop();
  }

  private enqueue(work: () => Promise<void>): Promise<void> {
    const next = this.queue.then(work, work);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async resolve(settings: KdslSettings): Promise<ResolvedInterpreter> {
    const folders = vscode.workspace.workspaceFolders ?? [];
    const exports = settings.interpreterPath === '' ? await pythonExtensionExports() : undefined;
    this.watchPythonExtension(exports);
    return resolveInterpreter({
      settingPath: settings.interpreterPath,
      pythonExtensionPath: exports ? await queryPythonExtension(exports, primaryResource()) : undefined,
      workspaceFolder: folders[0]?.uri.fsPath,
      homeDir: os.homedir(),
      workspaceTrusted: vscode.workspace.isTrusted,
      workspaceFolders: folders.filter((f) => f.uri.scheme === 'file').map((f) => f.uri.fsPath),
    });
  }

  /** Restarts the server when the Python extension's interpreter changes. */
  private watchPythonExtension(exports: unknown): void {
    if (this.pythonWatch || typeof exports !== 'object' || exports === null) {
      return;
    }
    const environments = (exports as { environments?: { onDidChangeActiveEnvironmentPath?: unknown } }).environments;
    const subscribe = environments?.onDidChangeActiveEnvironmentPath;
    if (typeof subscribe === 'function') {
      this.pythonWatch = (subscribe as vscode.Event<unknown>).call(environments, () => {
        if (currentSettings().interpreterPath === '') {
          this.output.appendLine('The Python extension selected another interpreter; restarting.');
          void this.restart();
        }
      });
    }
  }

  private async doStart(): Promise<void> {
    const settings = currentSettings();
    const trusted = vscode.workspace.isTrusted;
    const interpreter = await this.resolve(settings);
    const cwd = serverCwd(trusted, vscode.workspace.workspaceFolders?.[0]?.uri.fsPath, this.context.extensionPath);
    this.output.appendLine(`Python interpreter: ${interpreter.python} (from ${describeSource(interpreter)})`);

    const check = await checkKdslInstalled(interpreter.python, cwd);
    if (!check.ok) {
      this.output.appendLine(check.detail);
      void this.offerFix(interpreter, check.notFound);
      return;
    }

    const server = serverCommand(interpreter.python);
    const serverOptions: ServerOptions = {
      command: server.command,
      args: server.args,
      transport: TransportKind.stdio,
      options: { cwd },
    };
    const initializationOptions = toInitializationOptions(settings, trusted);
    const clientOptions: LanguageClientOptions = {
      documentSelector: [
        { scheme: 'file', language: 'python' },
        { scheme: 'untitled', language: 'python' },
      ],
      outputChannel: this.output,
      traceOutputChannel: this.trace,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      initializationOptions,
      middleware: {
        workspace: {
          // Answer `workspace/configuration` for the kdsl section with the same
          // object as initializationOptions.
          configuration: async (params, token, next) => {
            const result = await next(params, token);
            if (!Array.isArray(result)) {
              return result;
            }
            return params.items.map((item, i) => (item.section === SECTION ? initializationOptions : result[i]));
          },
        },
      },
    };
    const client = new LanguageClient('kdsl', 'kdsl', serverOptions, clientOptions);
    this.client = client;
    this.output.appendLine(`Starting: ${shellCommandLine(server)} (trusted: ${initializationOptions.trusted})`);
    try {
      await client.start();
    } catch (error) {
      this.output.appendLine(`The kdsl language server failed to start: ${String(error)}`);
      void vscode.window.showErrorMessage('The kdsl language server failed to start.', 'Show Log').then((choice) => {
        if (choice === 'Show Log') {
          this.output.show(true);
        }
      });
      return;
    }
    void this.describeServer(settings); // not awaited: a slow answer must not hold up a restart
    this.didStart.fire();
  }

  /** Asks the new server for its capabilities and logs them, with any setting it does not know. */
  private async describeServer(settings: KdslSettings): Promise<void> {
    let capabilities: Capabilities;
    try {
      capabilities = await this.capabilities();
    } catch (error) {
      this.output.appendLine(`kdsl/capabilities: ${String(error)}`);
      void vscode.window.showWarningMessage(`kdsl: IR views are not available: ${errorText(error)}`);
      return;
    }
    const stages = capabilities.stages.map((s) => s.name).join(', ');
    this.output.appendLine(
      `Server stages: ${stages}; targets: ${capabilities.targets.join(', ')} (default ${capabilities.defaultTarget}).`,
    );
    const { warnings, notes } = compareSettings(capabilities, settings, DEFAULT_SETTINGS);
    for (const line of [...warnings, ...notes]) {
      this.output.appendLine(line);
    }
    for (const warning of warnings) {
      void vscode.window.showWarningMessage(warning);
    }
  }

  private async doStop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client) {
      try {
        await client.dispose(2000);
      } catch (error) {
        this.output.appendLine(`Stopping the server: ${String(error)}`);
      }
    }
  }

  private async offerFix(interpreter: ResolvedInterpreter, notFound: boolean): Promise<void> {
    const openSettings = 'Open Settings';
    const install = 'Install';
    if (notFound) {
      const choice = await vscode.window.showErrorMessage(
        `kdsl: the Python interpreter "${interpreter.python}" was not found. Select an interpreter in the Python extension or set kdsl.interpreterPath.`,
        openSettings,
      );
      if (choice === openSettings) {
        await vscode.commands.executeCommand('workbench.action.openSettings', 'kdsl.interpreterPath');
      }
      return;
    }
    const choice = await vscode.window.showWarningMessage(
      `kdsl is not installed in the Python interpreter "${interpreter.python}". Install it with pip, or choose another interpreter in the settings.`,
      install,
      openSettings,
    );
    if (choice === install) {
      await this.install(interpreter.python);
    } else if (choice === openSettings) {
      await vscode.commands.executeCommand('workbench.action.openSettings', 'kdsl.interpreterPath');
    }
  }

  /** Runs `<python> -m pip install kdsl` in a terminal; the server restarts when it succeeds. */
  private async install(python: string): Promise<void> {
    const line = installCommand(python);
    const scope = vscode.workspace.workspaceFolders?.[0] ?? vscode.TaskScope.Workspace;
    const task = new vscode.Task(
      { type: 'kdsl', action: 'install' },
      scope,
      'install kdsl',
      'kdsl',
      new vscode.ProcessExecution(line.command, line.args),
    );
    task.presentationOptions = { reveal: vscode.TaskRevealKind.Always, focus: false, clear: true };
    try {
      await vscode.tasks.executeTask(task);
    } catch {
      // No workspace for tasks: type the command into a plain terminal instead.
      const terminal = vscode.window.createTerminal({ name: 'kdsl install' });
      terminal.show();
      terminal.sendText(shellCommandLine(line));
      void vscode.window.showInformationMessage('When the installation has finished, run "kdsl: Restart Language Server".');
    }
  }
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function describeSource(interpreter: ResolvedInterpreter): string {
  switch (interpreter.source) {
    case 'setting':
      return 'the kdsl.interpreterPath setting';
    case 'pythonExtension':
      return 'the Python extension';
    default:
      return 'the default';
  }
}
