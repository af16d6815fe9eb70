"""Commands `kdsl.compile` and `kdsl.run`, with work-done progress.

Fixture: data/saxpy.py. This machine has no GPU, so `kdsl.run` must say so plainly.
"""

from __future__ import annotations

from lsprotocol import types

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


async def test_run_without_a_gpu_says_so(client):
    await initialize(client)
    uri = open_file(client, "saxpy.py")
    result = await execute(client, "kdsl.run", uri, "run_saxpy")
    assert result["ok"] is False
    assert result["message"].startswith("run_saxpy: no NVIDIA GPU/driver found: ")
    assert progress_kinds(client) == [["begin", "end"]]
