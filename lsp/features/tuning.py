"""Autotuning in the editor: a lens on each `@dsl.autotune` function, the command that tunes it,
and a code action that writes the winner back as the function's Constexpr defaults.

`kdsl.autotune [uri, function]` tunes the function in the analysis worker, as an operation
beside "Run on GPU" (`AnalysisWorker.tune_on_gpu`: a contained process forked for it alone,
under the worker's time limit, killed with everything it started when it answers, times out,
or the client cancels the command or its progress). It measures every config again on
synthesized arguments (`dsl.runtime.tune`), records the choice where the program's first
call will look, and answers the table: per config its time, GB/s or TFLOP/s, registers,
spills, smem, occupancy, or why it failed. The one-line verdict goes to
`window/showMessage`, the table to `window/logMessage`.

The winner of the latest tuning of each function is kept here (one server per process) so
that the code action "Use the tuned config as defaults" can edit the `def` line: the
Constexpr defaults then compile, in the IR views and `dsl.compile`, what the tuned calls run.
Compile hints of the winner (`maxnreg=...`) belong to `@dsl.kernel` and are not written.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from dsl.diagnostics import Fix, SourceRange, TextEdit
from lsp.convert import Lines, ranges_overlap, to_lsp_range, to_lsp_text_edits
from lsp.features import gpu_run
from lsp.features.symbols import DslFunction, node_range

if TYPE_CHECKING:
    from lsp.server import KdslLanguageServer

AUTOTUNE = "kdsl.autotune"
LENS_TITLE = "Autotune on GPU"

# (uri, function) -> the latest tuning's winner: {"config": "BLOCK=256", "params": {...}, "hints": {...}}
WINNERS: dict[tuple[str, str], dict[str, Any]] = {}


def is_autotuned(fn: DslFunction) -> bool:
    """Whether a jit function carries `@dsl.autotune(...)` / `@autotune(...)` (from the AST)."""
    for decorator in fn.node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
        if name == "autotune":
            return fn.kind == "jit"
    return False


def code_lenses(functions: Sequence[DslFunction], lines: Lines, uri: str) -> list[types.CodeLens]:
    """An "Autotune on GPU" lens on each autotuned jit function of `functions`."""
    return [
        types.CodeLens(range=to_lsp_range(fn.name_range, lines),
                       command=types.Command(title=LENS_TITLE, command=AUTOTUNE, arguments=[uri, fn.name]))
        for fn in functions if is_autotuned(fn)
    ]


def describe(function: str, result: dict[str, Any]) -> str:
    """The one line a user reads after `kdsl.autotune`."""
    if result.get("error") == "no_gpu":
        return gpu_run.describe(function, result)
    if not result.get("ok"):
        return f"{function}: tuning failed: {result.get('message') or 'unknown error'}"
    return str(result.get("message") or f"{function}: tuned")


def table(result: dict[str, Any]) -> str:
    """Every tuning of the answer as text tables (`dsl.runtime.tune.format_table`)."""
    from dsl.runtime.tune import format_table

    tunings = result.get("tunings")
    if not isinstance(tunings, list):
        return ""
    try:
        return "\n\n".join(format_table(t) for t in tunings)
    except (KeyError, TypeError, ValueError, AttributeError):  # the run's process wrote the answer
        return ""


def default_edits(fn: DslFunction, path: str, lines: Lines, params: dict[str, Any]) -> Fix | None:
    """Edits of the `def` that make `params` (a winner's Constexpr values) the defaults: an
    existing default is replaced; a missing one is added where Python allows it (the last
    positional parameter without a default, or a keyword-only one). None when nothing changes."""
    args = fn.node.args
    positional = args.posonlyargs + args.args
    first_default = len(positional) - len(args.defaults)
    edits = []
    for name, value in params.items():
        text = repr(value)
        default: ast.expr | None = None
        arg: ast.arg | None = None
        insertable = False
        for i, a in enumerate(positional):
            if a.arg == name:
                arg, default = a, args.defaults[i - first_default] if i >= first_default else None
                insertable = i == first_default - 1
        for i, a in enumerate(args.kwonlyargs):
            if a.arg == name:
                arg, default, insertable = a, args.kw_defaults[i], True
        if arg is None:
            continue
        if default is not None:
            if ast.unparse(default) != text:
                edits.append(TextEdit(node_range(default, path, list(lines)), text))
        elif insertable:
            end = node_range(arg, path, list(lines))
            at = SourceRange(path, end.end_line, end.end_column, end.end_line, end.end_column)
            edits.append(TextEdit(at, f" = {text}"))
    if not edits:
        return None
    shown = ", ".join(f"{k}={v!r}" for k, v in params.items())
    return Fix(f"Use the tuned config as defaults ({shown})", tuple(edits))


def code_actions(uri: str, path: str, lines: Lines, rng: types.Range,
                 functions: Sequence[DslFunction]) -> list[types.CodeAction]:
    """"Use the tuned config as defaults" for a tuned function around `rng`."""
    actions = []
    for fn in functions:
        winner = WINNERS.get((uri, fn.name))
        if winner is None or not ranges_overlap(to_lsp_range(fn.range, lines), rng):
            continue
        fix = default_edits(fn, path, lines, dict(winner.get("params") or {}))
        if fix is not None:
            actions.append(types.CodeAction(title=fix.title, kind=types.CodeActionKind.Source,
                                            edit=types.WorkspaceEdit(changes={uri: to_lsp_text_edits(fix, lines)})))
    return actions


async def tune_function(ls: KdslLanguageServer, uri: str, name: str) -> dict[str, Any]:
    state = ls.documents.get(uri)
    if state is None:
        return {"ok": False, "message": f"{uri} is not open"}
    await ls.configuration.ready()  # the pulled settings may withdraw trust: wait for them
    if not ls.settings.trusted:
        return {"ok": False, "message": "tuning runs your code, which is off in an untrusted workspace"}
    text, path = state.text, state.path  # a snapshot: edits arriving meanwhile do not change the run
    result = await ls.worker().tune_on_gpu(text, path, name, ls.settings.target)
    tunings = result.get("tunings")
    if result.get("ok") and isinstance(tunings, list) and tunings and isinstance(tunings[0], dict):
        WINNERS[(uri, name)] = {k: tunings[0].get(k) for k in ("winner", "params", "hints")}
    return {**result, "message": describe(name, result), "table": table(result)}


def register(server: KdslLanguageServer) -> None:
    from lsp.features.commands import command_arguments, with_progress

    @server.command(AUTOTUNE)
    # `ls` stays unannotated: pygls resolves command handlers' annotations at call time.
    async def autotune_command(ls, *arguments: Any) -> dict[str, Any]:
        uri, name = command_arguments(AUTOTUNE, arguments)
        cancelled = {"ok": False, "message": f"{name}: cancelled"}
        result = await with_progress(ls, f"Autotuning {name} on the GPU", lambda: tune_function(ls, uri, name),
                                     cancelled)
        kind = types.MessageType.Info if result["ok"] else types.MessageType.Warning
        ls.window_show_message(types.ShowMessageParams(type=kind, message=result["message"]))
        if result.get("table"):
            ls.window_log_message(types.LogMessageParams(type=types.MessageType.Info,
                                                         message=f"{name}\n{result['table']}"))
        return result
