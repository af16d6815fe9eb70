"""Which device a call runs on, decided before any driver call (no GPU needed).

The arrays here are DLPack producers on a device they name (`__dlpack_device__` (2, N),
and a real DLPack capsule), standing in for tensors on GPUs this machine does not have.
Pointer questions go to a recorder (`AllocationCache(query)`): a test that must make no
driver call fails if it is asked anything.
"""

from __future__ import annotations

import ctypes
import inspect

import pytest

import dsl
from dsl.runtime import ArgumentError, NoGPUError, devices, driver, jit_call, pointers
from dsl.runtime.dlpack import _DLManagedTensor
from dsl.runtime.launch import Runtime
from dsl.runtime.module import ModuleImage
from dsl.runtime.pointers import AllocationCache, PointerInfo

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class DLPackArray:
    """A 1-D f32 DLPack producer on device (kind, ordinal): kind 2 is CUDA, 1 the CPU."""

    dtype = "float32"

    def __init__(self, ordinal: int, n: int = 8, ptr: int = 0x7000_0000, kind: int = 2):
        self.kind, self.ordinal = kind, ordinal
        self.shape = (n,)
        self._shape = (ctypes.c_int64 * 1)(n)
        managed = self._managed = _DLManagedTensor()
        t = managed.dl_tensor
        t.data, t.ndim, t.shape, t.strides, t.byte_offset = ptr, 1, self._shape, None, 0
        t.device.device_type, t.device.device_id = kind, ordinal
        t.dtype.code, t.dtype.bits, t.dtype.lanes = 2, 32, 1  # float32

    def __dlpack_device__(self) -> tuple[int, int]:
        return (self.kind, self.ordinal)

    def __dlpack__(self, **kwargs: object) -> object:
        return _capsule_new(ctypes.addressof(self._managed), b"dltensor", None)


class InterfaceArray:
    """A 1-D f32 `__cuda_array_interface__` array: its device is the driver's to say."""

    def __init__(self, ptr: int, n: int = 8):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "<f4", "data": (ptr, False), "version": 3}


