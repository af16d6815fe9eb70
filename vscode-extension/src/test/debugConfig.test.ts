import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import {
  adapterCwd,
  adapterEnv,
  checkLaunchConfiguration,
  DEBUG_TYPE,
  fillEmptyConfiguration,
  focusArguments,
  formatDim3,
  functionLaunchConfiguration,
  initialFocus,
  LAUNCH_ATTRIBUTES,
  parseDim3,
  readDim3,
  readFocusAnswer,
} from '../debugConfig';
import { DEBUG_FUNCTION_COMMAND, KDSL_CLIENT_CAPABILITIES, withKdslCapabilities } from '../protocol';

// out/test/ -> vscode-extension/package.json
const MANIFEST = JSON.parse(readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8')) as {
  activationEvents: string[];
  contributes: {
    commands: { command: string; title: string }[];
    breakpoints: { language: string }[];
    debuggers: {
      type: string;
      label: string;
      languages: string[];
      configurationAttributes: { launch: { required: string[]; properties: Record<string, { default?: unknown }> } };
      initialConfigurations: Record<string, unknown>[];
      configurationSnippets: { label: string; body: Record<string, unknown> }[];
    }[];
  };
};
const DEBUGGER = MANIFEST.contributes.debuggers[0];

const PY: { path: string; languageId: string; scheme: string } = { path: '/src/proj/saxpy.py', languageId: 'python', scheme: 'file' };

function checked(config: Record<string, unknown>, folder?: string) {
  const result = checkLaunchConfiguration(config, folder);
  assert.ok('config' in result, 'error' in result ? result.error : '');
  return result.config;
}

function failure(config: Record<string, unknown>, folder?: string): string {
  const result = checkLaunchConfiguration(config, folder);
  assert.ok('error' in result, `accepted ${JSON.stringify(config)}`);
  return result.error;
}

const LAUNCH = { type: 'kdsl', request: 'launch', name: 'Debug saxpy', program: '/src/proj/saxpy.py' };

describe('fillEmptyConfiguration (F5 with no launch.json)', () => {
  it('debugs the active Python file as a script', () => {
    const filled = {
      config: { type: 'kdsl', request: 'launch', name: 'Debug the file on CPU (kdsl)', program: '/src/proj/saxpy.py' },
    };
    assert.deepEqual(fillEmptyConfiguration({}, PY), filled);
    assert.deepEqual(fillEmptyConfiguration({ type: 'kdsl' }, PY), filled);
  });

  it('says what to do when no Python file on disk is active', () => {
    const error = 'kdsl: open a Python file to debug it, or add a kdsl launch configuration with a "program".';
    assert.deepEqual(fillEmptyConfiguration({}, undefined), { error });
    assert.deepEqual(fillEmptyConfiguration({}, { ...PY, languageId: 'markdown' }), { error });
    assert.deepEqual(fillEmptyConfiguration({}, { ...PY, scheme: 'untitled' }), { error });
  });

  it('leaves any other configuration as it is, also one without a program', () => {
    const config = { type: 'kdsl', request: 'launch', name: 'mine' };
    assert.deepEqual(fillEmptyConfiguration(config, PY), { config });
  });
});

describe('checkLaunchConfiguration', () => {
  it('keeps a valid configuration, block and thread as given', () => {
    const config = {
      ...LAUNCH,
      function: 'run_saxpy',
      example: 1,
      args: ['--n', '8'],
      block: [1, 0, 0],
      thread: [5, 0, 0],
      stopOnEntry: true,
      cwd: '/src/proj',
      env: { KDSL_X: '1' },
      preLaunchTask: 'build',
    };
    assert.deepEqual(checked(config, '/src/proj'), config);
  });

  it('names the configuration when program is missing', () => {
    assert.equal(
      failure({ type: 'kdsl', request: 'launch', name: 'Debug it' }),
      'kdsl: "Debug it" has no "program": set it to the Python file to debug (such as "${file}").',
    );
    assert.equal(
      failure({ type: 'kdsl', request: 'launch', program: '' }),
      'kdsl: the kdsl launch configuration has no "program": set it to the Python file to debug (such as "${file}").',
    );
  });

  it('says which attribute is wrong and what it takes', () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ request: 'attach' }, '"request" must be "launch" (the kdsl debugger does not attach)'],
      [{ program: 3 }, '"program" must be the path of a Python file'],
      [{ function: '' }, '"function" must be the name of a @dsl.jit function of the program'],
      [{ function: 'f', example: -1 }, '"example" must be an integer >= 0 (which examples= entry)'],
      [{ function: 'f', example: 1.5 }, '"example" must be an integer >= 0 (which examples= entry)'],
      [{ example: 0 }, '"example" must be given with "function" (the jit function whose examples= it picks)'],
      [{ args: '--n 8' }, '"args" must be an array of strings'],
      [{ block: [1, -1, 0] }, '"block" must be [x, y, z]: up to three integers >= 0, as 1,0,0'],
      [{ thread: [0, 0, 0, 0] }, '"thread" must be [x, y, z]: up to three integers >= 0, as 1,0,0'],
      [{ thread: 'x' }, '"thread" must be [x, y, z]: up to three integers >= 0, as 1,0,0'],
      [{ stopOnEntry: 'yes' }, '"stopOnEntry" must be true or false'],
      [{ cwd: '' }, '"cwd" must be the path of a folder'],
      [{ env: { N: 8 } }, '"env" must be an object of strings ({"NAME": "value"})'],
    ];
    for (const [change, what] of cases) {
      assert.equal(failure({ ...LAUNCH, ...change }), `kdsl: in "Debug saxpy", ${what}.`);
    }
  });

  it('reads a block or thread written as text (an ${input:...}) and fills missing components with 0', () => {
    const config = checked({ ...LAUNCH, block: '2,1', thread: [7] });
    assert.deepEqual([config.block, config.thread], [[2, 1, 0], [7, 0, 0]]);
  });

  it('makes a relative program absolute against cwd, and cwd against the workspace folder', () => {
    assert.equal(checked({ ...LAUNCH, program: 'saxpy.py' }, '/src/proj').program, '/src/proj/saxpy.py');
    const inSub = checked({ ...LAUNCH, program: 'saxpy.py', cwd: 'examples' }, '/src/proj');
    assert.deepEqual([inSub.cwd, inSub.program], ['/src/proj/examples', '/src/proj/examples/saxpy.py']);
    assert.equal(checked({ ...LAUNCH, program: 'saxpy.py' }, undefined).program, 'saxpy.py');
    assert.equal(checked(LAUNCH, '/elsewhere').program, '/src/proj/saxpy.py');
  });
});

