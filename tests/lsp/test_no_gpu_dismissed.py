"""Where no GPU is attached, "Run on GPU" asks whether to run on the CPU instead; dismissing the
question ends the command quietly: no second message, and no loader's exception text anywhere.

Fixture: data/saxpy.py. VS Code answers a dismissed `window/showMessageRequest` with null.
"""

from __future__ import annotations

import sys

import pytest
import pytest_lsp
from lsprotocol import types
from pygls import uris
from pytest_lsp import ClientServerConfig, LanguageClient

from dsl.runtime import driver
from tests.lsp.conftest import CAPABILITIES, ROOT, TEST_OPTIONS, make_asking_client, open_file

pytestmark = pytest.mark.skipif(driver.available(), reason="a GPU is attached: Run on GPU runs there")


def make_dismissing_client() -> LanguageClient:
    return make_asking_client(lambda params: None)


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "lsp"],
                                              client_factory=make_dismissing_client))
async def dismissing_client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


async def test_dismissing_run_on_the_cpu_ends_the_run_quietly(dismissing_client):
    client = dismissing_client
    capabilities = types.ClientCapabilities(
        window=types.WindowClientCapabilities(
            work_done_progress=True,
            show_message=types.ShowMessageRequestClientCapabilities(
                message_action_item=types.ClientShowMessageActionItemOptions(additional_properties_support=False))),
        workspace=CAPABILITIES.workspace)
    await client.initialize_session(types.InitializeParams(
        capabilities=capabilities, root_uri=uris.from_fs_path(str(ROOT)), initialization_options=TEST_OPTIONS))
    uri = open_file(client, "saxpy.py")
    result = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="kdsl.run", arguments=[uri, "run_saxpy"]))
    (asked,) = client.asked
    assert asked.message == "run_saxpy: no NVIDIA GPU/driver found. Run it on the CPU with the interpreter?"
    assert (result["ok"], result["error"], result["dismissed"]) == (False, "no_gpu", True)
    assert "DynamicLibNotFoundError" not in result["message"] and "system search" not in result["message"]
    assert client.messages == []  # the question said it all: no window/showMessage after it
