"""Commands `kdsl.compile` and `kdsl.run`, with work-done progress.

Fixture: data/saxpy.py. Without a GPU `kdsl.run` must say so plainly; with one (marked
`gpu`) it runs the function and reports its time.
"""

from __future__ import annotations

import re

import pytest
from lsprotocol import types

from dsl.runtime import driver
from tests.lsp.conftest import initialize, open_file, report_of


async def execute(client, command: str, *arguments):
    result = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=command, arguments=list(arguments))
    )
    return result if isinstance(result, dict) else result._asdict()


def progress_kinds(client) -> list[list[str]]:
    return [[p.kind for p in reports] for reports in client.progress_reports.values()]


async def test_compile_reports_resources_with_progress(client):
    await initialize(client)
    uri = open_file(client, "saxpy.py")
    compiled = report_of("saxpy.py").function("saxpy").compiled
    result = await execute(client, "kdsl.compile", uri, "saxpy")
    summary = compiled.kernels[0].resources.summary()
    assert result == {"ok": True, "message": f"saxpy ({compiled.target}): {summary}"}
    assert progress_kinds(client) == [["begin", "end"]]
    assert client.messages[-1] == types.ShowMessageParams(
        type=types.MessageType.Info, message=f"saxpy ({compiled.target}): {summary}"
    )


@pytest.mark.skipif(driver.available(), reason="a GPU is attached: test_run_on_the_gpu covers kdsl.run")
async def test_run_without_a_gpu_says_so(client):
    await initialize(client)
    uri = open_file(client, "saxpy.py")
    result = await execute(client, "kdsl.run", uri, "run_saxpy")
    assert result["ok"] is False
    assert result["message"].startswith("run_saxpy: no NVIDIA GPU/driver found (")
    assert progress_kinds(client) == [["begin", "end"]]


@pytest.mark.gpu
@pytest.mark.skipif(not driver.available(), reason="no NVIDIA GPU here")
async def test_run_on_the_gpu(client):
    await initialize(client)
    uri = open_file(client, "saxpy.py")
    result = await execute(client, "kdsl.run", uri, "run_saxpy")
    assert result["ok"] is True, result
    assert result["median_ms"] > 0 and result["correct"] is None
    assert re.fullmatch(r"run_saxpy: median \d+\.\d{3} ms, \d+\.\d GB/s, no reference declared \(run_saxpy on .+\)",
                        result["message"]), result["message"]
    assert progress_kinds(client) == [["begin", "end"]]


@pytest.mark.parametrize("command", ["kdsl.compile", "kdsl.run", "kdsl.runOnCpu", "kdsl.profile", "kdsl.autotune"])
async def test_a_command_without_its_arguments_is_invalid_params_not_an_internal_error(client, command):
    """Found by random editor operations: `kdsl.compile` with no arguments was answered -32603
    with a traceback in the log."""
    from pygls.exceptions import JsonRpcInvalidParams

    await initialize(client)
    for arguments in ([], ["file:///w/saxpy.py"], [1, 2]):
        with pytest.raises(JsonRpcInvalidParams, match=rf"{command} takes the arguments \[uri, function name\]"):
            await client.workspace_execute_command_async(types.ExecuteCommandParams(command=command,
                                                                                   arguments=arguments))