describe('functionLaunchConfiguration (the Debug on CPU lens)', () => {
  it('debugs one jit function of the file', () => {
    assert.deepEqual(functionLaunchConfiguration('/src/proj/saxpy.py', 'run_saxpy'), {
      type: 'kdsl',
      request: 'launch',
      name: 'Debug run_saxpy on CPU',
      program: '/src/proj/saxpy.py',
      function: 'run_saxpy',
    });
    assert.ok('config' in checkLaunchConfiguration({ ...functionLaunchConfiguration('/a.py', 'f') }, undefined));
  });
});

describe('parseDim3 (the focus thread input boxes)', () => {
  it('reads up to three integers, separated by commas or spaces, in brackets or not', () => {
    const cases: [string, number[]][] = [
      ['1,0,0', [1, 0, 0]],
      [' 1, 2, 3 ', [1, 2, 3]],
      ['1 2 3', [1, 2, 3]],
      ['(4, 5, 6)', [4, 5, 6]],
      ['[7,8,9]', [7, 8, 9]],
      ['31', [31, 0, 0]],
      ['3,2', [3, 2, 0]],
    ];
    for (const [text, value] of cases) {
      assert.deepEqual(parseDim3(text), { value }, text);
    }
  });

  it('says what it takes otherwise', () => {
    for (const text of ['', '1,,0', '1,0,0,0', '-1,0,0', '1.5', 'x', '(1,0']) {
      assert.deepEqual(parseDim3(text), { error: `Expected up to three integers >= 0, as 1,0,0; got "${text}".` }, text);
    }
    assert.deepEqual(parseDim3('99999999999999999999'), { error: '"99999999999999999999" is too large.' });
  });

  it('formats as it reads', () => {
    assert.equal(formatDim3([1, 0, 2]), '1,0,2');
    assert.deepEqual(parseDim3(formatDim3([1, 0, 2])), { value: [1, 0, 2] });
  });

  it('readDim3 takes an array or text (a command argument) and refuses anything else', () => {
    assert.deepEqual(readDim3([1, 2, 3]), [1, 2, 3]);
    assert.deepEqual(readDim3('1,2'), [1, 2, 0]);
    for (const bad of [[], [1, 2, 3, 4], [0.5], ['1'], 7, null, { x: 1 }]) {
      assert.equal(readDim3(bad), undefined, JSON.stringify(bad));
    }
  });
});

describe('the focus thread', () => {
  it('starts at the configuration\'s block and thread, 0,0,0 where missing', () => {
    assert.deepEqual(initialFocus({ block: [1, 0, 0] }), { block: [1, 0, 0], thread: [0, 0, 0] });
    assert.deepEqual(initialFocus({}), { block: [0, 0, 0], thread: [0, 0, 0] });
  });

  it('asks kdsl/focus with block and thread', () => {
    assert.deepEqual(focusArguments([1, 0, 0], [3, 0, 0]), { block: [1, 0, 0], thread: [3, 0, 0] });
  });

  it('takes the focus the adapter answers, and says its description', () => {
    const asked = { block: [9, 0, 0] as [number, number, number], thread: [0, 0, 0] as [number, number, number] };
    assert.deepEqual(readFocusAnswer({ block: [1, 0, 0], thread: [3, 0, 0], description: 'block (1,0,0) thread (3,0,0), warp 0 lane 3.' }, asked), {
      block: [1, 0, 0],
      thread: [3, 0, 0],
      message: 'kdsl: focus on block (1,0,0) thread (3,0,0), warp 0 lane 3.',
    });
    assert.deepEqual(readFocusAnswer(undefined, asked), {
      block: [9, 0, 0],
      thread: [0, 0, 0],
      message: 'kdsl: focus on block (9,0,0), thread (0,0,0).',
    });
  });
});

