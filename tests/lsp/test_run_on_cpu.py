"""`kdsl.runOnCpu`, and what "Run on GPU" offers where no GPU is attached: "Run on CPU
(interpreter)", which runs the function in the interpreter on small synthesized inputs, in the
analysis worker's contained processes, and checks it against the jit's `reference=`.

Fixture: data/saxpy.py, with a `reference=` added where a test checks one.
"""

from __future__ import annotations

import re
import sys

import pytest
import pytest_lsp
from lsprotocol import types
from pygls import uris
from pytest_lsp import ClientServerConfig, LanguageClient

from dsl.runtime import driver
from tests.lsp.conftest import CAPABILITIES, ROOT, TEST_OPTIONS, initialize, make_asking_client, open_file, read, tdi

RIGHT = "@dsl.jit(reference=lambda x, y, a, BLOCK: {'y': a * x + y})\n"
VERDICT = re.compile(r"run_saxpy on the CPU \(interpreter\): ran in \d+ ms; y \(4096,\) float32: min -?[\d.]+, "
                     r"max [\d.]+, mean -?[\d.e-]+, no NaN or inf; matches the reference "
                     r"\(y: relative L2 error 0\.00e\+00\); inputs x \(4096,\)")


async def execute(client, command: str, *arguments):
    result = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=command, arguments=list(arguments)))
    return result if isinstance(result, dict) else result._asdict()


def with_reference() -> str:
    return read("saxpy.py").replace("@dsl.jit\n", RIGHT)


async def run_lenses(client, uri: str) -> list[tuple[str, str]]:
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(text_document=tdi(uri)))
    return [(c.command.title, c.command.command) for c in lenses if c.command.command.startswith("kdsl.run")]


async def test_run_on_cpu_checks_the_reference(client):
    await initialize(client)
    uri = open_file(client, "saxpy.py", with_reference())
    result = await execute(client, "kdsl.runOnCpu", uri, "run_saxpy")
    assert result.pop("elapsed_ms") > 0
    assert VERDICT.fullmatch(result.pop("message")), result
    assert result.pop("outputs")[0].startswith("y (4096,) float32: min ")
    assert result == {"ok": True, "correct": True, "device": "the CPU (interpreter)"}
    assert [[p.kind for p in reports] for reports in client.progress_reports.values()] == [["begin", "end"]]
    assert client.messages[-1].type == types.MessageType.Info and VERDICT.fullmatch(client.messages[-1].message)


async def test_run_on_cpu_reports_a_fault_at_its_line(client):
    await initialize(client)
    uri = open_file(client, "saxpy.py", read("saxpy.py").replace("a * x[i]", "a * x[i + 1]"))
    result = await execute(client, "kdsl.runOnCpu", uri, "run_saxpy")
    assert result["ok"] is False
    assert result["message"].startswith("run_saxpy: interpreter run failed: launching kernel 'saxpy' with ")
    assert "out-of-bounds load of 4 bytes at tensor 'x' at element offset 4096" in result["message"]
    assert [(d["code"], d["range"]["line"]) for d in result["diagnostics"]] == [("DSL601", 9)]


async def test_an_untrusted_workspace_interprets_nothing(client):
    await initialize(client, trusted=False)
    uri = open_file(client, "saxpy.py")
    assert await execute(client, "kdsl.runOnCpu", uri, "run_saxpy") == {
        "ok": False, "message": "running kernels runs your code, which is off in an untrusted workspace"}


# -- where no GPU is attached --------------------------------------------------------------------

def make_answering_client() -> LanguageClient:
    return make_asking_client(lambda params: params.actions[0])  # "Run on CPU (interpreter)"


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "lsp"],
                                              client_factory=make_answering_client))
async def answering_client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


@pytest.mark.skipif(driver.available(), reason="a GPU is attached: Run on GPU runs there")
async def test_run_on_gpu_without_a_gpu_offers_the_interpreter(answering_client):
    client = answering_client
    capabilities = types.ClientCapabilities(
        window=types.WindowClientCapabilities(
            work_done_progress=True,
            show_message=types.ShowMessageRequestClientCapabilities(
                message_action_item=types.ClientShowMessageActionItemOptions(additional_properties_support=False))),
        workspace=CAPABILITIES.workspace)
    await client.initialize_session(types.InitializeParams(
        capabilities=capabilities, root_uri=uris.from_fs_path(str(ROOT)), initialization_options=TEST_OPTIONS))
    uri = open_file(client, "saxpy.py", with_reference())
    assert await run_lenses(client, uri) == [("Run on GPU: run_saxpy", "kdsl.run"), ("Run on GPU", "kdsl.run")]
    result = await execute(client, "kdsl.run", uri, "run_saxpy")
    (asked,) = client.asked
    assert asked.message == "run_saxpy: no NVIDIA GPU/driver found. Run it on the CPU with the interpreter?"
    assert [a.title for a in asked.actions] == ["Run on CPU (interpreter)"]
    assert result["ok"] is True and result["correct"] is True and VERDICT.fullmatch(result["message"])
    assert await run_lenses(client, uri) == [("Run on CPU (interpreter): run_saxpy", "kdsl.runOnCpu"),
                                             ("Run on CPU (interpreter)", "kdsl.runOnCpu")]


@pytest.mark.skipif(driver.available(), reason="a GPU is attached: Run on GPU runs there")
async def test_a_client_that_cannot_answer_is_told_what_to_run(client):
    await initialize(client)
    uri = open_file(client, "saxpy.py")
    result = await execute(client, "kdsl.run", uri, "run_saxpy")
    assert result["ok"] is False
    assert result["message"].startswith("run_saxpy: no NVIDIA GPU/driver found")
    assert result["message"].endswith(' — "Run on CPU (interpreter)" runs it on the CPU')
    assert await run_lenses(client, uri) == [("Run on CPU (interpreter): run_saxpy", "kdsl.runOnCpu"),
                                             ("Run on CPU (interpreter)", "kdsl.runOnCpu")]