PARAMS = (("x", "f32", 1), ("y", "f32", 1), ("a", "f32", None))


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The pointers the driver was asked about; its answer: device memory on cuda:1."""
    calls: list[int] = []

    def query(ptr: int) -> PointerInfo:
        calls.append(ptr)
        return PointerInfo("device", 1, ptr & ~0xFFFF, 0x10000)

    monkeypatch.setattr(pointers, "ALLOCATIONS", AllocationCache(query))
    return calls


def test_arrays_on_two_gpus_are_refused_naming_both_before_any_driver_call(asked):
    rt = Runtime(ModuleImage(None, None), name="run")
    with pytest.raises(ArgumentError) as info:
        rt._read_args(PARAMS, DLPackArray(0), DLPackArray(1, ptr=0x7100_0000), 2.0, None)
    assert str(info.value) == ("arguments 'x' and 'y' are on different devices (cuda:0 and cuda:1); a launch runs "
                               "on one GPU: put every array argument on the same device (e.g. copy 'y' to cuda:0)")
    assert asked == []


def test_a_host_array_next_to_a_gpu_one_is_refused_naming_both(asked):
    rt = Runtime(ModuleImage(None, None), name="run")
    for x, y, (host, gpu) in [(DLPackArray(1), DLPackArray(0, kind=1), ("y", "x")),
                              (DLPackArray(0, kind=1), DLPackArray(1), ("x", "y"))]:
        with pytest.raises(ArgumentError) as info:
            rt._read_args(PARAMS, x, y, 2.0, None)
        assert str(info.value) == (f"argument '{host}' is in host memory (cpu) while '{gpu}' is on cuda:1; kernels "
                                   f"need GPU memory: move '{host}' to cuda:1 first (e.g. .cuda())")
    assert asked == []


def test_a_lone_host_array_keeps_its_own_message(asked):
    rt = Runtime(ModuleImage(None, None), name="run")
    with pytest.raises(ArgumentError, match="argument 'x' is a CPU array; kernels need GPU"):
        rt._read_args(PARAMS[:1], DLPackArray(0, kind=1), None)


def test_arrays_on_one_gpu_run_there(asked):
    """Both on cuda:1: the pointers are asked about only then, and the launch device is 1."""
    rt = Runtime(ModuleImage(None, None), name="run")
    out = rt._read_args(PARAMS, DLPackArray(1), DLPackArray(1, ptr=0x7100_0000), 2.0, None)
    assert out == (0x7000_0000, (8,), (1,), 0x7100_0000, (8,), (1,), 2.0, 0)
    assert asked == [0x7000_0000, 0x7100_0000]
    assert rt._device == 1


def test_an_interface_array_is_placed_by_the_driver_and_compared(asked):
    """The driver puts the `__cuda_array_interface__` array on cuda:1; next to cuda:0: refused."""
    rt = Runtime(ModuleImage(None, None), name="run")
    with pytest.raises(ArgumentError) as info:
        rt._read_args(PARAMS, DLPackArray(0), InterfaceArray(0x7200_0000), 2.0, None)
    assert str(info.value).startswith("arguments 'x' and 'y' are on different devices (cuda:0 and cuda:1)")


def test_a_jit_call_on_two_devices_is_refused_before_it_compiles(asked, tmp_path, monkeypatch):
    from examples.saxpy import run_saxpy

    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(ArgumentError, match=r"arguments 'x' and 'y' are on different devices \(cuda:1 and cuda:0\)"):
        run_saxpy(DLPackArray(1, n=64), DLPackArray(0, n=64), 2.0)
    assert not (tmp_path / "cache").exists()  # nothing compiled
    assert asked == []


def test_device_of_reads_the_array_alone():
    np = pytest.importorskip("numpy")
    assert devices.device_of(DLPackArray(3)) == 3
    assert devices.device_of(DLPackArray(0, kind=1)) == "cpu"
    assert devices.device_of(DLPackArray(0, kind=13)) is None  # managed memory: any device
    assert devices.device_of(np.zeros(4, np.float32)) == "cpu"
    assert devices.device_of(InterfaceArray(0x7000_0000)) is None
    assert devices.device_of(2.5) is None


def test_common_device_of_a_call():
    names = ["x", "y", "a"]
    assert devices.common_device(devices.call_arguments(names, (DLPackArray(2), DLPackArray(2), 1.0), {})) == 2
    assert devices.common_device(devices.call_arguments(names, (1.0,), {"y": DLPackArray(5)})) == 5
    assert devices.common_device(devices.call_arguments(names, (InterfaceArray(1), 2.0), {})) is None
    with pytest.raises(ArgumentError, match="arguments 'x' and 'y' are on different devices"):
        devices.common_device(devices.call_arguments(names, (DLPackArray(0),), {"y": DLPackArray(1)}))


# --- a host whose GPUs differ in architecture ----------------------------------------------------

@pytest.fixture
def mixed_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """The architectures libcuda would report for an sm_90 at cuda:0 and an sm_80 at cuda:1."""
    monkeypatch.setattr(devices, "_archs", ("sm_90", "sm_80"))


def test_a_specialization_takes_only_the_devices_of_its_architecture(mixed_host, asked):
    rt = Runtime(ModuleImage(None, None), name="run_saxpy", arch="sm_80")
    with pytest.raises(ArgumentError) as info:
        rt._read_args(PARAMS, DLPackArray(0), DLPackArray(0), 2.0, None)
    assert str(info.value) == ("this specialization of 'run_saxpy' is compiled for sm_80, but its arguments are on "
                               "cuda:0, an sm_90")
    assert rt._read_args(PARAMS, DLPackArray(1), DLPackArray(1), 2.0, None)[-2:] == (2.0, 0)


def test_the_architecture_is_in_the_key_only_on_a_mixed_host(monkeypatch):
    from examples.saxpy import run_saxpy

    state = jit_call.state_of(run_saxpy)
    on0, on1 = (DLPackArray(0), DLPackArray(0), 2.0), (DLPackArray(1), DLPackArray(1), 2.0)
    monkeypatch.setattr(devices, "_archs", ("sm_90", "sm_90"))
    assert jit_call._spec_key(state, on0, {}) == jit_call._spec_key(state, on1, {}) == jit_call._key(state, on0, {})
    monkeypatch.setattr(devices, "_archs", ("sm_90", "sm_80"))
    assert jit_call._spec_key(state, on0, {})[1] == "sm_90"
    assert jit_call._spec_key(state, on1, {})[1] == "sm_80"


def test_without_a_gpu_no_architecture_is_visible():
    if driver.available():
        pytest.skip("a GPU is present")
    assert devices.visible_archs() == () and not devices.mixed_architectures()
    assert devices.device_arch(0) is None and devices.device_arch(None) is None


# --- dsl.run_function(device=N) ------------------------------------------------------------------

def test_run_function_takes_a_device_keyword_defaulting_to_0():
    for fn in (dsl.run_function, dsl.runtime.run_function):
        parameter = inspect.signature(fn).parameters["device"]
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.default == 0


@pytest.mark.parametrize("device", [-1, True, "1", 1.0])
def test_run_function_refuses_what_is_not_a_device_ordinal(device):
    result = dsl.run_function("x = 1\n", "/tmp/x.py", "f", device=device)
    assert result["ok"] is False
    assert result["message"] == f"device must be a GPU ordinal (0, 1, ...), not {device!r}"


def test_run_function_on_a_device_without_a_gpu_raises_no_gpu():
    if driver.available():
        pytest.skip("a GPU is present")
    with pytest.raises(NoGPUError):
        dsl.run_function("x = 1\n", "/tmp/x.py", "f", device=1)


class CupyLikeStream:
    """What `stream=` gets from CuPy: `cupy.cuda.Stream` says its device as `device_id`."""

    def __init__(self, device_id: int, ptr: int = 0x5000):
        self.device_id, self.ptr = device_id, ptr


def test_a_stream_of_another_gpu_is_refused(asked):
    rt = Runtime(ModuleImage(None, None), name="run")
    with pytest.raises(ArgumentError) as info:
        rt._read_args(PARAMS, DLPackArray(1), DLPackArray(1, ptr=0x7100_0000), 2.0, CupyLikeStream(0))
    assert str(info.value) == ("stream= is a stream of cuda:0, but the arrays are on cuda:1; a launch runs on its "
                               "arrays' GPU: pass a stream of cuda:1")
    out = rt._read_args(PARAMS, DLPackArray(1), DLPackArray(1, ptr=0x7100_0000), 2.0, CupyLikeStream(1))
    assert out[-1] == 0x5000  # its own device's stream is taken as given
