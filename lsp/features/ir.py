"""Custom requests for IR views: `kdsl/ir` (one stage of one function), `kdsl/stages` and
`kdsl/capabilities`.

`kdsl/ir {uri, function, stage}` -> `{text, language, sourceMap: [{irLine, range}],
diagnostics: [{message, code, range}]}`. The source map lets a client highlight the Python
range of the IR line under its cursor and the reverse. When the function failed to compile
the answer still says why (its diagnostics and a short text), never an empty page.

`kdsl/stages {uri}` -> `{functions: [{name, kind, range, stages}]}` lists what can be shown:
each function's text stages, in the stage table's order (`dsl.compiler.stages`).

`kdsl/capabilities` (no params) -> every stage, target and setting default a client offers
(`lsp.capabilities`), so that a client keeps no copy of them.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from dsl.compiler.artifacts import FunctionReport, ModuleReport
from dsl.compiler.stages import TEXT_STAGES, language_of, ordered
from dsl.compiler.toolchain import ToolError
from lsp.capabilities import CAPABILITIES_REQUEST, capabilities_response
from lsp.convert import source_lines, to_json, to_lsp_range
from lsp.features import profile
from lsp.features.diagnostics import current_report
from lsp.features.symbols import dsl_functions

if TYPE_CHECKING:
    from lsp.server import KdslLanguageServer

IR_REQUEST = "kdsl/ir"
STAGES_REQUEST = "kdsl/stages"


def _diagnostics_json(fn: FunctionReport, lines) -> list[dict[str, Any]]:
    return [
        {"message": d.message, "code": d.code, "range": to_json(to_lsp_range(d.range, lines))}
        for d in fn.diagnostics
    ]


def ir_response(report: ModuleReport | None, text: str, function: str, stage: str) -> dict[str, Any]:
    lines = source_lines(text)
    language = language_of(stage)
    fn = report.function(function) if report is not None else None
    if fn is None:
        why = "no compiler results yet (or the workspace is untrusted)" if report is None else "not found"
        return {"text": f"// {function}: {why}\n", "language": language, "sourceMap": [], "diagnostics": []}
    diagnostics = _diagnostics_json(fn, lines)
    if fn.compiled is None:
        body = "\n".join(f"//   {d.code} line {d.range.line}: {d.message}" for d in fn.diagnostics)
        return {
            "text": f"// {fn.name}: compile failed\n{body}\n",
            "language": language,
            "sourceMap": [],
            "diagnostics": diagnostics,
        }
    if stage not in TEXT_STAGES:  # a binary stage (the cubin) has no text to show
        stage_text = None
    else:
        stage_text = _stage_text(fn.compiled, stage)
    if stage_text is None:
        known = ", ".join(fn.compiled.available_stages)
        return {
            "text": f"// {fn.name}: no {stage!r} stage (available: {known})\n",
            "language": language,
            "sourceMap": [],
            "diagnostics": diagnostics,
        }
    smap = fn.compiled.source_maps.get(stage)
    # lines made by helpers in other files (traced inline) have no range in this document
    entries = [(ir, rng) for ir, rng in smap.entries if rng.file == report.path] if smap is not None else []
    return {
        "text": stage_text,
        "language": language,
        "sourceMap": [{"irLine": ir, "range": to_json(to_lsp_range(rng, lines))} for ir, rng in entries],
        "diagnostics": diagnostics,
    }


def _stage_text(compiled: Any, stage: str) -> str | None:
    """A stage's text; the ones made on request are made here: SASS (nvdisasm), and a jit
    function's C entry point, from its launcher (what `kdsl export` writes)."""
    try:  # both need the cubin: assembled first, where the analysis left it to be made on request
        if stage == "sass":
            return compiled.sass
        if stage == "c" and "launcher" in compiled.stages:
            from dsl.export.emit_c import c_stage

            return c_stage(compiled)
    except ToolError as err:
        return f"// {compiled.name}: no {stage!r} stage: ptxas failed: {err}\n"
    return compiled.stages.get(stage)


def stages_response(report: ModuleReport | None, text: str, path: str) -> dict[str, Any]:
    """Every kernel and jit function; compiled ones list their stages, others an empty list."""
    lines = source_lines(text)
    out = []
    for fn in dsl_functions(text, path):
        compiled = report.function(fn.name) if report is not None else None
        made = compiled.compiled.available_stages if compiled is not None and compiled.compiled else []
        stages = ordered([name for name in made if name in TEXT_STAGES])
        out.append(
            {
                "name": fn.name,
                "kind": fn.kind,
                "range": to_json(to_lsp_range(fn.name_range, lines)),
                "stages": stages,
            }
        )
    return {"functions": out}


def _get(params: Any, name: str) -> Any:
    return params.get(name) if isinstance(params, dict) else getattr(params, name, None)


def register(server: KdslLanguageServer) -> None:
    @server.feature(IR_REQUEST)
    async def ir(ls: KdslLanguageServer, params: Any) -> dict[str, Any]:
        uri, function, stage = (
            _get(params, "uri"),
            _get(params, "function"),
            _get(params, "stage") or "lowered",
        )
        state = ls.documents.get(uri)
        if state is None:
            return {
                "text": f"// {uri} is not open\n",
                "language": "plaintext",
                "sourceMap": [],
                "diagnostics": [],
            }
        report = await current_report(ls, uri)
        state = ls.documents.get(uri) or state
        text = state.report_text or state.text
        if stage in ("sass", "c"):  # ptxas and nvdisasm take up to a second: keep the event loop free
            response = await asyncio.get_running_loop().run_in_executor(
                None, ir_response, report, text, function, stage)
            if stage == "sass":  # after Profile on GPU: each instruction's samples
                response["text"] = profile.annotate_sass(uri, response["text"])
            return response
        return ir_response(report, text, function, stage)

    @server.feature(STAGES_REQUEST)
    async def stages(ls: KdslLanguageServer, params: Any) -> dict[str, Any]:
        uri = _get(params, "uri")
        state = ls.documents.get(uri)
        if state is None:
            return {"functions": []}
        report = await current_report(ls, uri)
        state = ls.documents.get(uri) or state
        return stages_response(report, state.text, state.path)

    @server.feature(CAPABILITIES_REQUEST)
    def capabilities(ls: KdslLanguageServer, params: Any) -> dict[str, Any]:
        return capabilities_response()