describe('the adapter process', () => {
  it('starts in the workspace folder, else beside the program', () => {
    assert.equal(adapterCwd('/src/proj', '/tmp/x/a.py'), '/src/proj');
    assert.equal(adapterCwd(undefined, '/tmp/x/a.py'), '/tmp/x');
  });

  it('gets the configuration\'s env', () => {
    assert.deepEqual(adapterEnv({ env: { A: '1' } }), { A: '1' });
    assert.equal(adapterEnv({}), undefined);
  });
});

describe('package.json declares the debugger', () => {
  it('as type kdsl for Python files, with breakpoints in Python files', () => {
    assert.equal(DEBUGGER.type, DEBUG_TYPE);
    assert.equal(DEBUGGER.label, 'kdsl (CPU interpreter)');
    assert.deepEqual(DEBUGGER.languages, ['python']);
    assert.deepEqual(MANIFEST.contributes.breakpoints, [{ language: 'python' }]);
    assert.ok(MANIFEST.activationEvents.includes('onDebugResolve:kdsl'));
  });

  it('with exactly the attributes the adapter reads, program required', () => {
    const launch = DEBUGGER.configurationAttributes.launch;
    assert.deepEqual(Object.keys(launch.properties).sort(), [...LAUNCH_ATTRIBUTES].sort());
    assert.deepEqual(launch.required, ['program']);
    const defaults = { ...LAUNCH, ...Object.fromEntries(Object.entries(launch.properties).map(([k, v]) => [k, v.default])) };
    delete (defaults as Record<string, unknown>).function;
    delete (defaults as Record<string, unknown>).example;
    assert.ok('config' in checkLaunchConfiguration({ ...defaults, program: '/a.py', cwd: '/src' }, undefined));
  });

  it('whose initial configuration and kdsl snippets pass the check once variables are substituted', () => {
    const substitute = (value: unknown): unknown =>
      JSON.parse(
        JSON.stringify(value)
          .replace(/\^\\"(.*?)\\"/g, '$1') // a snippet's verbatim string, ^"..."
          .replace(/\\\\\$\{[^}]*\}/g, '/src/proj')
          .replace(/\$\{\d+:([^}]*)\}/g, '$1'),
      );
    const kdsl = DEBUGGER.configurationSnippets.filter((s) => s.body.type === 'kdsl');
    assert.deepEqual(
      kdsl.map((s) => s.label),
      ['kdsl: Debug a jit function on its examples', 'kdsl: Debug a script with every jit call interpreted'],
    );
    for (const config of [...DEBUGGER.initialConfigurations.map((c) => ({ ...c, program: '/src/proj/a.py' })), ...kdsl.map((s) => substitute(s.body))]) {
      const result = checkLaunchConfiguration(config as Record<string, unknown>, '/src/proj');
      assert.ok('config' in result, JSON.stringify([config, result]));
    }
  });

  it('and a cuda-gdb snippet that runs the script in the server\'s Python with KDSL_DEBUG=1', () => {
    const gdb = DEBUGGER.configurationSnippets.find((s) => s.body.type === 'cuda-gdb');
    assert.ok(gdb);
    assert.equal(gdb.body.program, '^"\\${command:kdsl.interpreterPath}"');
    assert.deepEqual(gdb.body.environment, [{ name: 'KDSL_DEBUG', value: '1' }]);
  });

  it('and the commands: Debug on CPU (the lens\'s), Set Focus Thread', () => {
    const titles = Object.fromEntries(MANIFEST.contributes.commands.map((c) => [c.command, c.title]));
    assert.equal(titles[DEBUG_FUNCTION_COMMAND], 'Debug on CPU');
    assert.equal(titles['kdsl.setFocusThread'], 'Set Focus Thread');
    assert.ok('kdsl.interpreterPath' in titles);
  });
});

describe('withKdslCapabilities (what the client tells the server it runs)', () => {
  it('sets experimental.kdsl.debugLens, keeping other experimental capabilities', () => {
    assert.deepEqual(KDSL_CLIENT_CAPABILITIES, { debugLens: true });
    assert.deepEqual(withKdslCapabilities(undefined), { kdsl: { debugLens: true } });
    assert.deepEqual(withKdslCapabilities({ other: 1, kdsl: { old: true } }), { other: 1, kdsl: { debugLens: true } });
    assert.deepEqual(withKdslCapabilities([1]), { kdsl: { debugLens: true } });
  });
});
