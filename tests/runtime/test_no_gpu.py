"""Without an NVIDIA driver, running says so plainly (skipped where a GPU exists)."""

import pytest

import dsl
from dsl.runtime import NoGPUError, driver


@pytest.fixture
def no_gpu():
    if driver.available():
        pytest.skip("a GPU is present")


def test_run_function_raises_no_gpu(no_gpu):
    with pytest.raises(NoGPUError, match="no NVIDIA GPU driver found"):
        dsl.runtime.run_function("x = 1\n", "/tmp/x.py", "f")


def test_jit_call_raises_no_gpu(no_gpu):
    from examples.saxpy import run_saxpy

    class Arr:
        shape = (4,)
        dtype = "float32"
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (1 << 20, False), "version": 3}

    with pytest.raises(NoGPUError, match="running them needs an NVIDIA GPU"):
        run_saxpy(Arr(), Arr(), 2.0)


def test_no_architecture_without_a_gpu(no_gpu):
    """The quick libcuda query a first call compiles by finds nothing, and says nothing."""
    assert driver.current_arch() is None
