import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import {
  checkCommand,
  debugAdapterCheckCommand,
  debugAdapterCommand,
  debugAdapterProblem,
  defaultPython,
  expandPath,
  installCommand,
  interpreterProblem,
  isInside,
  queryPythonExtension,
  resolveInterpreter,
  serverCommand,
  serverCwd,
  shellCommandLine,
} from '../interpreter';

describe('resolveInterpreter', () => {
  it('prefers the setting over the Python extension', () => {
    assert.deepEqual(
      resolveInterpreter({ settingPath: '/opt/kdsl/bin/python', pythonExtensionPath: '/usr/bin/python3.12', platform: 'linux' }),
      { python: '/opt/kdsl/bin/python', source: 'setting' },
    );
  });

  it('uses the Python extension when the setting is empty or blank', () => {
    for (const settingPath of ['', '   ']) {
      assert.deepEqual(
        resolveInterpreter({ settingPath, pythonExtensionPath: '/home/u/.venv/bin/python', platform: 'linux' }),
        { python: '/home/u/.venv/bin/python', source: 'pythonExtension' },
      );
    }
  });

  it('falls back to python3 (python on Windows)', () => {
    assert.deepEqual(resolveInterpreter({ settingPath: '', platform: 'linux' }), { python: 'python3', source: 'default' });
    assert.deepEqual(resolveInterpreter({ settingPath: '', pythonExtensionPath: ' ', platform: 'darwin' }), {
      python: 'python3',
      source: 'default',
    });
    assert.deepEqual(resolveInterpreter({ settingPath: '', platform: 'win32' }), { python: 'python', source: 'default' });
    assert.equal(defaultPython('linux'), 'python3');
  });

  it('expands ${workspaceFolder} and ~ in the setting', () => {
    assert.deepEqual(
      resolveInterpreter({ settingPath: '${workspaceFolder}/.venv/bin/python', workspaceFolder: '/src/proj', platform: 'linux' }),
      { python: '/src/proj/.venv/bin/python', source: 'setting' },
    );
    assert.deepEqual(resolveInterpreter({ settingPath: '~/py/bin/python', homeDir: '/home/ann', platform: 'linux' }), {
      python: '/home/ann/py/bin/python',
      source: 'setting',
    });
  });

  it('ignores an interpreter inside the workspace when the workspace is untrusted', () => {
    const options = {
      settingPath: '',
      pythonExtensionPath: '/src/proj/.venv/bin/python',
      workspaceFolders: ['/src/proj'],
      platform: 'linux' as const,
    };
    assert.deepEqual(resolveInterpreter({ ...options, workspaceTrusted: false }), { python: 'python3', source: 'default' });
    assert.deepEqual(resolveInterpreter({ ...options, workspaceTrusted: true }), {
      python: '/src/proj/.venv/bin/python',
      source: 'pythonExtension',
    });
    assert.deepEqual(
      resolveInterpreter({ ...options, pythonExtensionPath: '/usr/bin/python3', workspaceTrusted: false }),
      { python: '/usr/bin/python3', source: 'pythonExtension' },
    );
  });
});

describe('path helpers', () => {
  it('expandPath leaves other text alone', () => {
    assert.equal(expandPath('python3', '/w', '/h'), 'python3');
    assert.equal(expandPath('a~b', '/w', '/h'), 'a~b');
    assert.equal(expandPath('~', undefined, '/h'), '/h');
    assert.equal(expandPath('${workspaceFolder}/x', undefined, '/h'), '${workspaceFolder}/x');
  });

  it('isInside compares whole path segments', () => {
    assert.equal(isInside('/src/proj/.venv/bin/python', '/src/proj', 'linux'), true);
    assert.equal(isInside('/src/project2/bin/python', '/src/proj', 'linux'), false);
    assert.equal(isInside('/src/proj', '/src/proj', 'linux'), false);
    assert.equal(isInside('/src/proj/../other/python', '/src/proj', 'linux'), false);
    assert.equal(isInside('C:\\Proj\\.venv\\Scripts\\python.exe', 'c:\\proj', 'win32'), true);
  });
});

