"""Inlay hints from the compiler's trace: what each name in a kernel or jit body holds.

- a run-time value: its DSL type, after the name where it is assigned (`i: i32`,
  `v: vector<4xf32>`, `buf: shared f32[32, 33]`), and `carried by the loop` for a value a
  run-time loop carries (`acc: f32, carried by the loop`);
- a compile-time value: what it is (`steps = 4`), also for a `Constexpr` parameter that
  has no default (its value comes from the launch or `examples=`), shown after the
  annotation so the line reads as Python (`WIDTH: Constexpr[int] = 128`); a name assigned a
  literal shows nothing (the literal says it, in whatever spelling: `-3e+38` is `-3.0e38`);
- with `inlayHints.lineCost` on: at the end of each kernel line, the SASS instructions it
  became (`lsp.features.line_cost`; a few kernels are disassembled per request, the others
  in the background, and then the client is asked to refresh).

The facts are the tracer's (`dsl.frontend.trace_facts`), carried by the latest report that
traced the document (`traced`: one of a version that did not parse keeps the one before);
hints are answered from it at once, never waiting for a compile once one report exists. A
fact whose name no longer stands at its place (the text moved since) is left out, and when
the report is not for the current version the client is asked to refresh once it is.
"""

from __future__ import annotations

import ast
import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lsprotocol import types

from dsl.compiler.artifacts import ModuleReport
from dsl.compiler.source_maps import LineCost
from dsl.frontend.trace_facts import COMPILE_TIME, RUN_TIME, SHARED, TENSOR, FactRecorder, ValueFact, replay
from lsp.convert import to_lsp_position
from lsp.features import profile
from lsp.features.diagnostics import current_report
from lsp.features.line_cost import DISASSEMBLED_PER_REQUEST, line_costs
from lsp.text_model import line_content, split_lines

if TYPE_CHECKING:
    from lsp.server import KdslLanguageServer
    from lsp.session import DocumentState

_DEFAULT = re.compile(r"^\s*(?::[^=,)]*)?=")  # what follows a parameter that has a default


def report_facts(report: ModuleReport, path: str) -> list[ValueFact]:
    """Every function's facts about `path`, one per range (a kernel traced for itself and
    for each jit function that launches it agrees with itself)."""
    recorder = FactRecorder()
    for fn in report.functions:
        replay([fact for fact in fn.values if fact.range.file == path], recorder)
    return recorder.facts()


@dataclass(frozen=True)
class Traced:
    """The latest report that traced the document, the text it was made from, its facts."""

    report: ModuleReport
    text: str | None
    facts: list[ValueFact]


_TRACED: dict[str, Traced] = {}  # uri -> what its latest useful report traced


def traced(uri: str, state: DocumentState) -> Traced | None:
    """What the document's latest report traced; a report of a version that did not run (a
    syntax error while typing: no functions) gives way to the latest that did
    (`DocumentState.ran`), whose facts still stand where the text did not move."""
    report, text = state.report, state.report_text
    if report is None:
        return None
    if not report.functions and state.ran is not None:
        report, text = state.ran, state.ran_text
    known = _TRACED.get(uri)
    if known is not None and known.report is report:
        return known
    if len(_TRACED) > 64:
        _TRACED.clear()
    known = _TRACED[uri] = Traced(report, text, report_facts(report, state.path))
    return known


def stands(fact: ValueFact, lines: Sequence[str]) -> bool:
    """Whether the fact's name is still where the report saw it, as a whole word."""
    r = fact.range
    if not 0 < r.line <= len(lines):
        return False
    text = line_content(lines[r.line - 1])
    end = r.column + len(fact.name)
    if text[r.column:end] != fact.name:
        return False
    return not (end < len(text) and (text[end].isalnum() or text[end] == "_")) and \
        not (r.column > 0 and (text[r.column - 1].isalnum() or text[r.column - 1] == "_"))


def _annotation_length(rest: str) -> int:
    """How many characters of `rest` (a parameter's text after its name) are its annotation:
    `: Constexpr[int], n: Int32)` -> 16. Brackets nest; a `,`, `)` or `=` outside them ends it."""
    if not rest.lstrip().startswith(":"):
        return 0
    depth, end = 0, 0
    for index, char in enumerate(rest):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            if depth == 0:
                break
            depth -= 1
        elif char in ",=" and depth == 0:
            break
        if not char.isspace():
            end = index + 1
    return end


def _same_literal(written: str, value: str) -> bool:
    """Whether the code's literal spells the compile-time value (`-3e+38` and `-3.0e38`)."""
    if written == value:
        return True
    try:
        return ast.literal_eval(written) == ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False


