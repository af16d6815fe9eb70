// The profile's gutter heat map, as data: reading `kdsl.profile` answers
// (profileReport.ts), and the levels, hovers, colours and edits (profileHeat.ts).
// Fixtures: data/profile-run_strided.json and data/profile-run_bank_conflict.json,
// the server's answers for the planted kernels of tests/profiling/planted.py, made
// from the counters recorded on an H200 (tests/profiling/data/run_*.raw.json), as if
// the file were /home/user/kernels/planted.py.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import {
  escapeMarkdown,
  gutterIcon,
  HEAT_COLOURS,
  HEAT_LEVELS,
  heatAfterEdit,
  heatHover,
  heatLevel,
  makeHeatMap,
  memoryNotes,
  rulerColour,
  stallNote,
  type HeatLine,
  type LineEdit,
} from '../profileHeat';
import { profileAnswer, readProfile, type LineFigures, type Profile } from '../profileReport';

const DATA = path.join(__dirname, '..', '..', 'src', 'test', 'data');
const FILE = '/home/user/kernels/planted.py';
const URI = 'file:///home/user/kernels/planted.py';

function answer(name: string): Record<string, unknown> {
  return JSON.parse(readFileSync(path.join(DATA, `profile-${name}.json`), 'utf8')) as Record<string, unknown>;
}

function profileOf(name: string): Profile {
  const read = readProfile(answer(name).profile);
  assert.ok('profile' in read, JSON.stringify(read));
  return read.profile;
}

/** tests/profiling/planted.py, the lines of the strided kernel (a document's 0-based line k is PLANTED[k]). */
const PLANTED = [
  '"""Kernels with a planted cause, for the profiler\'s tests: each has one line the GPU\'s counters',
  'must single out (run by `kdsl profile tests/profiling/planted.py::run_...`)."""',
  '',
  'import dsl',
  'from dsl import Constexpr, Float32, Int32, Tensor, f32',
  '',
  'N = 1 << 24',
  '',
  '',
  'def gather(t, i, n):',
  '    """A helper traced inline: its line is where the strided load\'s counters must land."""',
  '    return t[(i * 33) % n]  # strided: every lane of a warp in another 128-byte segment',
  '',
  '',
  '@dsl.kernel',
  'def strided(x: Tensor[f32], y: Tensor[f32], out: Tensor[f32], n: Int32):',
  '    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x',
  '    if i < n:',
  '        a = x[i]  # coalesced',
  '        b = gather(y, i, n)',
  '        out[i] = a + b',
  '',
];

function textOf(lines: readonly string[]): (line: number) => string | undefined {
  return (line) => lines[line];
}

/** The document after `edits`, applied in order as VS Code applies a change event's. */
function applyEdits(lines: readonly string[], edits: readonly LineEdit[]): string[] {
  let text = lines.join('\n');
  for (const { start, end, text: inserted } of edits) {
    const current = text.split('\n');
    const offset = (p: { line: number; character: number }) =>
      current.slice(0, p.line).reduce((sum, l) => sum + l.length + 1, 0) + p.character;
    text = text.slice(0, offset(start)) + inserted + text.slice(offset(end));
  }
  return text.split('\n');
}

function edit(startLine: number, startCharacter: number, endLine: number, endCharacter: number, text: string): LineEdit {
  return { start: { line: startLine, character: startCharacter }, end: { line: endLine, character: endCharacter }, text };
}

const where = (lines: readonly HeatLine[]) => lines.map((h) => [h.line, h.level]);

