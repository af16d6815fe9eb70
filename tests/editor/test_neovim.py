"""Neovim (`nvim --headless`, Debian's neovim 0.7) as a kdsl client: the protocol as another
editor speaks it, over stdio with `kdsl lsp`.

Fixture: data/saxpy_block_contract.py, copied into a fresh folder as `saxpy.py` (DSL202 at
`block=` on line 17, column 61). `neovim_walk.lua` drives Neovim's own LSP client and writes
what the server answered as JSON; these tests read that one run. Neovim sends a request with
no arguments without a `params` member, and answers `workspace/configuration` with null for
sections it has no settings for: what the server must take from any client.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.editor.conftest import DATA, HERE, required_file

RUN_TIMEOUT_S = 240


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory, artifacts: Path) -> dict[str, Any]:
    nvim = required_file("KDSL_NVIM", "nvim", "Neovim (Debian's neovim)")
    kdsl = Path(sys.executable).with_name("kdsl")
    assert kdsl.is_file(), f"no `kdsl` command beside {sys.executable}: pip install -e ."
    root = tmp_path_factory.mktemp("neovim")
    workspace = root / "workspace"
    workspace.mkdir()
    shutil.copy(DATA / "saxpy_block_contract.py", workspace / "saxpy.py")
    out = root / "answers.json"
    env = {
        **os.environ,
        "KDSL_NVIM_FILE": str(workspace / "saxpy.py"),
        "KDSL_NVIM_OUT": str(out),
        "KDSL_NVIM_SERVER": json.dumps([str(kdsl), "lsp"]),
        # Neovim's state, log and config stay in this run's folder.
        **{name: str(root / name.lower()) for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME",
                                                       "XDG_CACHE_HOME")},
    }
    run = subprocess.run([str(nvim), "--headless", "--clean", "-n", "-c", f"luafile {HERE / 'neovim_walk.lua'}"],
                         cwd=workspace, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert out.is_file(), f"Neovim wrote no answers (exit {run.returncode}):\n{run.stdout}\n{run.stderr}"
    shutil.copy(out, artifacts / "neovim-answers.json")
    result = json.loads(out.read_text())
    assert "script_error" not in result, result["script_error"]
    return result


def test_diagnostics_arrive_at_the_launch_line(answers: dict[str, Any]):
    assert answers["diagnostics_arrived"], answers["publications"]
    latest = answers["publications"][-1]["diagnostics"]
    contract = [d for d in latest if d["code"] == "DSL202"]
    assert len(contract) == 1, latest
    assert contract[0]["range"]["start"] == {"line": 16, "character": 60}
    assert contract[0]["severity"] == 1
    assert contract[0]["message"].startswith("launch block x=128 differs from known_block_size x=256")


def test_hover_on_the_kernel_returns_its_resources_and_mlir(answers: dict[str, Any]):
    hover = answers["hover"]
    assert hover.get("error") is None, hover
    text = hover["result"]["contents"]["value"]
    assert "saxpy" in text and "registers" in text and "lowered MLIR" in text, text


def test_kdsl_capabilities_answers_a_request_without_params(answers: dict[str, Any]):
    capabilities = answers["capabilities"]
    assert capabilities.get("error") is None, capabilities
    stages = [stage["name"] for stage in capabilities["result"]["stages"]]
    assert stages[:4] == ["traced", "lowered", "llvm", "ptx"], stages
    assert "sm_90" in capabilities["result"]["targets"]


def test_kdsl_stages_lists_the_files_functions(answers: dict[str, Any]):
    stages = answers["stages"]
    assert stages.get("error") is None, stages
    functions = {fn["name"]: fn["kind"] for fn in stages["result"]["functions"]}
    assert functions == {"saxpy": "kernel", "run_saxpy": "jit"}


def test_the_server_stops_when_neovim_asks(answers: dict[str, Any]):
    assert answers["initialized"] and answers["stopped"]
