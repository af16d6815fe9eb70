"""Code lenses above each kernel and jit function: its resources, Compile, Run on GPU, Profile on
GPU (`lsp.features.profile`), Debug on CPU, Show IR.

A kernel runs only through a jit function that launches it, so a kernel's run lens runs that
jit function ("Run on GPU: run_saxpy", the first in the file whose body calls the kernel) and a
kernel no jit function of the file launches has none.

Once a GPU run of this server has found no GPU, "Run on GPU" becomes "Run on CPU (interpreter)"
(`kdsl.runOnCpu`, `lsp.features.gpu_run`).

"Debug on CPU" (`kdsl.debugFunction`, arguments `[uri, jitName]`) starts a debug session of the
jit function in the CPU interpreter (`python -m lsp.dap`); like "Run on GPU" a kernel's lens runs
the jit that launches it. Only a client that runs that command gets the lens: it says so in its
client capabilities, `{"experimental": {"kdsl": {"debugLens": true}}}` (the VS Code extension
does). A capability rather than a setting: it is what the client can do, not a choice of the
user's, and it needs no `workspace/configuration` round.

Positions come from the AST so lenses appear before anything compiled; the first lens shows
the latest compiler report's resource summary (or why compiling failed). `kdsl.showIr` is
a client-side command of the VS Code extension; other editors ignore it.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import TYPE_CHECKING

from lsprotocol import types

from dsl.compiler.artifacts import FunctionReport, ModuleReport
from lsp.convert import source_lines, to_lsp_range
from lsp.features import gpu_run, profile, tuning
from lsp.features.diagnostics import current_report
from lsp.features.symbols import DslFunction, dsl_functions

if TYPE_CHECKING:
    from lsp.server import KdslLanguageServer

COMPILE = "kdsl.compile"
RUN = "kdsl.run"
RUN_ON_CPU = "kdsl.runOnCpu"
SHOW_IR = "kdsl.showIr"
DEBUG = "kdsl.debugFunction"  # a client-side command (the VS Code extension's), see `client_debugs`
DEBUG_TITLE = "Debug on CPU"


def summary(fn: FunctionReport | None, trusted: bool) -> str:
    """One line: resources of the function's kernels, or why there are none."""
    if not trusted:
        return "static checks only (untrusted workspace)"
    if fn is None:
        return "not compiled"
    if fn.compiled is None:
        codes = [d.code for d in fn.diagnostics if d.is_error] or [d.code for d in fn.diagnostics]
        return f"compile failed: {codes[0]}" if codes else "compile failed"
    kernels = [k for k in fn.compiled.kernels if k.resources is not None]
    if not kernels:
        return f"compiled for {fn.compiled.target}"
    if len(kernels) == 1:
        return kernels[0].resources.summary()  # type: ignore[union-attr]
    return "; ".join(f"{k.source_name}: {k.resources.summary()}" for k in kernels)  # type: ignore[union-attr]


def client_debugs(capabilities: types.ClientCapabilities | None) -> bool:
    """Whether the client runs `kdsl.debugFunction`: `experimental.kdsl.debugLens` is `true`."""
    experimental = getattr(capabilities, "experimental", None)
    kdsl = experimental.get("kdsl") if isinstance(experimental, dict) else None
    return isinstance(kdsl, dict) and kdsl.get("debugLens") is True


def launching_jits(functions: Sequence[DslFunction]) -> dict[str, str]:
    """Kernel name -> the first jit function of `functions` whose body calls that kernel."""
    kernels = {fn.name for fn in functions if fn.kind == "kernel"}
    found: dict[str, str] = {}
    for fn in functions:
        if fn.kind != "jit":
            continue
        for node in ast.walk(fn.node):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in kernels:
                found.setdefault(node.func.id, fn.name)
    return found


def code_lenses(
    text: str | Sequence[str],
    path: str,
    uri: str,
    report: ModuleReport | None,
    trusted: bool,
    functions: list[DslFunction] | None = None,
    debug: bool = False,
) -> list[types.CodeLens]:
    """Up to six lenses per function of `functions` (default: those of `text`, then a string);
    "Debug on CPU" only with `debug` (the client runs `kdsl.debugFunction`)."""
    lines = source_lines(text)
    lenses: list[types.CodeLens] = []
    functions = dsl_functions(str(text), path) if functions is None else functions
    run_title, run_command = (gpu_run.RUN_ON_CPU_TITLE, RUN_ON_CPU) if gpu_run.no_gpu_seen() else ("Run on GPU", RUN)
    launchers = launching_jits(functions)
    for fn in functions:
        rng = to_lsp_range(fn.name_range, lines)
        fn_report = report.function(fn.name) if report is not None else None
        runs = fn.name if fn.kind == "jit" else launchers.get(fn.name)
        rows: list[tuple[str, str, str]] = [(summary(fn_report, trusted), "", ""), ("Compile", COMPILE, fn.name)]
        if runs is not None:
            rows.append((run_title if runs == fn.name else f"{run_title}: {runs}", run_command, runs))
            if not gpu_run.no_gpu_seen():
                rows.append((profile.LENS_TITLE if runs == fn.name else f"{profile.LENS_TITLE}: {runs}",
                             profile.PROFILE, runs))
            if debug:
                rows.append((DEBUG_TITLE if runs == fn.name else f"{DEBUG_TITLE}: {runs}", DEBUG, runs))
        rows.append(("Show IR", SHOW_IR, fn.name))
        for title, command, target in rows:
            arguments = [uri, target] if command else None
            lenses.append(
                types.CodeLens(
                    range=rng, command=types.Command(title=title, command=command, arguments=arguments)
                )
            )
    return lenses + tuning.code_lenses(functions, lines, uri)  # "Autotune on GPU" (lsp.features.tuning)


def register(server: KdslLanguageServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_CODE_LENS)
    async def code_lens(ls: KdslLanguageServer, params: types.CodeLensParams) -> list[types.CodeLens]:
        uri = params.text_document.uri
        state = ls.documents.get(uri)
        if state is None:
            return []
        # The first time, wait for the compiler; later, show the latest report at once and
        # let `workspace/codeLens/refresh` bring the new one.
        report = state.report if state.report is not None else await current_report(ls, uri)
        state = ls.documents.get(uri) or state
        functions = await state.index.functions_async(state.buffer, state.version, state.path)
        debug = client_debugs(ls.client_capabilities)
        return code_lenses(state.lines, state.path, uri, report, ls.settings.trusted, functions, debug)
