"""`kdsl.run` runs in the analysis worker's contained processes: a hang costs the time limit,
cancelling the progress kills the run's process tree, an untrusted workspace runs nothing.

On machines without a GPU, the server runs with `tests/worker/fake_driver` first on its
`PYTHONPATH` (a stand-in for cuda-bindings that reports one device and refuses allocations
and launches), so that the module's own code runs in the GPU run; the tests marked `gpu`
do the same on a real GPU.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from dsl.runtime import driver
from tests.lsp.conftest import initialize, make_client, open_file, read
from tests.worker.process_helpers import await_gone, daemon_module, hang_with_child_module, kill_all, pids_in

FAKE_DRIVER = Path(__file__).parents[1] / "worker" / "fake_driver"
_ENV = dict(os.environ)
_ENV["PYTHONPATH"] = os.pathsep.join(p for p in (str(FAKE_DRIVER), _ENV.get("PYTHONPATH")) if p)
LIMIT_S = 3


def in_a_gpu_run(source: str) -> str:
    """`source` run only by a GPU run (it caps RLIMIT_DATA; the document's analysis does not)."""
    body = "".join(f"    {line}\n" for line in source.splitlines())
    return f"import resource\nif resource.getrlimit(resource.RLIMIT_DATA)[0] != resource.RLIM_INFINITY:\n{body}"


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "lsp"], client_factory=make_client, server_env=_ENV)
)
async def fake_gpu_client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


async def run(client, uri: str, name: str) -> dict:
    params = types.ExecuteCommandParams(command="kdsl.run", arguments=[uri, name])
    result = await client.workspace_execute_command_async(params)
    return result if isinstance(result, dict) else result._asdict()


async def pids_written(pid_file: Path, count: int, timeout: float = 60.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while len(pids_in(pid_file)) < count:
        assert time.monotonic() < deadline, "the module did not start its processes"
        await asyncio.sleep(0.05)
    return pids_in(pid_file)


async def check_a_hang_costs_the_time_limit(client, tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    await initialize(client, timeoutSeconds=LIMIT_S)
    uri = open_file(client, "saxpy.py", in_a_gpu_run(hang_with_child_module(pid_file)) + read("saxpy.py"))
    try:
        started = time.monotonic()
        result = await run(client, uri, "run_saxpy")
        elapsed = time.monotonic() - started
        assert result in ({  # stopped inside the busy loop, on either of its lines
            "ok": False, "error": "timeout",
            "message": f"run_saxpy: run failed: timed out after {LIMIT_S} s (at line {line})",
        } for line in (6, 7))  # fmt: skip
        assert elapsed < LIMIT_S + 8, elapsed  # the child holding the pipe is not waited for
        assert await await_gone(pids_in(pid_file)) == []
    finally:
        kill_all(pids_in(pid_file))


async def check_cancelling_the_progress_kills_the_tree(client, tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    await initialize(client, timeoutSeconds=60)
    source = in_a_gpu_run(daemon_module(pid_file) + "while True:\n    pass\n") + read("saxpy.py")
    uri = open_file(client, "saxpy.py", source)
    command = asyncio.ensure_future(run(client, uri, "run_saxpy"))
    try:
        pids = await pids_written(pid_file, 2)
        (token,) = client.progress_reports
        cancelled = time.monotonic()
        client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
        assert await await_gone(pids, within_s=3.0) == []
        assert await asyncio.wait_for(command, 10) == {"ok": False, "message": "run_saxpy: cancelled"}
        assert time.monotonic() - cancelled < 8.0
        assert [p.kind for p in client.progress_reports[token]] == ["begin", "end"]
        assert client.progress_reports[token][-1].message == "cancelled"
    finally:
        command.cancel()
        kill_all(pids_in(pid_file))


@pytest.mark.skipif(driver.available(), reason="a GPU is attached: the gpu-marked test runs it for real")
async def test_a_hang_with_a_child_holding_stderr_costs_the_time_limit(fake_gpu_client, tmp_path: Path) -> None:
    await check_a_hang_costs_the_time_limit(fake_gpu_client, tmp_path)


@pytest.mark.skipif(driver.available(), reason="a GPU is attached: the gpu-marked test runs it for real")
async def test_cancelling_the_progress_kills_the_run_and_what_it_started(fake_gpu_client, tmp_path: Path) -> None:
    await check_cancelling_the_progress_kills_the_tree(fake_gpu_client, tmp_path)


async def test_an_untrusted_workspace_runs_nothing(client, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    await initialize(client, trusted=False)
    uri = open_file(client, "saxpy.py", f"open({str(marker)!r}, 'w').write('ran')\n" + read("saxpy.py"))
    result = await run(client, uri, "run_saxpy")
    assert result == {
        "ok": False, "message": "running kernels runs your code, which is off in an untrusted workspace"
    }  # fmt: skip
    assert not marker.exists()


@pytest.mark.gpu
@pytest.mark.skipif(not driver.available(), reason="no NVIDIA GPU here")
async def test_on_the_gpu_a_hang_costs_the_time_limit(client, tmp_path: Path) -> None:
    await check_a_hang_costs_the_time_limit(client, tmp_path)


@pytest.mark.gpu
@pytest.mark.skipif(not driver.available(), reason="no NVIDIA GPU here")
async def test_on_the_gpu_cancelling_the_progress_kills_the_tree(client, tmp_path: Path) -> None:
    await check_cancelling_the_progress_kills_the_tree(client, tmp_path)


def test_no_gpu_is_said_once():
    """The driver's own sentence follows the one-line verdict without repeating it."""
    from dsl.runtime.driver import _NO_DRIVER
    from lsp.features.gpu_run import describe

    message = _NO_DRIVER.format(detail="libcuda.so was not found")
    said = describe("run_saxpy", {"ok": False, "error": "no_gpu", "message": message})
    assert said == ("run_saxpy: no NVIDIA GPU/driver found (libcuda.so was not found). kdsl compiles kernels "
                    "without a GPU (dsl.compile, the IR views, `kdsl lint`), but running them needs an NVIDIA GPU "
                    "and its driver.")
    assert describe("f", {"ok": False, "error": "no_gpu", "message": ""}) == "f: no NVIDIA GPU/driver found"
