"""Source maps for each stage's text: MLIR locations, LLVM `!dbg`, PTX `.loc`, SASS line comments.

MLIR is printed with its locations, which are read into the map and then stripped from
the text the user sees. For a `callsite` location (an inlined helper) the map points at
the helper's own line — the code that actually produced the op.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dsl.compiler.artifacts import SourceMap
from dsl.diagnostics import SourceRange

_LOC_DEF = re.compile(r"^(#loc\d*) = loc\((.*)\)\s*$")
_TRAILING_LOC = re.compile(r"\s*loc\(((?:[^()]|\([^()]*\))*)\)\s*$")
_INLINE_LOC = re.compile(r"\s*loc\((?:#loc\d*|\"[^\"]*\"[^()]*?|(?:callsite|fused)\([^()]*(?:\([^()]*\)[^()]*)*\))\)")
_FILE_LOC = re.compile(r'"([^"]+)":(\d+):(\d+)(?: to (\d*):(\d+))?')


def parse_location(text: str, aliases: dict[str, str] | None = None) -> SourceRange | None:
    """The first file range in a printed MLIR location (resolving `#loc` aliases)."""
    aliases = aliases or {}
    for _ in range(8):
        text = text.strip()
        if text in aliases:
            text = aliases[text]
            continue
        m = re.search(r"#loc\d*", text)
        if m and not _FILE_LOC.search(text.split("#loc")[0]) and m.group(0) in aliases:
            text = aliases[m.group(0)]
            continue
        break
    m = _FILE_LOC.search(text)
    if not m:
        return None
    path, line, col = m.group(1), int(m.group(2)), int(m.group(3))
    end_line = int(m.group(4)) if m.group(4) else line
    end_col = int(m.group(5)) if m.group(5) else col
    return SourceRange(path, line, col - 1, end_line, end_col - 1)


def mlir_text_and_map(printed: str) -> tuple[str, SourceMap]:
    """Strips locations from MLIR printed with debug info; returns (clean text, map)."""
    aliases: dict[str, str] = {}
    body: list[str] = []
    for line in printed.splitlines():
        m = _LOC_DEF.match(line)
        if m:
            aliases[m.group(1)] = m.group(2)
        else:
            body.append(line)
    # resolve callsite(callee at caller) to the callee
    def resolve(loc_text: str) -> SourceRange | None:
        loc_text = loc_text.strip()
        if loc_text.startswith("callsite("):
            inner = loc_text[len("callsite("):]
            callee = inner.split(" at ", 1)[0]
            return resolve(callee)
        if loc_text.startswith("fused"):
            return parse_location(loc_text, aliases)
        if loc_text in aliases:
            return resolve(aliases[loc_text])
        return parse_location(loc_text, aliases)

    out: list[str] = []
    entries: list[tuple[int, SourceRange]] = []
    for line in body:
        m = _TRAILING_LOC.search(line)
        rng = resolve(m.group(1)) if m else None
        clean = line[: m.start()] if m else line
        clean = _INLINE_LOC.sub("", clean)
        if rng is not None:
            entries.append((len(out), rng))
        out.append(clean.rstrip())
    return "\n".join(out) + "\n", SourceMap(entries)


_DBG_REF = re.compile(r"!dbg (!\d+)")
_DILOC = re.compile(r"^(!\d+) = !DILocation\(line: (\d+)(?:, column: (\d+))?, scope: (!\d+)")
_DIFILE = re.compile(r'^(!\d+) = !DIFile\(filename: "([^"]*)", directory: "([^"]*)"')
_SCOPE_FILE = re.compile(r"^(!\d+) = (?:distinct )?!DI(?:Subprogram|LexicalBlock\w*)\(.*?file: (!\d+)")


def llvm_map(text: str) -> SourceMap:
    """Maps LLVM IR instructions with `!dbg` to their DILocation lines."""
    files, scopes, locs = {}, {}, {}
    for line in text.splitlines():
        if m := _DIFILE.match(line):
            name, directory = m.group(2), m.group(3)
            files[m.group(1)] = name if name.startswith("/") or not directory else f"{directory}/{name}"
        elif m := _SCOPE_FILE.match(line):
            scopes[m.group(1)] = m.group(2)
        elif m := _DILOC.match(line):
            locs[m.group(1)] = (int(m.group(2)), int(m.group(3) or 1), m.group(4))
    entries = []
    for i, line in enumerate(text.splitlines()):
        if line.startswith("!"):
            continue
        m = _DBG_REF.search(line)
        if m and m.group(1) in locs:
            lno, col, scope = locs[m.group(1)]
            path = files.get(scopes.get(scope, ""), "")
            entries.append((i, SourceRange(path, lno, col - 1, lno, col - 1)))
    return SourceMap(entries)


_PTX_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]+)"')
_PTX_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)")


def ptx_map(text: str) -> SourceMap:
    """Each PTX instruction line maps to the source line of the `.loc` above it."""
    files = {}
    for line in text.splitlines():
        if m := _PTX_FILE.match(line):
            files[m.group(1)] = m.group(2)
    entries = []
    current: SourceRange | None = None
    for i, line in enumerate(text.splitlines()):
        if m := _PTX_LOC.match(line):
            path = files.get(m.group(1), "")
            lno, col = int(m.group(2)), int(m.group(3))
            current = SourceRange(path, lno, max(col - 1, 0), lno, max(col - 1, 0)) if lno else None
            continue
        stripped = line.strip()
        if current is not None and stripped and not stripped.startswith(("//", "$", "}", "{", ".")):
            entries.append((i, current))
        if stripped.startswith(("}", ".entry", ".visible", ".func")):
            current = None
    return SourceMap(entries)


_SASS_LINE = re.compile(r'//## File "([^"]+)", line (\d+)')


def sass_map(text: str) -> SourceMap:
    """nvdisasm `-g` writes `//## File "...", line N` above the instructions of each line."""
    entries = []
    current = None
    for i, line in enumerate(text.splitlines()):
        if m := _SASS_LINE.search(line):
            lno = int(m.group(2))
            current = SourceRange(m.group(1), lno, 0, lno, 0)
            continue
        if current is not None and re.match(r"\s*/\*[0-9a-f]{4}\*/", line):
            entries.append((i, current))
    return SourceMap(entries)


def sass_view(cubin: bytes | None) -> tuple[str, SourceMap] | None:
    """The SASS stage of a cubin and its source map, or None without a cubin or a disassembler.
    The pipeline's `sass` stage and a compiled function's SASS on request both come from here."""
    from dsl.compiler import toolchain

    if cubin is None:
        return None
    try:
        text = toolchain.disassemble(cubin)
    except toolchain.ToolError:
        return None
    return None if text is None else (text, sass_map(text))


# -- what each source line costs in SASS ---------------------------------------------------------

_SASS_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T\d]+\s+)?([A-Z][A-Z0-9_]*)(?:\.[\w.]*)?\s*(.*)$")
_SASS_LABEL = re.compile(r"^\s*(\.L_x_\d+):")
# By opcode: global memory (loads, stores, atomics and reductions, async copies from global, TMA),
# shared memory (loads, stores, atomics, ldmatrix / stmatrix) and the tensor cores (warp MMA,
# Hopper warpgroup MMA).
GLOBAL_OPCODES = frozenset({"LDG", "STG", "ATOMG", "ATOM", "RED", "REDG", "LDGSTS", "UTMALDG", "UTMASTG",
                            "UBLKCP", "UTMAREDG"})
SHARED_OPCODES = frozenset({"LDS", "STS", "ATOMS", "LDSM", "STSM"})
TENSOR_CORE_OPCODES = frozenset({"HMMA", "IMMA", "DMMA", "BMMA", "HGMMA", "IGMMA", "QGMMA", "BGMMA", "OMMA"})


@dataclass(frozen=True)
class LineCost:
    """The SASS one Python line became: instructions in all, and those that touch global
    memory, shared memory or the tensor cores."""

    file: str
    line: int
    instructions: int = 0
    global_memory: int = 0
    shared_memory: int = 0
    tensor_core: int = 0

    def summary(self) -> str:
        """`12 SASS: 3 global, 1 shared, 2 tensor-core` (the kinds that occur)."""
        kinds = [(self.global_memory, "global"), (self.shared_memory, "shared"), (self.tensor_core, "tensor-core")]
        parts = [f"{count} {name}" for count, name in kinds if count]
        return f"{self.instructions} SASS" + (": " + ", ".join(parts) if parts else "")


def sass_line_costs(text: str) -> list[LineCost]:
    """Per source line (in file order), what the SASS of `sass_view` spends on it. Padding
    after the last instruction (`NOP`s and the branch-to-self that ends a function) is no
    line's cost."""
    counts: dict[tuple[str, int], list[int]] = {}
    current: tuple[str, int] | None = None
    label = None
    for raw in text.splitlines():
        if m := _SASS_LINE.search(raw):
            current = (m.group(1), int(m.group(2)))
            continue
        if m := _SASS_LABEL.match(raw):
            label = m.group(1)
            continue
        m = _SASS_INSTRUCTION.match(raw)
        if m is None:
            if raw.startswith("//-----"):
                current = None  # the next function's section
            continue
        opcode, operands = m.group(1), m.group(2)
        self_branch = opcode == "BRA" and label is not None and f"({label})" in operands
        label = None
        if current is None or opcode == "NOP" or self_branch:
            continue
        entry = counts.setdefault(current, [0, 0, 0, 0])
        entry[0] += 1
        entry[1] += opcode in GLOBAL_OPCODES
        entry[2] += opcode in SHARED_OPCODES
        entry[3] += opcode in TENSOR_CORE_OPCODES
    return [LineCost(file, line, *entry) for (file, line), entry in sorted(counts.items())]


_SASS_FUNCTION = re.compile(r"^//-+ \.text\.(\S+)")


def sass_tensor_core_mix(text: str) -> dict[str, dict[str, int]]:
    """Per function of a SASS listing, how many of each tensor-core instruction it holds
    (`{"gemm_kernel": {"HGMMA": 4}}`), for the resource summaries the editor shows."""
    mix: dict[str, dict[str, int]] = {}
    current: dict[str, int] | None = None
    for raw in text.splitlines():
        if m := _SASS_FUNCTION.match(raw):
            current = mix.setdefault(m.group(1), {})
            continue
        m = _SASS_INSTRUCTION.match(raw)
        if m is not None and current is not None and m.group(1) in TENSOR_CORE_OPCODES:
            current[m.group(1)] = current.get(m.group(1), 0) + 1
    return mix