describe('command lines', () => {
  it('builds the server, check and install commands', () => {
    assert.deepEqual(serverCommand('/v/bin/python'), { command: '/v/bin/python', args: ['-m', 'lsp'] });
    assert.deepEqual(checkCommand('python3'), { command: 'python3', args: ['-c', 'import dsl, lsp'] });
    assert.deepEqual(installCommand('python3'), { command: 'python3', args: ['-m', 'pip', 'install', 'kdsl'] });
  });

  it('starts the debug adapter as a module of the same interpreter', () => {
    assert.deepEqual(debugAdapterCommand('/v/bin/python'), { command: '/v/bin/python', args: ['-m', 'lsp.dap'] });
  });

  it('quotes for a POSIX shell', () => {
    assert.equal(shellCommandLine(installCommand('/usr/bin/python3'), 'linux'), '/usr/bin/python3 -m pip install kdsl');
    assert.equal(
      shellCommandLine(installCommand("/home/o'neil/my env/bin/python"), 'darwin'),
      "'/home/o'\\''neil/my env/bin/python' -m pip install kdsl",
    );
    assert.equal(shellCommandLine(checkCommand('python3'), 'linux'), "python3 -c 'import dsl, lsp'");
  });

  it('quotes for PowerShell on Windows', () => {
    assert.equal(
      shellCommandLine(installCommand('C:\\Program Files\\Python312\\python.exe'), 'win32'),
      "& 'C:\\Program Files\\Python312\\python.exe' -m pip install kdsl",
    );
    assert.equal(shellCommandLine(installCommand('python'), 'win32'), '& python -m pip install kdsl');
  });

  it('starts the server in the workspace only when trusted', () => {
    assert.equal(serverCwd(true, '/src/proj', '/ext'), '/src/proj');
    assert.equal(serverCwd(false, '/src/proj', '/ext'), '/ext');
    assert.equal(serverCwd(true, undefined, '/ext'), '/ext');
  });
});

describe('queryPythonExtension', () => {
  it('uses environments.getActiveEnvironmentPath with the resource', async () => {
    const seen: unknown[] = [];
    const api = {
      environments: {
        getActiveEnvironmentPath(resource?: unknown) {
          seen.push(resource);
          return { id: 'x', path: '/envs/a/bin/python' };
        },
      },
      settings: { getExecutionDetails: () => ({ execCommand: ['/old/python'] }) },
    };
    assert.equal(await queryPythonExtension(api, 'file:///w/k.py'), '/envs/a/bin/python');
    assert.deepEqual(seen, ['file:///w/k.py']);
  });

  it('falls back to settings.getExecutionDetails', async () => {
    const api = { settings: { getExecutionDetails: async () => ({ execCommand: ['/old/python'] }) } };
    assert.equal(await queryPythonExtension(api), '/old/python');
  });

  it('ignores multi-word commands, throwing APIs and missing exports', async () => {
    assert.equal(
      await queryPythonExtension({ settings: { getExecutionDetails: () => ({ execCommand: ['conda', 'run', 'python'] }) } }),
      undefined,
    );
    assert.equal(
      await queryPythonExtension({
        environments: {
          getActiveEnvironmentPath: () => {
            throw new Error('not ready');
          },
        },
      }),
      undefined,
    );
    assert.equal(await queryPythonExtension(undefined), undefined);
    assert.equal(await queryPythonExtension({ environments: { getActiveEnvironmentPath: () => ({ path: '' }) } }), undefined);
  });
});

describe('kdsl.interpreterPath in package.json', () => {
  const manifest = JSON.parse(readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8')) as {
    capabilities: { untrustedWorkspaces: { restrictedConfigurations: string[] } };
    contributes: { configuration: { properties: Record<string, { scope?: string }> } };
  };

  it('is read from User settings in a remote window too (code-server, Remote SSH)', () => {
    // `machine` and `machine-overridable` settings are ignored in User settings there: the
    // extension then fell back to python3, and the Settings UI's change did nothing.
    const scope = manifest.contributes.configuration.properties['kdsl.interpreterPath'].scope;
    assert.equal(scope, 'window');
  });

  it('is not taken from an untrusted workspace\'s settings', () => {
    assert.ok(manifest.capabilities.untrustedWorkspaces.restrictedConfigurations.includes('kdsl.interpreterPath'));
  });
});

