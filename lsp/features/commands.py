"""Commands `kdsl.compile`, `kdsl.run` and `kdsl.runOnCpu` (arguments `[uri, function name]`).

Each shows work-done progress and stops when the client cancels, either the request or the
progress (a cancelled progress still answers: `{ok: false, message: "NAME: cancelled"}`).
`kdsl.compile` answers `{message}` with the resource summary from the compiler tier (the
report for the current version of the buffer). `kdsl.run` launches the function
on the GPU through `dsl.run_function` (on the `device` setting's GPU, `kdsl.device` in VS
Code, default 0), as an operation of the analysis worker (a contained
process of its own, under the worker's time limit; cancelling kills it and everything it
started), and answers its median time, bandwidth and correctness, or says plainly that no
GPU or driver is present. `kdsl.runOnCpu` runs the function in the interpreter instead
(`dsl.interpreter.run.run_function`: small synthesized inputs, the check against the jit's
`reference=`), in the same kind of contained process. Where `kdsl.run` finds no GPU it offers
that run (a `window/showMessageRequest` with the action "Run on CPU (interpreter)", for
clients that take one; choosing it answers the command with the interpreter's result), and
the lenses offer it from then on. Dismissing the question ends the command quietly: the
question said why already, so the answer carries `dismissed: true` and nothing more is shown.
Each runs the user's code, so each waits for the pulled settings and refuses an untrusted
workspace. The message is also shown with `window/showMessage`, since most editors drop a
command's result.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from lsprotocol import types

from lsp.features import gpu_run
from lsp.features.code_lens import COMPILE, RUN, RUN_ON_CPU, summary
from lsp.features.diagnostics import current_report

if TYPE_CHECKING:
    from lsp.server import KdslLanguageServer

T = TypeVar("T")


async def with_progress(ls: KdslLanguageServer, title: str, work: Callable[[], Awaitable[T]], cancelled: T) -> T:
    """Runs `work` under a work-done progress.

    Cancelling the progress cancels the work, and the request still answers: `cancelled`.
    Cancelling the request itself cancels the work too, and it then has no result."""
    window = ls.client_capabilities.window
    token: str | None = None
    if window is not None and window.work_done_progress:
        token = f"kdsl-{uuid.uuid4()}"
        try:
            await ls.work_done_progress.create_async(token)
        except Exception:
            token = None
    task = asyncio.ensure_future(work())
    by_client: list[bool] = []  # set when the client cancelled the progress

    def progress_cancelled(future: Any) -> None:
        if future.cancelled():
            by_client.append(True)
            task.get_loop().call_soon_threadsafe(task.cancel)

    if token is not None:
        ls.work_done_progress.begin(token, types.WorkDoneProgressBegin(title=title, cancellable=True))
        cancel = ls.work_done_progress.tokens.get(token)
        if cancel is not None:
            cancel.add_done_callback(progress_cancelled)
    outcome = "done"
    try:
        return await task
    except asyncio.CancelledError:
        outcome = "cancelled"
        if by_client and task.cancelled():
            return cancelled
        raise
    finally:
        if not task.done():
            task.cancel()  # our own request was cancelled: stop the work too
            outcome = "cancelled"
        if token is not None:
            ls.work_done_progress.end(token, types.WorkDoneProgressEnd(message=outcome))
            ls.work_done_progress.tokens.pop(token, None)


def _show(ls: KdslLanguageServer, message: str, ok: bool) -> None:
    kind = types.MessageType.Info if ok else types.MessageType.Warning
    ls.window_show_message(types.ShowMessageParams(type=kind, message=message))


def command_arguments(command: str, arguments: tuple[Any, ...]) -> tuple[str, str]:
    """(uri, function name) of a command's arguments; anything else is the client's mistake,
    answered as invalid params (-32602) naming the command, not an internal error."""
    if len(arguments) < 2 or not all(isinstance(a, str) for a in arguments[:2]):
        from pygls.exceptions import JsonRpcInvalidParams

        raise JsonRpcInvalidParams(f"{command} takes the arguments [uri, function name], not {list(arguments)!r}")
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


async def runnable(ls: KdslLanguageServer, uri: str) -> tuple[str, str] | dict[str, Any]:
    """(text, path) of the document to run, or the answer that says why it cannot run."""
    state = ls.documents.get(uri)
    if state is None:
        return {"ok": False, "message": f"{uri} is not open"}
    await ls.configuration.ready()  # the pulled settings may withdraw trust: wait for them
    if not ls.settings.trusted:
        return {
            "ok": False,
            "message": "running kernels runs your code, which is off in an untrusted workspace",
        }
    # A snapshot: the run is of this version of the buffer, whatever edits arrive meanwhile.
    return state.text, state.path


async def run_function(ls: KdslLanguageServer, uri: str, name: str) -> dict[str, Any]:
    document = await runnable(ls, uri)
    if isinstance(document, dict):
        return document
    text, path = document
    result = await ls.worker().run_on_gpu(text, path, name, ls.settings.target, device=ls.settings.device)
    if result.get("error") == "no_gpu":
        first = not gpu_run.no_gpu_seen()
        gpu_run.note_no_gpu()
        if first:
            _refresh_code_lenses(ls)  # "Run on GPU" lenses now offer the interpreter
        accepted = await _accepts_cpu_run(ls, name)
        if accepted:
            return await run_on_cpu(ls, uri, name)
        if accepted is False:  # the user read why and said no: tell them nothing more
            return {**result, "message": gpu_run.describe(name, result), "dismissed": True}
        message = gpu_run.describe(name, result) + f' — "{gpu_run.RUN_ON_CPU_TITLE}" runs it on the CPU'
        return {**result, "message": message}
    return {**result, "message": gpu_run.describe(name, result)}


async def _accepts_cpu_run(ls: KdslLanguageServer, name: str) -> bool | None:
    """Asks whether to run on the CPU instead, where the client can answer with an action;
    None when it could not be asked."""
    window = ls.client_capabilities.window
    if window is None or window.show_message is None:
        return None
    params = types.ShowMessageRequestParams(
        type=types.MessageType.Warning, message=f"{name}: {gpu_run.NO_GPU}. Run it on the CPU with the interpreter?",
        actions=[types.MessageActionItem(title=gpu_run.RUN_ON_CPU_TITLE)])
    try:
        choice = await ls.window_show_message_request_async(params)
    except Exception:  # the client could not ask: the answer says how to run it instead
        return None
    return choice is not None and choice.title == gpu_run.RUN_ON_CPU_TITLE


async def run_on_cpu(ls: KdslLanguageServer, uri: str, name: str) -> dict[str, Any]:
    document = await runnable(ls, uri)
    if isinstance(document, dict):
        return document
    text, path = document
    result = await ls.worker().interpret_on_cpu(text, path, name, ls.settings.target)
    return {**result, "message": gpu_run.describe_cpu(name, result)}


def _refresh_code_lenses(ls: KdslLanguageServer) -> None:
    workspace = ls.client_capabilities.workspace
    lens = workspace.code_lens if workspace is not None else None
    if lens is not None and lens.refresh_support:
        ls.workspace_code_lens_refresh(None)


async def run_command(ls: Any, command: str, arguments: Any, title: str, work: Any) -> dict[str, Any]:
    """One of the compile and run commands: `work(ls, uri, name)` under work-done progress
    titled `title` (with the function's name), its message shown to the user."""
    uri, name = command_arguments(command, arguments)
    cancelled = {"ok": False, "message": f"{name}: cancelled"}
    result = await with_progress(ls, title.format(name=name), lambda: work(ls, uri, name), cancelled)
    if not result.get("dismissed"):
        _show(ls, result["message"], result["ok"])
    return result


def register(server: KdslLanguageServer) -> None:
    @server.command(COMPILE)
    # `ls` stays unannotated: pygls resolves command handlers' annotations at call time.
    async def compile_command(ls, *arguments: Any) -> dict[str, Any]:
        return await run_command(ls, COMPILE, arguments, "Compiling {name}", compile_function)

    @server.command(RUN)
    async def run_on_gpu_command(ls, *arguments: Any) -> dict[str, Any]:
        return await run_command(ls, RUN, arguments, "Running {name} on the GPU", run_function)

    @server.command(RUN_ON_CPU)
    async def run_on_cpu_command(ls, *arguments: Any) -> dict[str, Any]:
        return await run_command(ls, RUN_ON_CPU, arguments, "Running {name} on the CPU (interpreter)", run_on_cpu)
