// Creating, starting and restarting the LanguageClient of the kdsl server.

import { execFile } from 'child_process';
import * as os from 'os';
import * as vscode from 'vscode';
import {
  DidChangeConfigurationNotification,
  ExecuteCommandRequest,
  LanguageClient,
  RevealOutputChannelOn,
  type LanguageClientOptions,
  type ServerOptions,
  type StaticFeature,
} from 'vscode-languageclient/node';
import { CapabilitiesCache, compareSettings, stageNamed } from './capabilities';
import {
  checkCommand,
  installCommand,
  interpreterProblem,
  queryPythonExtension,
  resolveInterpreter,
  serverCommand,
  serverCwd,
  shellCommandLine,
  type CommandLine,
  type ResolvedInterpreter,
} from './interpreter';
import { withKdslCapabilities, type Capabilities, type StageInfo } from './protocol';
import { ServerProcess } from './serverProcess';
import {
  answerConfiguration,
  DEFAULT_SETTINGS,
  overlaySettings,
  readSettings,
  SECTION,
  toServerSettings,
  type JsonObject,
  type KdslSettings,
  type SettingKey,
} from './settings';

const PYTHON_EXTENSION_ID = 'ms-python.python';
const CHECK_TIMEOUT_MS = 30_000;
const STOP_GRACE_MS = 2000;

/** A server command and its answer, whoever ran it (a code lens or one of the extension's commands). */
export interface CommandAnswer {
  command: string;
  arguments: unknown[];
  result: unknown;
}

export function currentSettings(): KdslSettings {
  const config = vscode.workspace.getConfiguration(SECTION);
  return readSettings((key: SettingKey) => config.get(key));
}

/**
 * The `kdsl` section the server reads, now: the extension's parsed settings and
 * the workspace's trust over VS Code's own section (keys the extension does not
 * know are kept). Sent at start-up and with every change, and answered to `workspace/configuration`.
 */
