"""Commands `kdsl.compile` and `kdsl.run` (arguments `[uri, function name]`).

Both show work-done progress and stop when the client cancels, either the request or the
progress. `kdsl.compile` answers `{message}` with the resource summary from the compiler
tier (the report for the current version of the buffer). `kdsl.run` launches the function
on the GPU through `dsl.run_function`, in a one-shot child process under the same time and
memory limits as the analysis worker, and answers its median time, bandwidth and
correctness, or says plainly that no GPU or driver is present. The message is also shown
with `window/showMessage`, since most editors drop a command's result.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from lsprotocol import types

from lsp.features import gpu_run
from lsp.features.code_lens import COMPILE, RUN, summary
from lsp.features.diagnostics import current_report

if TYPE_CHECKING:
    from lsp.server import KdslLanguageServer

T = TypeVar("T")


async def with_progress(ls: KdslLanguageServer, title: str, work: Callable[[], Awaitable[T]]) -> T:
    """Runs `work` under a work-done progress; cancelling the progress cancels the work."""
    window = ls.client_capabilities.window
    token: str | None = None
    if window is not None and window.work_done_progress:
        token = f"kdsl-{uuid.uuid4()}"
        try:
            await ls.work_done_progress.create_async(token)
        except Exception:
            token = None
    task = asyncio.ensure_future(work())
    if token is not None:
        ls.work_done_progress.begin(token, types.WorkDoneProgressBegin(title=title, cancellable=True))
        cancel = ls.work_done_progress.tokens.get(token)
        if cancel is not None:
            cancel.add_done_callback(
                lambda f: f.cancelled() and task.get_loop().call_soon_threadsafe(task.cancel)
            )
    try:
        return await task
    finally:
        if not task.done():
            task.cancel()  # our own request was cancelled: stop the work too
        if token is not None:
            ls.work_done_progress.end(
                token, types.WorkDoneProgressEnd(message="cancelled" if task.cancelled() else "done")
            )
            ls.work_done_progress.tokens.pop(token, None)


def _show(ls: KdslLanguageServer, message: str, ok: bool) -> None:
    kind = types.MessageType.Info if ok else types.MessageType.Warning
    ls.window_show_message(types.ShowMessageParams(type=kind, message=message))


def _args(arguments: tuple[Any, ...]) -> tuple[str, str]:
    if len(arguments) < 2 or not all(isinstance(a, str) for a in arguments[:2]):
        raise ValueError("expected arguments [uri, function name]")
    return arguments[0], arguments[1]


async def compile_function(ls: KdslLanguageServer, uri: str, name: str) -> dict[str, Any]:
    if uri not in ls.documents:
        return {"ok": False, "message": f"{uri} is not open"}
    if not ls.settings.trusted:
        return {"ok": False, "message": "compiling runs your code, which is off in an untrusted workspace"}
    report = await current_report(ls, uri)
    fn = report.function(name) if report is not None else None
    if fn is None:
        problems = [d for d in (report.diagnostics if report else []) if d.is_error]
        why = f": {problems[0].code} {problems[0].message}" if problems else ""
        return {"ok": False, "message": f"{name}: not compiled{why}"}
    if fn.compiled is None:
        errors = [d for d in fn.diagnostics if d.is_error] or fn.diagnostics
        detail = f" — {errors[0].message}" if errors else ""
        return {"ok": False, "message": f"{name}: {summary(fn, True)}{detail}"}
    return {"ok": True, "message": f"{name} ({fn.compiled.target}): {summary(fn, True)}"}


async def run_function(ls: KdslLanguageServer, uri: str, name: str) -> dict[str, Any]:
    state = ls.documents.get(uri)
    if state is None:
        return {"ok": False, "message": f"{uri} is not open"}
    if not ls.settings.trusted:
        return {
            "ok": False,
            "message": "running kernels runs your code, which is off in an untrusted workspace",
        }
    result = await gpu_run.run_in_child(
        state.text,
        state.path,
        name,
        target=ls.settings.target,
        timeout_s=ls.settings.timeout_seconds,
        memory_mb=ls.settings.memory_limit_mb,
    )
    return {**result, "message": gpu_run.describe(name, result)}


def register(server: KdslLanguageServer) -> None:
    @server.command(COMPILE)
    # `ls` stays unannotated: pygls resolves command handlers' annotations at call time.
    async def compile_command(ls, *arguments: Any) -> dict[str, Any]:
        uri, name = _args(arguments)
        result = await with_progress(ls, f"Compiling {name}", lambda: compile_function(ls, uri, name))
        _show(ls, result["message"], result["ok"])
        return result

    @server.command(RUN)
    async def run_command(ls, *arguments: Any) -> dict[str, Any]:
        uri, name = _args(arguments)
        result = await with_progress(ls, f"Running {name} on the GPU", lambda: run_function(ls, uri, name))
        _show(ls, result["message"], result["ok"])
        return result
