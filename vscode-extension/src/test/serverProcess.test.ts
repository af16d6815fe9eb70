import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { describeExit, ServerProcess, type ExitLog } from '../serverProcess';

/** Records what the process's exit logs. */
function recorder(): ExitLog & { lines: string[] } {
  const lines: string[] = [];
  return { lines, info: (line) => lines.push(`info: ${line}`), error: (line) => lines.push(`error: ${line}`) };
}

/** `node -e script`: a stand-in server that needs nothing but the Node.js running the tests. */
function start(script: string, log: ExitLog): Promise<ServerProcess> {
  return ServerProcess.start(process.execPath, ['-e', script], process.cwd(), log);
}

describe('describeExit', () => {
  it('is information for a stop the extension asked for', () => {
    assert.deepEqual(describeExit(0, null, true), { error: false, line: 'The kdsl language server stopped.' });
    assert.deepEqual(describeExit(null, 'SIGTERM', true), { error: false, line: 'The kdsl language server stopped.' });
  });
  it('is an error for a failed stop and for any exit not asked for, code 0 too', () => {
    assert.deepEqual(describeExit(1, null, true), { error: true, line: 'The kdsl language server stopped with code 1.' });
    assert.deepEqual(describeExit(0, null, false), { error: true, line: 'The kdsl language server exited unexpectedly (code 0).' });
    assert.deepEqual(describeExit(null, 'SIGSEGV', false), {
      error: true,
      line: 'The kdsl language server exited unexpectedly (signal SIGSEGV).',
    });
  });
});

describe('ServerProcess', () => {
  it('logs no error when the server exits with 0 after a stop (a restart)', async () => {
    const log = recorder();
    const server = await start('process.stdin.on("end", () => process.exit(0)); process.stdin.resume();', log);
    server.stopping();
    server.child.stdin?.end(); // what the client library's stop ends with
    await server.stopped(5000);
    assert.deepEqual(log.lines, ['info: The kdsl language server stopped.']);
  });

  it('logs an error when the server exits on its own', async () => {
    const log = recorder();
    const server = await start('process.exit(3)', log);
    await server.stopped(5000);
    assert.deepEqual(log.lines, ['error: The kdsl language server exited unexpectedly (code 3).']);
  });

  it('ends a server that does not exit after a stop', async () => {
    const log = recorder();
    const server = await start('setInterval(() => {}, 1000);', log);
    server.stopping();
    await server.stopped(200);
    assert.equal(server.child.signalCode, 'SIGTERM');
    assert.deepEqual(log.lines, ['info: The kdsl language server stopped.']);
  });

  it('rejects when the command cannot start', async () => {
    await assert.rejects(ServerProcess.start('/nonexistent/python3', ['-m', 'lsp'], process.cwd(), recorder()), /ENOENT/);
  });

  it('hands the library pipes it can speak LSP over', async () => {
    const server = await start('process.stdin.pipe(process.stdout);', recorder());
    const echoed = new Promise<string>((resolve) => server.child.stdout?.once('data', (data) => resolve(String(data))));
    server.child.stdin?.write('Content-Length: 2\r\n\r\n{}');
    assert.equal(await echoed, 'Content-Length: 2\r\n\r\n{}');
    server.stopping();
    server.child.stdin?.end();
    await server.stopped(5000);
  });
});