def _label(fact: ValueFact, rest: str) -> str | None:
    """The hint for a fact, or None when the code already says it. `rest` is the line's
    text after the name."""
    if fact.kind == COMPILE_TIME:
        if fact.parameter:
            return None if _DEFAULT.match(rest) or fact.value is None else f"= {fact.value}"
        written = rest.strip()
        if written.startswith("=") and not written.startswith("=="):
            written = written[1:].split("#", 1)[0].strip()
            if fact.value is not None and _same_literal(written, fact.value):
                return None
        return f"= {fact.value}" if fact.value is not None else f": {fact.type}"
    if fact.parameter:
        return None  # its annotation says it
    label = f": {fact.type}"
    if fact.carried and fact.kind == RUN_TIME:
        label += ", carried by the loop"
    return label


_WHAT = {COMPILE_TIME: "a compile-time value", RUN_TIME: "a run-time value", SHARED: "a shared-memory array",
         TENSOR: "a global-memory tensor"}


def _tooltip(fact: ValueFact) -> str:
    what = _WHAT.get(fact.kind, "a value")
    parts = [f"`{fact.name}`: {what}, `{fact.type}`" + (f" = `{fact.value}`" if fact.value else "")]
    if fact.carried:
        parts.append("a run-time loop carries it from one iteration to the next")
    if fact.thread:
        parts.append("it derives from the thread index, so it differs between the threads of a warp")
    return "; ".join(parts) + "."


def type_hints(facts: Sequence[ValueFact], lines: Sequence[str], first: int, last: int) -> list[types.InlayHint]:
    """Hints for the facts on 1-based lines `first`..`last` whose names still stand."""
    out = []
    for fact in facts:
        r = fact.range
        if not first <= r.line <= last or not stands(fact, lines):
            continue
        end = r.column + len(fact.name)
        rest = line_content(lines[r.line - 1])[end:]
        label = _label(fact, rest)
        if label is None:
            continue
        if fact.parameter and label.startswith("="):
            end += _annotation_length(rest)  # `WIDTH: Constexpr[int] = 128`, not `WIDTH = 128: ...`
        out.append(types.InlayHint(
            position=to_lsp_position(r.line, end, lines), label=label,
            kind=types.InlayHintKind.Type if label.startswith(":") else None,
            padding_left=label.startswith("="), tooltip=_tooltip(fact)))
    return out


def cost_hints(costs: dict[int, LineCost], lines: Sequence[str], report_lines: Sequence[str] | None,
               first: int, last: int) -> list[types.InlayHint]:
    """A hint at the end of each line with SASS, on lines the report's text still agrees on."""
    out = []
    for line in range(first, last + 1):
        cost = costs.get(line)
        if cost is None or line > len(lines):
            continue
        text = line_content(lines[line - 1])
        if report_lines is not None and (line > len(report_lines) or line_content(report_lines[line - 1]) != text):
            continue
        header = _header_counts(text)
        label = cost.summary() + (f" ({header})" if header else "")
        tooltip = "SASS instructions whose line info is this line (global memory, shared memory, tensor-core)"
        if header:
            tooltip += f"; on a `{text.split()[0]}` line: {header}, not the lines of its body"
        out.append(types.InlayHint(position=to_lsp_position(line, len(text), lines), label=label,
                                   padding_left=True, tooltip=tooltip))
    return out


_HEADERS = {"if": "condition, branch, merged values", "elif": "condition, branch, merged values",
            "else": "branch, merged values", "while": "condition, loop control, carried values",
            "for": "loop control, carried values"}


def _header_counts(text: str) -> str:
    """What the SASS of a compound statement's own line is: `if` charges its condition, the
    branch and the values merged after it (the `scf.if` results), a loop its control."""
    words = text.strip().split(maxsplit=1)
    keyword = words[0].rstrip(":") if words else ""
    return _HEADERS.get(keyword, "") if text.rstrip().endswith(":") or keyword == "else" else ""


# -- the handler ------------------------------------------------------------------------------

_REFRESHING: set[tuple[str, str]] = set()


def refresh_when_current(ls: KdslLanguageServer, uri: str, what: str) -> None:
    """Asks the client to request `what` ("inlay" or "semantic") again once the document's
    report is for its current version (if the client can be asked)."""
    workspace = ls.client_capabilities.workspace
    capability = (workspace.inlay_hint if what == "inlay" else workspace.semantic_tokens) if workspace else None
    if capability is None or not capability.refresh_support or (uri, what) in _REFRESHING:
        return
    _REFRESHING.add((uri, what))

    async def wait() -> None:
        try:
            while True:
                state = ls.documents.get(uri)
                if state is None:
                    return
                if state.report_is_current:
                    break
                await state.fresh.wait()  # set when a report arrives, the text changes or it closes
            if what == "inlay":
                ls.workspace_inlay_hint_refresh(None)
            else:
                ls.workspace_semantic_tokens_refresh(None)
        finally:
            _REFRESHING.discard((uri, what))

    ls.spawn(wait())


