"""Autotuning in the editor: the "Autotune on GPU" lens, the `kdsl.autotune` command run as a
GPU run of the analysis worker, and the code action writing the winner back as defaults.

The document is `MODULE`, opened under tests/lsp/data (never written there). Without a GPU the
command is shown running the module in a GPU run of the worker, and being cancelled with its
progress, with `tests/worker/fake_driver` first on the server's `PYTHONPATH` (it reports a
device and refuses allocations), and answering plainly with no driver at all; the test marked
gpu tunes for real.
"""

from __future__ import annotations

import ast
import asyncio
import os
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from dsl.runtime import driver
from lsp.features.symbols import dsl_functions
from lsp.features.tuning import default_edits
from tests.lsp.conftest import initialize, make_client, open_file, pos, tdi
from tests.lsp.test_gpu_run import in_a_gpu_run, pids_written
from tests.worker.process_helpers import await_gone, children_module, kill_all, pids_in

MODULE = '''\
import dsl
from dsl import Constexpr, Int32, Tensor, f32


@dsl.kernel
def scale(x: Tensor[f32], n: Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    if i < n:
        x[i] = x[i] * 2.0


@dsl.autotune(configs=[dsl.Config(BLOCK=128), dsl.Config(BLOCK=256)], key=["x"])
@dsl.jit
def run_scale(x: Tensor[f32], BLOCK: Constexpr[int] = 64):
    scale(x, x.shape[0]).launch(grid=dsl.cdiv(x.shape[0], BLOCK), block=BLOCK)


@dsl.jit
def run_plain(x: Tensor[f32]):
    scale(x, x.shape[0]).launch(grid=dsl.cdiv(x.shape[0], 128), block=128)
'''
NAME = "autotuned_module.py"
FAKE_DRIVER = Path(__file__).parents[1] / "worker" / "fake_driver"
_FAKE_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(FAKE_DRIVER), os.environ.get("PYTHONPATH"))
                                                          if p)}


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "lsp"], client_factory=make_client,
                                              server_env=_FAKE_ENV))
async def fake_gpu_client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


async def autotune(client, uri: str, name: str) -> dict:
    params = types.ExecuteCommandParams(command="kdsl.autotune", arguments=[uri, name])
    result = await client.workspace_execute_command_async(params)
    return result if isinstance(result, dict) else result._asdict()


async def test_the_lens_appears_on_the_autotuned_function_only(client):
    await initialize(client)
    uri = open_file(client, NAME, MODULE)
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(text_document=tdi(uri)))
    tuning = [(c.range, c.command.command, list(c.command.arguments)) for c in lenses
              if c.command.title == "Autotune on GPU"]
    assert tuning == [(types.Range(start=pos(13, 4), end=pos(13, 13)), "kdsl.autotune", [uri, "run_scale"])]
    assert len(lenses) == 3 * 5 + 1  # summary, Compile, Run, Profile and Show IR of each function, and the one above


async def test_the_command_runs_the_module_in_a_gpu_run_of_the_worker(fake_gpu_client):
    await initialize(fake_gpu_client)
    uri = open_file(fake_gpu_client, NAME, MODULE)
    result = await autotune(fake_gpu_client, uri, "run_scale")
    assert (result["ok"], result["message"]) == (False, (
        "run_scale: tuning failed: DriverError: cuMemAlloc(4194304) failed: CUDA_ERROR_NOT_SUPPORTED "
        "(refused by the stand-in driver)"))  # it got as far as making the arguments


