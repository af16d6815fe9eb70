"""`kdsl profile` where it cannot profile, and its usage: clear words and exit code 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dsl.runtime import driver

ROOT = Path(__file__).resolve().parents[2]
PLANTED = Path(__file__).parent / "planted.py"


def kdsl_profile(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lsp.cli", "profile", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, env=env)


@pytest.mark.skipif(driver.available(), reason="a GPU is attached")
def test_without_a_gpu_it_says_so_and_exits_2():
    done = kdsl_profile(f"{PLANTED}::run_strided")
    assert done.returncode == 2
    assert done.stderr.startswith("kdsl profile: ") and "GPU" in done.stderr
    assert "Traceback" not in done.stderr


def test_without_nsight_compute_it_says_what_to_install(tmp_path):
    import os

    env = {**os.environ, "KDSL_NCU": str(tmp_path / "no-ncu-here")}
    done = kdsl_profile(f"{PLANTED}::run_strided", env=env)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    missing = "no Nsight Compute found: Nsight Compute (`ncu`) is needed" if driver.available() else "GPU"
    assert missing in done.stderr  # without a GPU, that is what is missing first


@pytest.mark.parametrize(("args", "said"), [
    ([f"{PLANTED}"], "name the function: FILE::JIT_FUNCTION"),
    (["nowhere.py::f"], "no such file: nowhere.py"),
    ([f"{PLANTED}::run_strided", "--fail-above", "5"], "--fail-above needs --compare BASELINE.json"),
])
def test_usage_errors_exit_2(args, said):
    done = kdsl_profile(*args)
    assert done.returncode == 2
    assert said in done.stderr


def test_a_baseline_that_is_not_a_profile_is_refused(tmp_path):
    bad = tmp_path / "baseline.json"
    bad.write_text('{"schema": 7}')
    done = kdsl_profile(f"{PLANTED}::run_strided", "--compare", str(bad))
    assert done.returncode == 2
    assert "cannot read the baseline" in done.stderr and "schema 1" in done.stderr
