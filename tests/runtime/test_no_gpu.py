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


def test_a_run_time_compile_defers_the_gpu_error_to_the_launch(no_gpu, monkeypatch, tmp_path):
    """The driver bindings load while ptxas runs; without a GPU that fails quietly there and
    the compile still completes (the launch then raises NoGPUError, as tested above)."""
    np = pytest.importorskip("numpy")
    from dsl.runtime.jit_call import compile_entry
    from examples.saxpy import run_saxpy

    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path))
    x = np.zeros(64, np.float32)
    entry, from_disk, names = compile_entry(run_saxpy, (x, x, 2.0), {}, "sm_90", gpu_arch="sm_90")
    assert not from_disk and entry.cubin[:4] == b"\x7fELF" and names == ["x", "y", "a"]


def test_a_missing_driver_library_is_said_in_words_of_ours(monkeypatch):
    """cuda.pathfinder's text for a missing libcuda.so (where it looked, what to install) is not
    the message: the editor shows this one, after "no GPU: run on the CPU?" has said the rest."""
    bindings = pytest.importorskip("cuda.bindings")

    class DynamicLibNotFoundError(RuntimeError):  # cuda.pathfinder's, by name
        pass

    def cu_init(flags):
        raise DynamicLibNotFoundError('"cuda" is an NVIDIA driver library and can only be found via system search.')

    monkeypatch.setattr(bindings, "driver", type("FakeDriver", (), {"cuInit": staticmethod(cu_init)}))
    monkeypatch.setattr(driver, "_driver", None)
    monkeypatch.setattr(driver, "_init_error", None)
    with pytest.raises(NoGPUError) as info:
        driver.driver()
    assert str(info.value) == (
        "no NVIDIA GPU driver found (libcuda.so was not found). kdsl compiles kernels without a GPU "
        "(dsl.compile, the IR views, `kdsl lint`), but running them needs an NVIDIA GPU and its driver.")