def _traced_so_far(state: DocumentState) -> Traced | None:
    """Before any full report: what tracing found, if the run sent it (opening a file of many
    kernels: the tracer's facts are complete before ptxas runs; those of an earlier version
    still stand where the text did not move)."""
    if state.traced is None:
        return None
    return Traced(state.traced, state.traced_text, report_facts(state.traced, state.path))


async def traced_for_features(ls: KdslLanguageServer, state: DocumentState, what: str) -> Traced | None:
    """What the latest report traced, at once (waiting only for the first report, or for what
    tracing found before it), with a refresh asked for when it is older than the text."""
    uri = state.uri
    if state.report is None:
        if _traced_so_far(state) is None:
            full = asyncio.ensure_future(current_report(ls, uri))
            early = asyncio.ensure_future(state.traced_fresh.wait())
            try:
                await asyncio.wait({full, early}, return_when=asyncio.FIRST_COMPLETED)
            finally:  # also when this request is cancelled: no task left pending behind it
                early.cancel()
                full.cancel()
        current = ls.documents.get(uri)
        if current is None:
            return None
        if current.report is None:
            so_far = _traced_so_far(current)
            if so_far is not None:
                refresh_when_current(ls, uri, what)
            return so_far
        return traced(uri, current)
    if not state.report_is_current:
        refresh_when_current(ls, uri, what)
    return traced(uri, state)


def _kernels_in(lines: Sequence[str], first: int, last: int) -> set[str]:
    """Names of the kernels whose `def` lies in or above the range (the range's own and
    the one it starts in)."""
    from lsp.features import cursor

    names = set()
    where = cursor.enclosing_function(lines, first - 1, 1 << 20) if first >= 1 else None  # past the line's end
    if where is not None and where.name:
        names.add(where.name)
    for k in range(max(first - 1, 0), min(last, len(lines))):
        match = re.match(r"^\s*(?:async\s+)?def\s+(\w+)", line_content(lines[k]))
        if match:
            names.add(match.group(1))
    return names


_FINISHING: set[str] = set()  # documents whose left-out kernels are being disassembled


async def _finish_line_costs(ls: KdslLanguageServer, uri: str, report: ModuleReport, path: str,
                             kernels: set[str]) -> None:
    try:
        await asyncio.get_running_loop().run_in_executor(None, line_costs, report, path, kernels)
    finally:
        _FINISHING.discard(uri)
    workspace = ls.client_capabilities.workspace
    if workspace is not None and workspace.inlay_hint is not None and workspace.inlay_hint.refresh_support:
        ls.workspace_inlay_hint_refresh(None)


def register(server: KdslLanguageServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT, types.InlayHintOptions(resolve_provider=False))
    async def inlay_hint(ls: KdslLanguageServer, params: types.InlayHintParams) -> list[types.InlayHint] | None:
        uri = params.text_document.uri
        state = ls.documents.get(uri)
        if state is None or not ls.settings.trusted:
            return None
        found = await traced_for_features(ls, state, "inlay")
        state = ls.documents.get(uri)
        if found is None or state is None:
            return None
        lines = state.lines
        first, last = params.range.start.line + 1, params.range.end.line + 1
        hints = type_hints(found.facts, lines, first, last)
        hints += profile.profile_hints(uri, state.path, lines, state.version, first, last)  # after Profile on GPU
        if ls.settings.line_cost:
            kernels = _kernels_in(lines, first, last)
            loop = asyncio.get_running_loop()
            costs, left_out = await loop.run_in_executor(None, line_costs, found.report, state.path, kernels,
                                                         DISASSEMBLED_PER_REQUEST)
            if left_out and uri not in _FINISHING:  # the rest meanwhile; then the client is asked again
                _FINISHING.add(uri)
                ls.spawn(_finish_line_costs(ls, uri, found.report, state.path, kernels))
            state = ls.documents.get(uri)
            if state is None:
                return None
            report_lines = None if found.text == state.text else split_lines(found.text or "")
            hints += cost_hints(costs, state.lines, report_lines, first, last)
            hints.sort(key=lambda h: (h.position.line, h.position.character))
        return hints
