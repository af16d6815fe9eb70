import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { commandNotice } from '../commandResult';

describe('commandNotice', () => {
  it('shows the server\'s message: information when it ran, a warning when it did not', () => {
    assert.deepEqual(commandNotice({ ok: true, message: 'run_saxpy: median 0.010 ms' }, 'run_saxpy'), {
      level: 'info',
      message: 'run_saxpy: median 0.010 ms',
    });
    assert.deepEqual(commandNotice({ ok: false, message: 'run_saxpy: run failed: x' }, 'run_saxpy'), {
      level: 'warning',
      message: 'run_saxpy: run failed: x',
    });
  });

  it('says the function is done when the server says nothing', () => {
    assert.deepEqual(commandNotice(null, 'saxpy'), { level: 'info', message: 'saxpy: done.' });
    assert.deepEqual(commandNotice({ message: '' }, 'saxpy'), { level: 'info', message: 'saxpy: done.' });
  });

  it('shows nothing after the user dismissed the server\'s question (no GPU: run on the CPU?)', () => {
    const answer = { ok: false, error: 'no_gpu', dismissed: true, message: 'run_saxpy: no NVIDIA GPU/driver found' };
    assert.equal(commandNotice(answer, 'run_saxpy'), undefined);
  });
});