describe('profileAnswer', () => {
  it('reads the report of a kdsl.profile answer, every figure of each line', () => {
    const found = profileAnswer('kdsl.profile', [URI, 'run_strided'], answer('run_strided'));
    assert.ok(found && 'profile' in found);
    assert.equal(found.uri, URI);
    const { lines, ...rest } = found.profile;
    assert.deepEqual(rest, { function: 'run_strided', file: FILE, device: 'NVIDIA H200', kernels: ['strided'] });
    assert.deepEqual(lines.map((l) => l.line), [12, 16, 17, 21, 18, 19]);
    assert.deepEqual(lines[0], {
      kernel: 'strided',
      launch: 0,
      file: FILE,
      line: 12,
      stallShare: 0.9119720134749936,
      topStalls: [
        ['long scoreboard (global/local memory)', 0.9788],
        ['fixed-latency wait', 0.0104],
        ['short scoreboard (shared memory, MUFU)', 0.0051],
      ],
      sectorsPerRequest: 32,
      idealSectorsPerRequest: 4,
      bankConflicts: null,
      source: 'return t[(i * 33) % n]  # strided: every lane of a warp in another 128-byte segment',
    });
  });

  it('has nothing for other commands, failures, cancelled runs and answers without a profile', () => {
    const ok = answer('run_strided');
    assert.equal(profileAnswer('kdsl.run', [URI, 'run_strided'], ok), undefined);
    assert.equal(profileAnswer('kdsl.profile', [], ok), undefined);
    const failed = { ok: false, error: 'no_profiler', message: 'run_strided: profiling failed: no NVIDIA GPU' };
    assert.equal(profileAnswer('kdsl.profile', [URI, 'run_strided'], failed), undefined);
    assert.equal(profileAnswer('kdsl.profile', [URI, 'run_strided'], { ok: false, message: 'run_strided: cancelled' }), undefined);
    assert.equal(profileAnswer('kdsl.profile', [URI, 'run_strided'], { ok: true, message: 'done' }), undefined);
    assert.equal(profileAnswer('kdsl.profile', [URI, 'run_strided'], null), undefined);
  });

  it('says why a profile of another schema or shape cannot be read', () => {
    const profile = answer('run_strided').profile as Record<string, unknown>;
    const read = (p: unknown) => profileAnswer('kdsl.profile', [URI, 'f'], { ok: true, profile: p });
    assert.deepEqual(read({ ...profile, schema: 2 }), {
      uri: URI,
      error: 'the profile has schema 2; this extension reads schema 1',
    });
    assert.deepEqual(read([profile]), { uri: URI, error: 'the profile is not a JSON object' });
    assert.deepEqual(read({ ...profile, kernels: {} }), { uri: URI, error: 'the profile names no file or lists no kernels' });
    assert.deepEqual(read({ ...profile, file: null }), { uri: URI, error: 'the profile names no file or lists no kernels' });
  });

  it('leaves out a malformed line and keeps the rest', () => {
    const good = { file: FILE, line: 3, stall_share: 0.5, top_stalls: [['drain', 1]], source: '  x = 1  ' };
    const bad = [
      { ...good, line: 0 },
      { ...good, line: '3' },
      { ...good, line: 2.5 },
      { ...good, stall_share: -0.1 },
      { ...good, stall_share: 'a lot' },
      { ...good, file: 7 },
      null,
      'line 3',
    ];
    const odd = { ...good, stall_share: 7, top_stalls: [['drain', 0.5], ['x'], [1, 2], 'y'], bank_conflicts: 'many' };
    const read = readProfile({
      schema: 1,
      file: FILE,
      kernels: [{ name: 'k', lines: [...bad, good, odd] }, 'not a kernel', { lines: 'none' }],
    });
    assert.ok('profile' in read);
    assert.deepEqual(read.profile.kernels, ['k', '?']);
    const expected: LineFigures = {
      kernel: 'k',
      launch: 0,
      file: FILE,
      line: 3,
      stallShare: 0.5,
      topStalls: [['drain', 1]],
      sectorsPerRequest: null,
      idealSectorsPerRequest: null,
      bankConflicts: null,
      source: 'x = 1',
    };
    assert.deepEqual(read.profile.lines, [expected, { ...expected, stallShare: 1, topStalls: [['drain', 0.5]] }]);
    assert.deepEqual(read.profile.function, '');
  });
});

describe('heatLevel', () => {
  it('puts each share in one of five levels, and no stalls in none', () => {
    assert.equal(HEAT_LEVELS, 5);
    const shares = [0, -1, Number.NaN, 0.0001, 0.0199, 0.02, 0.0499, 0.05, 0.1499, 0.15, 0.2999, 0.3, 0.912, 1];
    assert.deepEqual(shares.map(heatLevel), [0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 5]);
  });
});

