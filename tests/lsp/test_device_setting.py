"""The `device` setting (`kdsl.device` in VS Code) chooses the GPU "Run on GPU" runs on.

Parsing: a GPU ordinal, 0 by default; anything else keeps the previous value with a
message. End to end (fixture: data/saxpy.py): the setting travels from the client through
the server and the worker to `dsl.run_function(..., device=N)` in the run's process. On a
machine without a GPU the server runs with `tests/worker/fake_driver` (one stand-in
device), so asking for cuda:1 is answered by `run_function`'s own check; the gpu-marked
test runs on a second real GPU.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from dsl.runtime import driver
from lsp.settings import Settings, parse_settings
from tests.lsp.conftest import initialize, make_client, open_file

FAKE_DRIVER = Path(__file__).parents[1] / "worker" / "fake_driver"
_ENV = dict(os.environ)
_ENV["PYTHONPATH"] = os.pathsep.join(p for p in (str(FAKE_DRIVER), _ENV.get("PYTHONPATH")) if p)


def test_the_device_is_a_gpu_ordinal_defaulting_to_0():
    assert Settings().device == 0
    assert parse_settings({"kdsl": {"device": 1}}) == (Settings(device=1), [])
    assert parse_settings({"device": 7.0}) == (Settings(device=7), [])


@pytest.mark.parametrize("value", [-1, 1.5, "1", True, None])
def test_a_bad_device_keeps_the_previous_one(value):
    settings, problems = parse_settings({"kdsl": {"device": value}}, Settings(device=2))
    assert settings.device == 2
    assert problems == [f"kdsl setting 'device': expected a GPU ordinal: 0, 1, ...; got {value!r}, keeping 2"]


async def run(client: LanguageClient, uri: str, name: str) -> dict:
    params = types.ExecuteCommandParams(command="kdsl.run", arguments=[uri, name])
    result = await client.workspace_execute_command_async(params)
    return result if isinstance(result, dict) else result._asdict()


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "lsp"], client_factory=make_client, server_env=_ENV)
)
async def fake_gpu_client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


@pytest.mark.skipif(driver.available(), reason="a GPU is attached: the gpu-marked test runs on a real second GPU")
async def test_run_on_gpu_runs_on_the_configured_device(fake_gpu_client: LanguageClient) -> None:
    await initialize(fake_gpu_client, device=1)
    uri = open_file(fake_gpu_client, "saxpy.py")
    result = await run(fake_gpu_client, uri, "run_saxpy")
    assert result["ok"] is False
    assert result["message"] == ("run_saxpy: run failed: there is no cuda:1: 1 GPU is visible (cuda:0; "
                                 "CUDA_VISIBLE_DEVICES chooses which)")


def _two_gpus() -> bool:
    return driver.available() and driver.device_count() >= 2


@pytest.mark.gpu
@pytest.mark.skipif(not _two_gpus(), reason="needs 2 visible GPUs")
async def test_on_two_gpus_run_on_gpu_runs_on_cuda_1(client: LanguageClient) -> None:
    await initialize(client, device=1)
    uri = open_file(client, "saxpy.py")
    result = await run(client, uri, "run_saxpy")
    assert result["ok"] is True, result
    assert " on cuda:1 (" in result["message"]
