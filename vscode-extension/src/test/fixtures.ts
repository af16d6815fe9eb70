// A `kdsl/capabilities` answer as the server gives it (tests/lsp/test_capabilities.py
// checks the real one), and a fake client that answers it.

import type { RequestClient } from '../capabilities';
import type { Capabilities, StageInfo } from '../protocol';

function stage(name: string, language: string, extension: string, needsViews = true, madeBy = 'pipeline'): StageInfo {
  return { name, language, extension, binary: false, needsViews, madeBy };
}

export const CAPABILITIES: Capabilities = {
  stages: [
    stage('traced', 'mlir', '.mlir'),
    stage('lowered', 'mlir', '.mlir'),
    stage('llvm', 'llvm', '.ll'),
    stage('ptx', 'ptx', '.ptx', false),
    stage('sass', 'sass', '.sass', true, 'on request'),
    stage('launcher', 'python', '.py', true, 'launcher'),
  ],
  targets: ['sm_80', 'sm_86', 'sm_89', 'sm_90'],
  defaultTarget: 'sm_90',
  settings: {
    target: '',
    'worker.timeoutSeconds': 10.0,
    'worker.memoryLimitMb': 4096,
    'worker.sandbox': 'standard',
    debounceMs: 300,
    executeUserCode: true,
  },
  choices: {
    target: ['', 'sm_80', 'sm_86', 'sm_89', 'sm_90'],
    'worker.sandbox': ['standard', 'strict'],
  },
};

export function stageOf(name: string): StageInfo {
  const found = CAPABILITIES.stages.find((s) => s.name === name);
  if (!found) {
    throw new Error(`no stage ${name} in the fixture`);
  }
  return found;
}

/** A client whose every request answers `answer` (or fails with it, when it is an Error); it counts the requests. */
export class FakeClient implements RequestClient {
  readonly asked: string[] = [];
  constructor(private answer: unknown = CAPABILITIES) {}

  answerWith(answer: unknown): void {
    this.answer = answer;
  }

  sendRequest<R>(method: string): Promise<R> {
    this.asked.push(method);
    const answer = this.answer;
    return answer instanceof Error ? Promise.reject(answer) : Promise.resolve(structuredClone(answer) as R);
  }
}
