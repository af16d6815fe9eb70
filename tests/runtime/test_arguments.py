"""Argument validation with objects that look like GPU arrays (no GPU needed)."""

import ctypes

import pytest

from dsl.runtime.dlpack import ArgumentError, check_tensor, describe
from dsl.runtime.launch import ArgPacker, Runtime, _bf16_bits, stream_handle
from dsl.runtime.module import ModuleImage


class FakeCudaArray:
    def __init__(self, shape, typestr="<f4", strides=None, ptr=0x7000_0000):
        self.shape = shape
        self._cai = {"shape": shape, "typestr": typestr, "data": (ptr, False), "strides": strides, "version": 3}

    @property
    def __cuda_array_interface__(self):
        return self._cai


class FakeHostArray:
    def __init__(self):
        self.__array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (0, False), "version": 3}


class FakeDLPackCPU:
    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, **kw):
        raise AssertionError("must not be asked for data")


def test_cuda_array_interface_contiguous():
    ptr, shape, strides, dt, dev, fw = describe(FakeCudaArray((8, 16)))
    assert (ptr, shape, strides, dt.name) == (0x7000_0000, (8, 16), (16, 1), "f32")


def test_strides_in_bytes_become_elements():
    ptr, shape, strides, dev, fw = check_tensor(FakeCudaArray((8, 16), strides=(128, 4)), "x", "f32", 2)
    assert strides == (32, 1)


def test_dtype_mismatch_is_rejected():
    with pytest.raises(ArgumentError, match="argument 'x' has element type f16.*Tensor\\[f32, 1\\]"):
        check_tensor(FakeCudaArray((8,), "<f2"), "x", "f32", 1)


def test_rank_mismatch_is_rejected():
    with pytest.raises(ArgumentError, match="rank 2"):
        check_tensor(FakeCudaArray((8, 8)), "x", "f32", 1)


def test_non_unit_inner_stride_is_rejected():
    with pytest.raises(ArgumentError, match="innermost stride 2"):
        check_tensor(FakeCudaArray((8, 8), strides=(64, 8)), "x", "f32", 2)


def test_size_beyond_int32_is_rejected():
    with pytest.raises(ArgumentError, match="32-bit"):
        check_tensor(FakeCudaArray((1 << 31,)), "x", "f32", 1)


def test_span_beyond_int32_is_rejected():
    with pytest.raises(ArgumentError, match="32-bit"):
        check_tensor(FakeCudaArray((1 << 16, 1 << 16)), "x", "f32", 2)


def test_host_arrays_are_rejected():
    with pytest.raises(ArgumentError, match="host array"):
        check_tensor(FakeHostArray(), "x", "f32", 1)
    with pytest.raises(ArgumentError, match="CPU array"):
        check_tensor(FakeDLPackCPU(), "x", "f32", 1)
    with pytest.raises(ArgumentError, match="not a GPU array"):
        check_tensor([1.0, 2.0], "x", "f32", 1)


def test_numpy_is_rejected():
    np = pytest.importorskip("numpy")
    with pytest.raises(ArgumentError, match="argument 'x' .*CPU"):
        check_tensor(np.zeros(4, np.float32), "x", "f32", 1)


def test_wrong_device_is_rejected():
    class OnDevice1(FakeCudaArray):
        pass

    arr = OnDevice1((4,))
    # A CuPy-like reader reports the device; emulate with the DLPack path.
    cap_arr = _dlpack_cuda_array(device_id=1)
    with pytest.raises(ArgumentError, match="cuda:1"):
        check_tensor(cap_arr, "x", "f32", 2, device=0)
    assert check_tensor(arr, "x", "f32", 1, device=0)[0] == 0x7000_0000


def _dlpack_cuda_array(device_id=0, shape=(4, 6)):
    """A DLPack producer over fake device memory, built with ctypes like a real one."""
    from dsl.runtime import dlpack as D

    shape_arr = (ctypes.c_int64 * len(shape))(*shape)
    managed = D._DLManagedTensor()
    managed.dl_tensor.data = 0x1234_0000
    managed.dl_tensor.device = D._DLDevice(2, device_id)
    managed.dl_tensor.ndim = len(shape)
    managed.dl_tensor.dtype = D._DLDataType(2, 32, 1)
    managed.dl_tensor.shape = shape_arr
    managed.dl_tensor.byte_offset = 16
    new_capsule = ctypes.pythonapi.PyCapsule_New
    new_capsule.restype = ctypes.py_object
    new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

    class Producer:
        keep = (shape_arr, managed)

        def __dlpack_device__(self):
            return (2, device_id)

        def __dlpack__(self, stream=None, max_version=None):
            return new_capsule(ctypes.addressof(managed), b"dltensor", None)

    return Producer()


def test_dlpack_capsule_is_parsed():
    ptr, shape, strides, dev, fw = check_tensor(_dlpack_cuda_array(), "x", "f32", 2)
    assert ptr == 0x1234_0010 and shape == (4, 6) and strides == (6, 1) and dev == 0


def test_packer_lays_out_params_in_8_byte_slots():
    p = ArgPacker(("ptr", "i32", "f32", "bf16", "bool"))
    addr = p.pack([0xDEADBEEF, -3, 2.5, 1.0, True])
    slots = (ctypes.c_void_p * 5).from_address(addr)
    assert ctypes.c_uint64.from_address(slots[0]).value == 0xDEADBEEF
    assert ctypes.c_int32.from_address(slots[1]).value == -3
    assert ctypes.c_float.from_address(slots[2]).value == 2.5
    assert ctypes.c_uint16.from_address(slots[3]).value == 0x3F80
    assert ctypes.c_bool.from_address(slots[4]).value is True


def test_bf16_rounding():
    assert _bf16_bits(1.0) == 0x3F80
    assert _bf16_bits(-2.0) == 0xC000
    assert _bf16_bits(float("inf")) == 0x7F80


def test_scalar_arguments():
    rt = Runtime(ModuleImage(None, None))
    assert rt.scalar_arg(2, "a", "f32") == 2
    assert rt.scalar_arg(3, "n", "i32") == 3
    with pytest.raises(ArgumentError, match="argument 'n' must be a int"):
        rt.scalar_arg("x", "n", "i32")
    with pytest.raises(ArgumentError, match="float"):
        rt.scalar_arg(2.0, "n", "i32")


def test_stream_handles():
    class TorchLike:
        cuda_stream = 77

    class CupyLike:
        ptr = 88

    class Protocol:
        def __cuda_stream__(self):
            return (0, 99)

    assert stream_handle(None) == 0
    assert stream_handle(5) == 5
    assert stream_handle(TorchLike()) == 77
    assert stream_handle(CupyLike()) == 88
    assert stream_handle(Protocol()) == 99
    with pytest.raises(ArgumentError):
        stream_handle("default")