describe('interpreterProblem', () => {
  const traceback = 'Traceback (most recent call last):\n  File "<string>", line 1, in <module>\nModuleNotFoundError: No module named \'dsl\'\n';

  it('names the interpreter, where it came from, why it failed and the setting', () => {
    assert.equal(
      interpreterProblem({ python: 'python3', source: 'default' }, false, traceback),
      'kdsl: the Python interpreter "python3" (the default: kdsl.interpreterPath is empty and the Python extension ' +
        "selected none) cannot import kdsl (ModuleNotFoundError: No module named 'dsl'). Set kdsl.interpreterPath " +
        'to a Python that has kdsl installed, or install kdsl into this one.',
    );
  });

  it('says a path from the setting that does not exist was not found', () => {
    assert.equal(
      interpreterProblem({ python: '/home/u/venv/bin/python', source: 'setting' }, true, 'spawn /home/u/venv/bin/python ENOENT'),
      'kdsl: the Python interpreter "/home/u/venv/bin/python" (set in kdsl.interpreterPath) was not found. ' +
        'Set kdsl.interpreterPath to a Python that has kdsl installed.',
    );
  });

  it('names the Python extension when it chose the interpreter', () => {
    const message = interpreterProblem({ python: '/w/.venv/bin/python', source: 'pythonExtension' }, false, '');
    assert.match(message, /\(selected in the Python extension\) cannot import kdsl\. Set kdsl\.interpreterPath/);
  });
});

describe('debugAdapterCheckCommand', () => {
  const python = defaultPython();
  const available = spawnSync(python, ['-c', 'pass']).status === 0;

  /** The check's exit status in a folder whose `lsp` package has the files `files`. */
  function statusWith(files: string[] | undefined): number | null {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'kdsl-dap-check-'));
    try {
      if (files) {
        mkdirSync(path.join(dir, 'lsp'));
        for (const file of files) {
          writeFileSync(path.join(dir, 'lsp', file), 'raise SystemExit(9)  # never imported by the check\n');
        }
        writeFileSync(path.join(dir, 'lsp', '__init__.py'), '');
      }
      const check = debugAdapterCheckCommand(python);
      return spawnSync(check.command, check.args, { cwd: dir, env: { ...process.env, PYTHONPATH: '' } }).status;
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  it('exits 0 with the adapter, 3 with a kdsl without it, 1 without kdsl (and imports no module of it)', { skip: !available }, () => {
    assert.equal(statusWith(['dap.py']), 0);
    assert.equal(statusWith([]), 3);
    const without = statusWith(undefined);
    // no `lsp` in the folder: the Python's own packages answer (a kdsl installed there has the adapter)
    const installed = spawnSync(python, ['-c', 'import lsp.dap'], { cwd: os.tmpdir() }).status === 0;
    if (installed) {
      assert.equal(without, 0);
    } else {
      // another `lsp` could be installed for this Python: then it is a kdsl without the adapter
      assert.ok(without === 1 || without === 3, String(without));
    }
  });
});

describe('debugAdapterProblem', () => {
  it('says a kdsl without the adapter needs updating, naming the interpreter', () => {
    assert.equal(
      debugAdapterProblem({ python: '/v/bin/python', source: 'setting' }, false, true, ''),
      'kdsl: the Python interpreter "/v/bin/python" (set in kdsl.interpreterPath) has a kdsl without the debug ' +
        'adapter (lsp.dap). Update kdsl there (python -m pip install -U kdsl), or set kdsl.interpreterPath to a ' +
        'Python with a newer kdsl.',
    );
  });

  it('says what the server would say when there is no kdsl or no interpreter', () => {
    const interpreter = { python: 'python3', source: 'default' } as const;
    const detail = "ModuleNotFoundError: No module named 'lsp'";
    assert.equal(debugAdapterProblem(interpreter, false, false, detail), interpreterProblem(interpreter, false, detail));
    assert.equal(debugAdapterProblem(interpreter, true, false, 'ENOENT'), interpreterProblem(interpreter, true, 'ENOENT'));
  });
});
