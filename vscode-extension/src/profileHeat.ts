// The gutter heat map of *Profile on GPU*, as data: which lines of the profiled
// document are hot and how hot (a level of 1 to 5 from their stall share), what
// their hover says, the colours of the levels, and which lines still hold after an
// edit. This module does not import `vscode`; profileView.ts draws what it makes.
//
// The server already ends the hottest lines with an inlay hint ("31% stalls · long
// scoreboard"), so the heat map adds no text after the line: it colours every
// sampled line and gives the full figures in a hover.

import type { LineFigures, Profile } from './profileReport';

/** The lowest stall share of each level (level 1 is any share above 0). */
export const LEVEL_FLOORS: readonly number[] = [0, 0.02, 0.05, 0.15, 0.3];
export const HEAT_LEVELS = LEVEL_FLOORS.length;

/** records.py's `uncoalesced`: more than 1.25 times the sectors per request the access needs. */
const UNCOALESCED_RATIO = 1.25;

/** The text of a 0-based line of the document as it is now; undefined past its end. */
export type LineText = (line: number) => string | undefined;

export interface HeatLine {
  /** 0-based line of the document. */
  line: number;
  /** 1 to HEAT_LEVELS, from the largest share among `figures`. */
  level: number;
  /** Each kernel's figures for this line, the largest share first. */
  figures: LineFigures[];
  /** The text the figures are about (stripped); '' when unknown. */
  source: string;
  /** The document was edited since the profile (not on this line, which would drop it). */
  stale: boolean;
}

export interface HeatMap {
  function: string;
  device: string;
  /** Each launch's kernel name: with more than one, each figure names its kernel. */
  kernels: string[];
  lines: HeatLine[];
}

/** One edit of a document change event (`TextDocumentContentChangeEvent`), applied in order. */
export interface LineEdit {
  start: { line: number; character: number };
  end: { line: number; character: number };
  text: string;
}

/** 0 for no stalls, else the level whose floor the share reaches (1 to HEAT_LEVELS). */
export function heatLevel(share: number): number {
  if (!(share > 0)) {
    return 0;
  }
  let level = 1;
  while (level < HEAT_LEVELS && share >= LEVEL_FLOORS[level]) {
    level += 1;
  }
  return level;
}

/** A line's text still reads as the profiled one; a line whose text the server did not have cannot be checked. */
function stillReads(source: string, text: string | undefined): boolean {
  return text !== undefined && (source === '' || text.trim() === source);
}

/**
 * The heat map of a profile on the document that holds `files` (the profile's own
 * path, and the document's, which may be spelt differently): one entry per line with
 * a stall share above 0 in any kernel, leaving out lines that no longer read as they
 * did when profiled (edited while the profile ran) or lie past the document's end.
 * The level follows the largest share: shares of different kernels do not add up.
 */
export function makeHeatMap(profile: Profile, files: readonly string[], textAt: LineText): HeatMap {
  const byLine = new Map<number, LineFigures[]>();
  for (const figures of profile.lines) {
    if (figures.stallShare > 0 && files.includes(figures.file)) {
      byLine.set(figures.line - 1, [...(byLine.get(figures.line - 1) ?? []), figures]);
    }
  }
  const lines: HeatLine[] = [];
  for (const [line, all] of byLine) {
    const sorted = [...all].sort((a, b) => b.stallShare - a.stallShare);
    const source = sorted.find((f) => f.source !== '')?.source ?? '';
    if (stillReads(source, textAt(line))) {
      lines.push({ line, level: heatLevel(sorted[0].stallShare), figures: sorted, source, stale: false });
    }
  }
  lines.sort((a, b) => a.line - b.line);
  return { function: profile.function, device: profile.device, kernels: profile.kernels, lines };
}

function percent(share: number): string {
  return share > 0 && share < 0.005 ? '<1%' : `${Math.round(share * 100)}%`;
}

/** A figure as Python's `:g` writes the report's rounded ones (32.0 -> 32, 4.25 -> 4.25). */
function figure(value: number): string {
  return String(Number(value.toFixed(2)));
}

/** `31% stalls · long scoreboard`: the share and the top reason without its gloss. */
export function stallNote(figures: LineFigures): string {
  const reason = figures.topStalls[0]?.[0].split(' (')[0];
  return reason ? `${percent(figures.stallShare)} stalls · ${reason}` : `${percent(figures.stallShare)} stalls`;
}

/** What the line's memory accesses do wrong: `uncoalesced: 32 sectors/request (ideal 4)`, `12 bank conflicts`. */
export function memoryNotes(figures: LineFigures): string[] {
  const notes: string[] = [];
  const { sectorsPerRequest: sectors, idealSectorsPerRequest: ideal, bankConflicts } = figures;
  if (sectors !== null && ideal !== null && sectors > UNCOALESCED_RATIO * ideal) {
    notes.push(`uncoalesced: ${figure(sectors)} sectors/request (ideal ${figure(ideal)})`);
  }
  if (bankConflicts !== null && bankConflicts > 0) {
    const count = Math.round(bankConflicts).toLocaleString('en-US');
    notes.push(`${count} bank conflict${bankConflicts === 1 ? '' : 's'}`);
  }
  return notes;
}

