import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")
if EXAMPLES not in sys.path:
    sys.path.insert(0, EXAMPLES)  # examples import their shared helpers (reductions.py) by name


@pytest.fixture(autouse=True)
def _private_cache_dir(tmp_path, monkeypatch):
    """Each test gets its own on-disk compile cache."""
    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path / "kdsl-cache"))
    monkeypatch.delenv("KDSL_NO_DISK_CACHE", raising=False)


def _gpu_available() -> bool:
    from dsl.runtime import driver

    return driver.available()


@pytest.fixture
def gpu():
    if not _gpu_available():
        pytest.skip("no NVIDIA GPU here")


@pytest.fixture
def torch(gpu):
    """PyTorch with a GPU it can see (the tests compare against it), seeded."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    torch.manual_seed(0)
    return torch
