// The language server's process. The extension starts it and hands its pipes to
// the client library (a ServerOptions function), rather than letting the library
// start it, for one reason: vscode-languageclient 9 logs every exit of a process
// it started as an error, `Server process exited with code 0` after a deliberate
// stop or restart too (10.x logs code 0 as information, but needs VS Code 1.91).
// Here the extension knows which exits it asked for: those are logged as
// information, any other as an error. An unexpected exit is still the library's
// to handle (its connection closes, and it restarts the server).
// This module does not import `vscode`.

import { spawn, type ChildProcess } from 'child_process';

/** Where the process's exit is reported (the kdsl output channel). */
export interface ExitLog {
  info(line: string): void;
  error(line: string): void;
}

/** How to report an exit: a stop the extension asked for that ended cleanly is no error. */
export function describeExit(code: number | null, signal: string | null, asked: boolean): { error: boolean; line: string } {
  const how = signal !== null ? `signal ${signal}` : `code ${code}`;
  if (asked) {
    const clean = code === 0 || signal !== null; // a signal: the extension ended a server that did not exit
    return { error: !clean, line: clean ? 'The kdsl language server stopped.' : `The kdsl language server stopped with ${how}.` };
  }
  return { error: true, line: `The kdsl language server exited unexpectedly (${how}).` };
}

export class ServerProcess {
  private asked = false;
  private readonly exit: Promise<void>;

  private constructor(
    readonly child: ChildProcess,
    log: ExitLog,
  ) {
    // A failure to signal or to write after the start: say it, never throw it into the extension host.
    child.on('error', (error) => log.error(`The kdsl language server's process: ${error.message}`));
    this.exit = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        const { error, line } = describeExit(code, signal, this.asked);
        (error ? log.error : log.info).call(log, line);
        resolve();
      });
    });
  }

  /** Starts `command args` in `cwd`; rejects when it cannot start (no such file, no permission). */
  static start(command: string, args: readonly string[], cwd: string, log: ExitLog): Promise<ServerProcess> {
    const child = spawn(command, args, { cwd, stdio: 'pipe', windowsHide: true });
    return new Promise((resolve, reject) => {
      child.once('error', reject); // emitted instead of 'spawn' when it cannot start
      child.once('spawn', () => {
        child.removeListener('error', reject);
        resolve(new ServerProcess(child, log));
      });
    });
  }

  /** Says that the exit to come is asked for: call before stopping the client. */
  stopping(): void {
    this.asked = true;
  }

  /**
   * Waits for the process to exit, ending it (SIGTERM, then SIGKILL) when it is
   * still running `graceMs` after a stop: a server that ignored `exit` must not
   * outlive the client, nor two servers share a workspace after a restart.
   */
  async stopped(graceMs: number): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) {
      return;
    }
    const exited = (ms: number) => Promise.race([this.exit.then(() => true), delay(ms).then(() => false)]);
    if (await exited(graceMs)) {
      return;
    }
    this.child.kill('SIGTERM');
    if (!(await exited(graceMs))) {
      this.child.kill('SIGKILL');
      await this.exit;
    }
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