function serverSection(): JsonObject {
  const section = vscode.workspace.getConfiguration().get<unknown>(SECTION);
  return overlaySettings(section, toServerSettings(currentSettings(), vscode.workspace.isTrusted));
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

/** How a check command ended: `code` is its exit status (undefined when it did not start or was killed). */
export type CheckResult = { ok: true } | { ok: false; notFound: boolean; code?: number; detail: string };

/** Runs a short check of the interpreter (`checkCommand`, `debugAdapterCheckCommand`) in `cwd`. */
export function runCheck(check: CommandLine, cwd: string): Promise<CheckResult> {
  return new Promise((resolve) => {
    execFile(check.command, check.args, { cwd, timeout: CHECK_TIMEOUT_MS, windowsHide: true }, (error, _stdout, stderr) => {
      if (!error) {
        resolve({ ok: true });
        return;
      }
      const code = (error as { code?: unknown }).code; // an exit status, or a system error's name (ENOENT)
      resolve({
        ok: false,
        notFound: code === 'ENOENT',
        code: typeof code === 'number' ? code : undefined,
        detail: (stderr || error.message).trim(),
      });
    });
  });
}

/**
 * Tells the server, in the client capabilities (`experimental.kdsl`), what this extension runs
 * itself: `kdsl.debugFunction`, so the server adds the "Debug on CPU" code lens.
 */
const KDSL_CAPABILITIES: StaticFeature = {
  fillClientCapabilities: (capabilities) => {
    capabilities.experimental = withKdslCapabilities(capabilities.experimental);
  },
  initialize: () => undefined,
  getState: () => ({ kind: 'static' }),
  clear: () => undefined,
};

export class ServerManager implements vscode.Disposable {
  private client: LanguageClient | undefined;
  /** The running client's server process (a new one after the client library restarts a crashed server). */
  private process: ServerProcess | undefined;
  private queue: Promise<void> = Promise.resolve();
  private readonly disposables: vscode.Disposable[] = [];
  private readonly didStart = new vscode.EventEmitter<void>();
  /** Fires each time a server has started. */
  readonly onDidStart = this.didStart.event;
  private readonly didAnswerCommand = new vscode.EventEmitter<CommandAnswer>();
  /** Fires with each answer of a server command (`workspace/executeCommand`), for the views that show one. */
  readonly onDidAnswerCommand = this.didAnswerCommand.event;
  private pythonWatch: vscode.Disposable | undefined;
  private readonly capabilityCache = new CapabilitiesCache();

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly output: vscode.OutputChannel,
    private readonly trace: vscode.OutputChannel,
  ) {
    this.disposables.push(
      this.didStart,
      this.didAnswerCommand,
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

  /**
   * The Python interpreter the server runs in (or would, with the settings as they are now):
   * the debug adapter (`<python> -m lsp.dap`) runs in the same one.
   */
  interpreter(): Promise<ResolvedInterpreter> {
    return this.resolve(currentSettings());
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

  /**
   * Runs a server command through `client` (its answer also goes to
   * `onDidAnswerCommand`); the server reports work-done progress while it works.
   */
  async executeCommand(client: LanguageClient, command: string, args: unknown[]): Promise<unknown> {
    const result: unknown = await client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args });
    this.didAnswerCommand.fire({ command, arguments: args, result });
    return result;
  }

  /** Tells the running server the settings it applies without a restart (`settingsChange` said 'send'). */
  sendSettings(): Promise<void> {
    return this.enqueue(async () => {
      await this.running?.sendNotification(DidChangeConfigurationNotification.type, {
        settings: { [SECTION]: serverSection() },
      });
    });
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

    const check = await runCheck(checkCommand(interpreter.python), cwd);
    if (!check.ok) {
      this.output.appendLine(check.detail);
      void this.offerFix(interpreter, check.notFound, check.detail);
      return;
    }

    const server = serverCommand(interpreter.python);
    const exitLog = {
      info: (line: string) => this.output.appendLine(line),
      error: (line: string) => this.output.appendLine(`[Error] ${line}`),
    };
    // The extension starts the process itself (see serverProcess.ts), so that a stop it asks for logs no error.
    const serverOptions: ServerOptions = async () => {
      const started = await ServerProcess.start(server.command, server.args, cwd, exitLog);
      this.process = started;
      return started.child;
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [
        { scheme: 'file', language: 'python' },
        { scheme: 'untitled', language: 'python' },
      ],
      outputChannel: this.output,
      traceOutputChannel: this.trace,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      // Read at each start, also when the client library restarts a crashed server.
      initializationOptions: () => serverSection(),
      middleware: {
        // A code lens runs a server command through the client library, which
        // drops the answer: catch it on the way, for the views (the profile's heat map).
        executeCommand: async (command, args, next) => {
          const result: unknown = await next(command, args);
          this.didAnswerCommand.fire({ command, arguments: args, result });
          return result;
        },
        workspace: {
          // The kdsl section of the answer is what the server reads from
          // initializationOptions too: VS Code's section with the extension's
          // values (and the workspace's trust) over it.
          configuration: async (params, token, next) => {
            const result = await next(params, token);
            return Array.isArray(result) ? answerConfiguration(params.items, result, serverSection()) : result;
          },
        },
      },
    };
    const client = new LanguageClient('kdsl', 'kdsl', serverOptions, clientOptions);
    client.registerFeature(KDSL_CAPABILITIES);
    this.client = client;
    const runsCode = settings.executeUserCode && trusted;
    this.output.appendLine(`Starting: ${shellCommandLine(server)} (runs your code: ${runsCode})`);
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
    const process = this.process;
    this.client = undefined;
    this.process = undefined;
    process?.stopping(); // before the client stops it: this exit is no error
    if (client) {
      try {
        await client.dispose(STOP_GRACE_MS);
      } catch (error) {
        this.output.appendLine(`Stopping the server: ${String(error)}`);
      }
    }
    await process?.stopped(STOP_GRACE_MS);
  }

  /** The one message of a server that cannot start: the interpreter, why, and the setting that picks another. */
  private async offerFix(interpreter: ResolvedInterpreter, notFound: boolean, detail: string): Promise<void> {
    const openSettings = 'Open Settings';
    const install = 'Install';
    const message = interpreterProblem(interpreter, notFound, detail);
    const choice = notFound
      ? await vscode.window.showErrorMessage(message, openSettings)
      : await vscode.window.showWarningMessage(message, install, openSettings);
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
