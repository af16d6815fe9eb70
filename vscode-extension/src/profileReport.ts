// Reading the answer of the server's `kdsl.profile` command: the `dsl.profiling`
// report (dsl/profiling/records.py, schema 1) as checked records. The report was
// written by the user's own process and only passed on by the server, so nothing in
// it is trusted: a wrong schema or shape rejects the report, a malformed line is
// left out and the rest is kept. This module does not import `vscode`.

import { PROFILE_COMMAND } from './protocol';

/** The report schema this reads (`SCHEMA_VERSION` of dsl/profiling/records.py). */
export const PROFILE_SCHEMA = 1;

/** One Python line as one kernel launch ran it: a `kernels[].lines[]` entry of the report. */
export interface LineFigures {
  /** The kernel launch whose warp samples `stallShare` is a share of: its name, and its place among the call's launches. */
  kernel: string;
  launch: number;
  file: string;
  /** 1-based, as in the report. */
  line: number;
  /** This line's fraction of all the kernel's warp samples, 0 to 1. */
  stallShare: number;
  /** (reason, share of this line's samples), largest first. */
  topStalls: Array<[string, number]>;
  /** Global memory: 32-byte sectors per request, and what a coalesced access of that width needs. */
  sectorsPerRequest: number | null;
  idealSectorsPerRequest: number | null;
  /** Shared memory: wavefronts beyond the ideal. */
  bankConflicts: number | null;
  /** The line's text when it was profiled, stripped; '' when the server could not read it. */
  source: string;
}

export interface Profile {
  /** The profiled jit function. */
  function: string;
  /** The profiled file's path, as the server saw it. */
  file: string;
  device: string;
  /** Each launch's kernel name, in launch order. */
  kernels: string[];
  /** Every kernel's lines, in the report's order (each kernel's hottest first). */
  lines: LineFigures[];
}

export type ProfileRead = { profile: Profile } | { error: string };

/** A `kdsl.profile` answer that carries a profile: the document it is about and what it says. */
export type ProfileAnswer = { uri: string } & ProfileRead;

type Json = Record<string, unknown>;

function isRecord(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isFiniteNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

/** A figure the counters may not have given (null in the report); anything else but a number is none too. */
function optionalFigure(value: unknown): number | null {
  return isFiniteNumber(value) ? value : null;
}

function readStalls(value: unknown): Array<[string, number]> {
  if (!Array.isArray(value)) {
    return [];
  }
  return value.filter(
    (pair): pair is [string, number] =>
      Array.isArray(pair) && pair.length === 2 && typeof pair[0] === 'string' && isFiniteNumber(pair[1]),
  );
}

/** One `lines[]` entry, or undefined when it lacks what places or weighs it. */
function readLine(value: unknown, kernel: string, launch: number): LineFigures | undefined {
  if (!isRecord(value) || typeof value.file !== 'string' || !Number.isInteger(value.line)) {
    return undefined;
  }
  const line = value.line as number;
  if (line < 1 || !isFiniteNumber(value.stall_share) || value.stall_share < 0) {
    return undefined;
  }
  return {
    kernel,
    launch,
    file: value.file,
    line,
    stallShare: Math.min(value.stall_share, 1),
    topStalls: readStalls(value.top_stalls),
    sectorsPerRequest: optionalFigure(value.sectors_per_request),
    idealSectorsPerRequest: optionalFigure(value.ideal_sectors_per_request),
    bankConflicts: optionalFigure(value.bank_conflicts),
    source: typeof value.source === 'string' ? value.source.trim() : '',
  };
}

/** The report (`ProfileReport.to_json()`), or why it cannot be read. */
export function readProfile(value: unknown): ProfileRead {
  if (!isRecord(value)) {
    return { error: 'the profile is not a JSON object' };
  }
  if (value.schema !== PROFILE_SCHEMA) {
    return { error: `the profile has schema ${JSON.stringify(value.schema)}; this extension reads schema ${PROFILE_SCHEMA}` };
  }
  if (typeof value.file !== 'string' || !Array.isArray(value.kernels)) {
    return { error: 'the profile names no file or lists no kernels' };
  }
  const kernels: string[] = [];
  const lines: LineFigures[] = [];
  for (const kernel of value.kernels) {
    if (!isRecord(kernel)) {
      continue;
    }
    const name = typeof kernel.name === 'string' ? kernel.name : '?';
    const launch = Number.isInteger(kernel.launch) ? (kernel.launch as number) : kernels.length;
    kernels.push(name);
    for (const entry of Array.isArray(kernel.lines) ? kernel.lines : []) {
      const line = readLine(entry, name, launch);
      if (line) {
        lines.push(line);
      }
    }
  }
  const text = (field: unknown) => (typeof field === 'string' ? field : '');
  return { profile: { function: text(value.function), file: value.file, device: text(value.device), kernels, lines } };
}

/**
 * The profile in a server command's answer: only `kdsl.profile` (arguments
 * `[uri, jit function]`) answering `ok: true` with a `profile` has one; any other
 * answer (another command, a failure, a cancelled run) is undefined.
 */
export function profileAnswer(command: string, args: readonly unknown[], result: unknown): ProfileAnswer | undefined {
  const uri = args[0];
  if (command !== PROFILE_COMMAND || typeof uri !== 'string' || !isRecord(result) || result.ok !== true) {
    return undefined;
  }
  if (!('profile' in result)) {
    return undefined;
  }
  return { uri, ...readProfile(result.profile) };
}