/** Untrusted text (kernel names and stall reasons come from the user's process) shown as itself in Markdown. */
export function escapeMarkdown(text: string): string {
  return text.replace(/[\\`*_[\]<>#|~&!]/g, (c) => `\\${c}`);
}

/** The kernel of a figure where the call launched several: its name, and its launch where the name is not enough. */
function kernelLabel(figures: LineFigures, map: HeatMap): string {
  if (map.kernels.length < 2) {
    return '';
  }
  const repeated = map.kernels.filter((name) => name === figures.kernel).length > 1;
  return `${figures.kernel}${repeated ? ` (launch ${figures.launch})` : ''}: `;
}

function figuresMarkdown(figures: LineFigures, map: HeatMap): string {
  const head = `**${escapeMarkdown(stallNote(figures))}**`;
  const kernel = escapeMarkdown(kernelLabel(figures, map));
  const memory = memoryNotes(figures).map((note) => ` · ${escapeMarkdown(note)}`).join('');
  const stalls = figures.topStalls.map(([reason, share]) => `${reason} ${percent(share)}`).join(', ');
  const detail =
    `${(figures.stallShare * 100).toFixed(1)}% of ${figures.kernel}'s warp samples` +
    (stalls === '' ? '' : `; top stalls: ${stalls}`);
  return `${kernel}${head}${memory}  \n${escapeMarkdown(detail)}`;
}

/** The hover of a hot line (Markdown): each kernel's figures, where they come from, and whether they are stale. */
export function heatHover(map: HeatMap, heat: HeatLine): string {
  const where = map.device === '' ? '' : ` on ${map.device}`;
  const parts = [
    `kdsl profile of ${escapeMarkdown(map.function)}${escapeMarkdown(where)}`,
    ...heat.figures.map((figures) => figuresMarkdown(figures, map)),
  ];
  if (heat.stale) {
    parts.push('*Profiled before your latest edits: profile again for current figures.*');
  }
  return parts.join('\n\n');
}

function newlines(text: string): number {
  return text.match(/\r\n|\r|\n/g)?.length ?? 0;
}

/**
 * Where a 0-based line's text may be after one edit, most likely first; none when
 * the edit removed the whole line. Of a line the edit touches, the part before the
 * edit stays where the edit starts, and the part after it follows the inserted text;
 * which of them (if either) still reads as the profiled line is checked afterwards.
 */
function linesAfterEdit(line: number, edit: LineEdit): number[] {
  const { start, end } = edit;
  const added = newlines(edit.text);
  if (line < start.line) {
    return [line];
  }
  if (line > end.line) {
    return [line + added - (end.line - start.line)];
  }
  const places: number[] = [];
  if (line === start.line && !(line === end.line && end.character === 0)) {
    places.push(start.line); // the edit starts on it or at its end: its start is kept here
  }
  if (line === end.line && start.line + added !== places[0]) {
    places.push(start.line + added); // its end is kept after the inserted text
  }
  return places;
}

/**
 * The heat lines after a document change (its edits in the order of the event):
 * each moves with its text, a line whose text changed is dropped (its figures are
 * not about this text), and the others are marked stale (the code they were
 * measured on has changed around them).
 */
export function heatAfterEdit(lines: readonly HeatLine[], edits: readonly LineEdit[], textAt: LineText): HeatLine[] {
  if (edits.length === 0) {
    return [...lines];
  }
  const kept: HeatLine[] = [];
  for (const heat of lines) {
    let places = [heat.line];
    let touched = false;
    for (const edit of edits) {
      touched ||= places.some((line) => edit.start.line <= line && line <= edit.end.line);
      places = places.flatMap((line) => linesAfterEdit(line, edit));
    }
    // Without the profiled text, a line an edit touched cannot be shown to be unchanged.
    const line = heat.source === '' && touched ? undefined : places.find((at) => stillReads(heat.source, textAt(at)));
    if (line !== undefined) {
      kept.push({ ...heat, line, stale: true });
    }
  }
  return kept;
}

/**
 * The colour of each level: one warm hue, more opaque (and redder) as the level
 * rises. A faint colour blends into the background, so a low level reads as faint
 * on dark and light themes alike (a light-to-dark ramp would invert on a dark one).
 */
export const HEAT_COLOURS: ReadonlyArray<{ rgb: string; opacity: number }> = [
  { rgb: '#f2a93b', opacity: 0.3 },
  { rgb: '#f2a93b', opacity: 0.55 },
  { rgb: '#ee7b30', opacity: 0.75 },
  { rgb: '#e5532b', opacity: 0.9 },
  { rgb: '#d62d20', opacity: 1 },
];

function rgba(rgb: string, opacity: number): string {
  const [r, g, b] = [1, 3, 5].map((at) => parseInt(rgb.slice(at, at + 2), 16));
  return `rgba(${r}, ${g}, ${b}, ${opacity})`;
}

/** The overview ruler's colour of a level (1-based). */
export function rulerColour(level: number): string {
  const { rgb, opacity } = HEAT_COLOURS[level - 1];
  return rgba(rgb, opacity);
}

/**
 * The gutter icon of a level (1-based), as a data URI: a bar the full height of the
 * line, so that consecutive hot lines make one strip.
 */
export function gutterIcon(level: number): string {
  const { rgb, opacity } = HEAT_COLOURS[level - 1];
  const svg =
    '<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 16 16">' +
    `<rect x="4" y="0" width="8" height="16" fill="${rgb}" fill-opacity="${opacity}"/></svg>`;
  return `data:image/svg+xml;base64,${Buffer.from(svg, 'utf8').toString('base64')}`;
}
