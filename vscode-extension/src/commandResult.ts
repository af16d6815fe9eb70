// What the user is shown when a server command (Compile, Run) answers.
// This module does not import `vscode`.

import type { CommandResult } from './protocol';

export interface Notice {
  level: 'info' | 'warning';
  message: string;
}

/**
 * The notification for a command's answer, or none: when the server asked a
 * question on the way (no GPU: run on the CPU instead?) and the user dismissed
 * it, the question already said why, and the command ends quietly.
 */
export function commandNotice(result: CommandResult | null | undefined, functionName: string): Notice | undefined {
  if (result?.dismissed === true) {
    return undefined;
  }
  const message = typeof result?.message === 'string' && result.message !== '' ? result.message : `${functionName}: done.`;
  return { level: result?.ok === false ? 'warning' : 'info', message };
}