describe('makeHeatMap', () => {
  it('marks every sampled line of the profiled file, the strided load hottest', () => {
    const map = makeHeatMap(profileOf('run_strided'), [FILE], textOf(PLANTED));
    assert.deepEqual(
      { ...map, lines: where(map.lines) },
      {
        function: 'run_strided',
        device: 'NVIDIA H200',
        kernels: ['strided'],
        lines: [[11, 5], [15, 3], [16, 1], [17, 1], [18, 1], [20, 1]],
      },
    );
    assert.ok(map.lines.every((h) => !h.stale && h.figures.length === 1 && h.source === PLANTED[h.line].trim()));
  });

  it("matches the document's own spelling of the path, and no other file", () => {
    const profile = profileOf('run_strided');
    assert.deepEqual(makeHeatMap(profile, ['/elsewhere/planted.py'], textOf(PLANTED)).lines, []);
    const moved = { ...profile, lines: profile.lines.map((l) => ({ ...l, file: '/mnt/home/user/kernels/planted.py' })) };
    assert.equal(makeHeatMap(moved, [FILE, '/mnt/home/user/kernels/planted.py'], textOf(PLANTED)).lines.length, 6);
  });

  it('leaves out lines edited while the profile ran, and lines past the end', () => {
    const edited = [...PLANTED];
    edited[11] = '    return t[i]';
    const map = makeHeatMap(profileOf('run_strided'), [FILE], textOf(edited.slice(0, 19)));
    assert.deepEqual(where(map.lines), [[15, 3], [16, 1], [17, 1], [18, 1]]);
  });

  it('colours a line two kernels share by the larger share, each kernel named in the hover', () => {
    const profile = profileOf('run_strided');
    const tail = profile.lines.map((l) => ({ ...l, kernel: 'strided_tail', launch: 1, stallShare: l.stallShare / 10 }));
    const map = makeHeatMap(
      { ...profile, kernels: ['strided', 'strided_tail'], lines: [...tail, ...profile.lines] },
      [FILE],
      textOf(PLANTED),
    );
    assert.deepEqual(where(map.lines), [[11, 5], [15, 3], [16, 1], [17, 1], [18, 1], [20, 1]]);
    assert.deepEqual(map.lines[1].figures.map((f) => f.kernel), ['strided', 'strided_tail']);
    const hover = heatHover(map, map.lines[1]);
    assert.match(hover, /\n\nstrided: \*\*7% stalls · drain\*\*  \n6\.9% of strided's warp samples; /);
    assert.match(hover, /\n\nstrided\\_tail: \*\*1% stalls · drain\*\*  \n0\.7% of strided\\_tail's warp samples; /);
  });

  it('names the launch of a kernel the call launched twice', () => {
    const profile = profileOf('run_strided');
    const second = profile.lines.map((l) => ({ ...l, launch: 1, stallShare: l.stallShare / 2 }));
    const map = makeHeatMap({ ...profile, kernels: ['strided', 'strided'], lines: [...profile.lines, ...second] }, [FILE], textOf(PLANTED));
    const hover = heatHover(map, map.lines[0]);
    assert.match(hover, /\n\nstrided \(launch 0\): \*\*91% stalls/);
    assert.match(hover, /\n\nstrided \(launch 1\): \*\*46% stalls/);
  });
});

describe('the texts of a hot line', () => {
  const strided = profileOf('run_strided');
  const hot = strided.lines[0];
  const banks = profileOf('run_bank_conflict');

  it('says its share, its top stall and how its memory accesses go', () => {
    assert.equal(stallNote(hot), '91% stalls · long scoreboard');
    assert.deepEqual(memoryNotes(hot), ['uncoalesced: 32 sectors/request (ideal 4)']);
    const coalesced = strided.lines.find((l) => l.line === 21);
    assert.ok(coalesced);
    assert.equal(stallNote(coalesced), '<1% stalls · short scoreboard');
    assert.deepEqual(memoryNotes(coalesced), []);
    assert.deepEqual(memoryNotes({ ...hot, sectorsPerRequest: 5, idealSectorsPerRequest: 4 }), []);
    assert.deepEqual(memoryNotes({ ...hot, sectorsPerRequest: 5.01, idealSectorsPerRequest: 4 }), [
      'uncoalesced: 5.01 sectors/request (ideal 4)',
    ]);
    assert.equal(stallNote({ ...hot, topStalls: [] }), '91% stalls');
  });

  it('counts the bank conflicts of the column-wise shared-memory read, and none of the row-wise one', () => {
    const column = banks.lines.find((l) => l.line === 41);
    const row = banks.lines.find((l) => l.line === 37);
    assert.ok(column && row);
    assert.equal(stallNote(column), '18% stalls · short scoreboard');
    assert.deepEqual(memoryNotes(column), ['3,670,016 bank conflicts']);
    assert.deepEqual(memoryNotes(row), []);
    assert.deepEqual(memoryNotes({ ...column, bankConflicts: 1 }), ['1 bank conflict']);
  });

  it('gives the hover: what was profiled, the figures, and whether they are stale', () => {
    const map = makeHeatMap(strided, [FILE], textOf(PLANTED));
    assert.equal(
      heatHover(map, map.lines[0]),
      'kdsl profile of run\\_strided on NVIDIA H200\n\n' +
        '**91% stalls · long scoreboard** · uncoalesced: 32 sectors/request (ideal 4)  \n' +
        "91.2% of strided's warp samples; top stalls: long scoreboard (global/local memory) 98%, " +
        'fixed-latency wait 1%, short scoreboard (shared memory, MUFU) 1%',
    );
    assert.match(
      heatHover(map, { ...map.lines[0], stale: true }),
      /1%\n\n\*Profiled before your latest edits: profile again for current figures\.\*$/,
    );
  });

  it('shows untrusted names as they are, not as Markdown', () => {
    assert.equal(escapeMarkdown('run_*x* [a](b) `c` <b> #1 | ~ & !'), 'run\\_\\*x\\* \\[a\\](b) \\`c\\` \\<b\\> \\#1 \\| \\~ \\& \\!');
  });
});

describe('heatAfterEdit', () => {
  const map = makeHeatMap(profileOf('run_strided'), [FILE], textOf(PLANTED));
  const after = (edits: LineEdit[]) => heatAfterEdit(map.lines, edits, textOf(applyEdits(PLANTED, edits)));

  it('drops the line typed on and marks the others stale, where they were', () => {
    const lines = after([edit(11, 24, 11, 24, ' + 0')]);
    assert.deepEqual(where(lines), [[15, 3], [16, 1], [17, 1], [18, 1], [20, 1]]);
    assert.ok(lines.every((h) => h.stale));
  });

  it('keeps a line that a new line was started after, and moves the lines below', () => {
    const end = PLANTED[11].length;
    assert.deepEqual(where(after([edit(11, end, 11, end, '\n    pass')])), [[11, 5], [16, 3], [17, 1], [18, 1], [19, 1], [21, 1]]);
  });

  it('moves every line down past a line inserted above, and up past lines deleted', () => {
    assert.deepEqual(where(after([edit(3, 0, 3, 0, 'import math\n')])), [[12, 5], [16, 3], [17, 1], [18, 1], [19, 1], [21, 1]]);
    assert.deepEqual(where(after([edit(12, 0, 14, 0, '')])), [[11, 5], [13, 3], [14, 1], [15, 1], [16, 1], [18, 1]]);
  });

  it('drops the lines a deletion removes, and the line it joins', () => {
    // Lines 16 to 18 (0-based) become one line: "    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x  # coalesced".
    const lines = after([edit(16, PLANTED[16].length, 18, 16, '')]);
    assert.deepEqual(where(lines), [[11, 5], [15, 3], [18, 1]]);
  });

  it('follows a line broken before its text to the next line', () => {
    assert.deepEqual(where(after([edit(11, 4, 11, 4, '# hot\n    ')])), [[12, 5], [16, 3], [17, 1], [18, 1], [19, 1], [21, 1]]);
  });

  it('follows several edits of one change, applied in order (the later ones first, as VS Code sends them)', () => {
    const edits = [edit(20, 8, 20, 11, 'result'), edit(11, 4, 11, 4, '# hot\n    '), edit(0, 0, 0, 0, '# header\n')];
    assert.deepEqual(where(after(edits)), [[13, 5], [17, 3], [18, 1], [19, 1], [20, 1]]);
  });

  it('changes nothing for a change without edits (the dirty state only)', () => {
    assert.deepEqual(heatAfterEdit(map.lines, [], textOf(PLANTED)), map.lines);
  });

  it('drops a touched line whose profiled text the server did not have, and keeps it otherwise', () => {
    const unknown = map.lines.map((h) => ({ ...h, source: '' }));
    const edits = [edit(11, 24, 11, 24, ' + 0')];
    assert.deepEqual(where(heatAfterEdit(unknown, edits, textOf(applyEdits(PLANTED, edits)))), [
      [15, 3], [16, 1], [17, 1], [18, 1], [20, 1],
    ]);
  });
});

describe('the heat colours', () => {
  it('rise in opacity level by level', () => {
    assert.equal(HEAT_COLOURS.length, HEAT_LEVELS);
    const opacities = HEAT_COLOURS.map((c) => c.opacity);
    assert.deepEqual([...opacities].sort((a, b) => a - b), opacities);
    assert.equal(new Set(opacities).size, HEAT_LEVELS);
  });

  it('give each level a gutter bar and an overview ruler colour', () => {
    const icon = gutterIcon(5);
    assert.ok(icon.startsWith('data:image/svg+xml;base64,'));
    const svg = Buffer.from(icon.slice('data:image/svg+xml;base64,'.length), 'base64').toString('utf8');
    assert.match(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg" [^>]*><rect [^>]*fill="#d62d20" fill-opacity="1"\/><\/svg>$/);
    assert.equal(rulerColour(1), 'rgba(242, 169, 59, 0.3)');
    assert.equal(rulerColour(5), 'rgba(214, 45, 32, 1)');
  });
});