async def test_cancelling_the_progress_kills_the_tuning_and_what_it_started(fake_gpu_client, tmp_path):
    pid_file = tmp_path / "pids"
    await initialize(fake_gpu_client, timeoutSeconds=60)
    source = in_a_gpu_run(children_module(pid_file, 1) + "while True:\n    pass\n") + MODULE
    uri = open_file(fake_gpu_client, NAME, source)
    command = asyncio.ensure_future(autotune(fake_gpu_client, uri, "run_scale"))
    try:
        pids = await pids_written(pid_file, 1)
        (token,) = fake_gpu_client.progress_reports
        fake_gpu_client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
        assert await await_gone(pids, within_s=3.0) == []
        assert await asyncio.wait_for(command, 10) == {"ok": False, "message": "run_scale: cancelled"}
        assert [p.kind for p in fake_gpu_client.progress_reports[token]] == ["begin", "end"]
    finally:
        command.cancel()
        kill_all(pids_in(pid_file))


@pytest.mark.skipif(driver.available(), reason="a GPU is present")
async def test_without_a_gpu_the_command_says_so(client):
    await initialize(client)
    uri = open_file(client, NAME, MODULE)
    result = await autotune(client, uri, "run_scale")
    assert result["ok"] is False
    assert result["message"].startswith("run_scale: no NVIDIA GPU/driver found ("), result["message"]


@pytest.mark.gpu
@pytest.mark.skipif(not driver.available(), reason="no NVIDIA GPU here")  # before the server starts
async def test_the_command_answers_the_table_and_the_action_writes_the_winner(client):
    await initialize(client)
    uri = open_file(client, NAME, MODULE)
    result = await autotune(client, uri, "run_scale")
    assert result["ok"] is True, result["message"]
    (tuning,) = result["tunings"]
    assert [row["config"] for row in tuning["rows"]] == ["BLOCK=128", "BLOCK=256"]
    assert all(row["ms"] > 0 and row["registers"] > 0 and row["error"] is None for row in tuning["rows"])
    table = result["table"].splitlines()
    assert table[0] == "key: x=f32[1048576]" and len(table) == 4  # key=["x"]: its shape, as Run on GPU makes it
    assert sum(line.startswith("*") for line in table) == 1
    winner = tuning["params"]["BLOCK"]
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=tdi(uri), range=types.Range(start=pos(14, 4), end=pos(14, 4)),
        context=types.CodeActionContext(diagnostics=[])))
    (use,) = [a for a in actions if a.title.startswith("Use the tuned config")]
    assert use.title == f"Use the tuned config as defaults (BLOCK={winner})"
    (edit,) = use.edit.changes[uri]
    assert (edit.range, edit.new_text) == (types.Range(start=pos(13, 54), end=pos(13, 56)), str(winner))


# --- the edit itself (no server) -----------------------------------------------------------------

def _edit(source: str, params: dict) -> str | None:
    """`source` with `default_edits` applied to its one jit function (None: no edit)."""
    (fn,) = [f for f in dsl_functions(source, "m.py") if f.kind == "jit"]
    fix = default_edits(fn, "m.py", source.splitlines(keepends=True), params)
    if fix is None:
        return None
    lines = source.splitlines(keepends=True)
    for e in sorted(fix.edits, key=lambda e: (e.range.line, e.range.column), reverse=True):
        line = lines[e.range.line - 1]
        lines[e.range.line - 1] = line[:e.range.column] + e.new_text + line[e.range.end_column:]
    return "".join(lines)


def test_the_edit_replaces_defaults_and_adds_one_where_python_allows():
    source = "@dsl.jit\ndef f(x: Tensor[f32], BLOCK: Constexpr[int] = 64, *, WARPS: Constexpr[int]):\n    pass\n"
    edited = _edit(source, {"BLOCK": 256, "WARPS": 8})
    assert edited == ("@dsl.jit\ndef f(x: Tensor[f32], BLOCK: Constexpr[int] = 256, *, "
                      "WARPS: Constexpr[int] = 8):\n    pass\n")
    ast.parse(edited)
    assert _edit(edited, {"BLOCK": 256, "WARPS": 8}) is None  # already the defaults


def test_the_edit_leaves_a_parameter_whose_default_python_would_refuse():
    source = "@dsl.jit\ndef f(BLOCK: Constexpr[int], x: Tensor[f32]):\n    pass\n"
    assert _edit(source, {"BLOCK": 256}) is None
