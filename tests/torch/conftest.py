"""PyTorch-operator tests: CPU ones run everywhere torch is installed (the interpreter is the
operators' CPU kernel); `test_gpu.py` needs a CUDA GPU that both kdsl and torch can see."""

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
for folder in (os.path.join(ROOT, "examples"), os.path.join(ROOT, "examples", "pytorch")):
    if folder not in sys.path:
        sys.path.insert(0, folder)  # softmax_autotuned, rmsnorm_torch: imported by name as a user would


@pytest.fixture(autouse=True)
def _private_cache_dir(tmp_path, monkeypatch):
    """Each test gets its own on-disk compile cache."""
    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path / "kdsl-cache"))
    monkeypatch.delenv("KDSL_NO_DISK_CACHE", raising=False)
    monkeypatch.delenv("KDSL_INTERPRET", raising=False)


@pytest.fixture(scope="session")
def torch():
    """torch with kdsl's operators switched on (`import dsl.torch`), seeded."""
    torch = pytest.importorskip("torch")
    import dsl.torch  # noqa: F401

    torch.manual_seed(0)
    return torch


@pytest.fixture
def cuda(torch):
    """torch, where kdsl's driver and torch both see a GPU."""
    from dsl.runtime import driver

    if not driver.available():
        pytest.skip("no NVIDIA GPU here")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    return torch
