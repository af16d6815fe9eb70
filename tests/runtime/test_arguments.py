"""Argument validation with objects that look like GPU arrays (no GPU needed)."""

import ctypes

import pytest

from dsl.runtime import pointers
from dsl.runtime.dlpack import ArgumentError, aligned, check_tensor, describe
from dsl.runtime.launch import ArgPacker, Runtime, _bf16_bits, stream_handle
from dsl.runtime.module import ModuleImage
from dsl.runtime.pointers import AllocationCache, PointerInfo


class FakeCudaArray:
    def __init__(self, shape, typestr="<f4", strides=None, ptr=0x7000_0000, readonly=False):
        self.shape = shape
        self._cai = {"shape": shape, "typestr": typestr, "data": (ptr, readonly), "strides": strides, "version": 3}

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
    ptr, shape, strides, dt, dev, fw, readonly = describe(FakeCudaArray((8, 16)))
    assert (ptr, shape, strides, dt.name, dev, fw, readonly) == (0x7000_0000, (8, 16), (16, 1), "f32", None, None,
                                                                 False)
    assert describe(FakeCudaArray((8,), readonly=True))[6] is True


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


def _dlpack_cuda_array(device_id=0, shape=(4, 6), flags=None):
    """A DLPack producer over fake device memory, built with ctypes like a real one;
    `flags` given: a DLPack 1.0 (versioned) capsule with those flags."""
    from dsl.runtime import dlpack as D

    shape_arr = (ctypes.c_int64 * len(shape))(*shape)
    managed = D._DLManagedTensor() if flags is None else D._DLManagedTensorVersioned()
    if flags is not None:
        managed.version = D._DLPackVersion(1, 0)
        managed.flags = flags
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
            name = b"dltensor" if flags is None else b"dltensor_versioned"
            return new_capsule(ctypes.addressof(managed), name, None)

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


# --- arrays a kernel cannot take: negative sizes, read-only arrays it writes, misalignment ----

def test_negative_shape_is_rejected():
    with pytest.raises(ArgumentError) as info:
        check_tensor(FakeCudaArray((-5,)), "x", "f32", 1)
    assert str(info.value) == "argument 'x' has a negative size in its shape (-5,)"


def test_negative_strides_are_rejected():
    with pytest.raises(ArgumentError) as info:
        check_tensor(FakeCudaArray((4, 8), strides=(-32, 4)), "x", "f32", 2)
    assert str(info.value) == ("argument 'x' has negative strides (-8, 1); kdsl tensors need non-negative strides "
                               "(pass a copy in row-major order)")
    # a dimension of one element is never stepped over: its stride does not matter
    assert check_tensor(FakeCudaArray((1, 8), strides=(-32, 4)), "x", "f32", 2)[2] == (-8, 1)


def test_negative_dlpack_shape_is_rejected():
    with pytest.raises(ArgumentError, match=r"argument 'x' has a negative size in its shape \(4, -6\)"):
        check_tensor(_dlpack_cuda_array(shape=(4, -6)), "x", "f32", 2)


WRITES_X = (4, "k.x", "k.x")  # a launcher's TENSOR_ACCESS entry: kernel k stores to x
READS_X = (4, "k.x", None)


def test_read_only_array_written_by_a_kernel_is_rejected():
    with pytest.raises(ArgumentError) as info:
        check_tensor(FakeCudaArray((8,), readonly=True), "x", "f32", 1, access=WRITES_X)
    assert str(info.value) == "argument 'x' is a read-only array, but kernel parameter 'k.x' writes it; pass a " \
                              "writable array"
    assert check_tensor(FakeCudaArray((8,), readonly=True), "x", "f32", 1, access=READS_X)[0] == 0x7000_0000
    assert check_tensor(FakeCudaArray((8,), readonly=True), "x", "f32", 1)[0] == 0x7000_0000
    assert check_tensor(FakeCudaArray((8,)), "x", "f32", 1, access=WRITES_X)[0] == 0x7000_0000


def test_read_only_dlpack_array_written_by_a_kernel_is_rejected():
    read_only = _dlpack_cuda_array(flags=1)  # DLPACK_FLAG_BITMASK_READ_ONLY
    with pytest.raises(ArgumentError, match="argument 'x' is a read-only array, but kernel parameter 'k.x' writes"):
        check_tensor(read_only, "x", "f32", 2, access=WRITES_X)
    assert check_tensor(read_only, "x", "f32", 2, access=READS_X)[0] == 0x1234_0010
    copied = _dlpack_cuda_array(flags=2)  # DLPACK_FLAG_BITMASK_IS_COPIED only: writable
    assert check_tensor(copied, "x", "f32", 2, access=WRITES_X)[1] == (4, 6)


VECTOR_X = (16, "k.x", None)  # kernel k reads x with 128-bit vector loads


def test_pointer_misaligned_for_vector_accesses_is_rejected():
    with pytest.raises(ArgumentError) as info:
        check_tensor(FakeCudaArray((8,), ptr=0x7000_0004), "x", "f32", 1, access=VECTOR_X)
    assert str(info.value) == (
        "argument 'x' starts at 0x70000004, which is 4-byte aligned, but kernel parameter 'k.x' is accessed with "
        "16-byte vector loads/stores: its data pointer must be 16-byte aligned (a view such as x[1:] moves it; "
        "pass a copy)")
    assert check_tensor(FakeCudaArray((8,), ptr=0x7000_0010), "x", "f32", 1, access=VECTOR_X)[0] == 0x7000_0010
    assert check_tensor(FakeCudaArray((8,), ptr=0x7000_0004), "x", "f32", 1, access=READS_X)[0] == 0x7000_0004


def test_outer_stride_misaligned_for_vector_accesses_is_rejected():
    with pytest.raises(ArgumentError) as info:
        check_tensor(FakeCudaArray((4, 5)), "x", "f32", 2, access=VECTOR_X)
    assert str(info.value) == (
        "argument 'x' has stride 5 (20 bytes) in dimension 0, but kernel parameter 'k.x' is accessed with 16-byte "
        "vector loads/stores: each row must start 16-byte aligned, so outer strides must be multiples of 4 elements")
    assert check_tensor(FakeCudaArray((1, 5)), "x", "f32", 2, access=VECTOR_X)[2] == (5, 1)  # one row
    assert check_tensor(FakeCudaArray((4, 5), strides=(32, 4)), "x", "f32", 2, access=VECTOR_X)[2] == (8, 1)


def test_pointer_misaligned_for_its_elements_is_rejected():
    with pytest.raises(ArgumentError) as info:
        check_tensor(FakeCudaArray((8,), ptr=0x7000_0002), "x", "f32", 1)
    assert str(info.value) == ("argument 'x' starts at 0x70000002, which is 2-byte aligned, but its 4-byte elements "
                               "need it: its data pointer must be 4-byte aligned")


def test_empty_arrays_are_not_checked_for_alignment():
    assert check_tensor(FakeCudaArray((0,), ptr=0x7000_0002), "x", "f32", 1, access=VECTOR_X)[1] == (0,)


def test_alignment_predicate_of_the_fast_path():
    assert aligned(0x1000, (4, 8), (8, 1), 4, 16)
    assert not aligned(0x1004, (4, 8), (8, 1), 4, 16)
    assert not aligned(0x1000, (4, 5), (5, 1), 4, 16)
    assert aligned(0x1000, (1, 5), (5, 1), 4, 16)
    assert aligned(0x1000, (2, 3, 8), (24, 8, 1), 2, 16)
    assert not aligned(0x1000, (2, 3, 8), (24, 9, 1), 2, 16)


# --- where the memory is: asked of the driver once per allocation ----------------------------

class FakeDriver:
    """cuPointerGetAttributes over a fixed memory map: [(start, size, kind, device)]."""

    def __init__(self, allocations):
        self.allocations = allocations
        self.calls = []

    def __call__(self, ptr):
        self.calls.append(ptr)
        for start, size, kind, device in self.allocations:
            if start <= ptr < start + size:
                return PointerInfo(kind, device, start, size)
        return PointerInfo("unknown", None, ptr, 0)


def test_device_allocations_are_asked_once_per_range():
    drv = FakeDriver([(0x10000, 0x1000, "device", 0), (0x20000, 0x1000, "managed", None)])
    cache = AllocationCache(drv)
    assert [cache.info(p).kind for p in (0x10000, 0x10800, 0x10FFF, 0x20010, 0x20020)] == [
        "device", "device", "device", "managed", "managed"]
    assert drv.calls == [0x10000, 0x20010]


def test_host_memory_is_asked_every_time_and_never_cached():
    drv = FakeDriver([(0x30000, 0x1000, "host", None)])
    cache = AllocationCache(drv)
    assert [cache.info(0x30000).kind, cache.info(0x30000).kind, cache.info(0x5000).kind] == [
        "host", "host", "unknown"]
    assert drv.calls == [0x30000, 0x30000, 0x5000] and cache.starts == []


def test_a_new_allocation_over_freed_ranges_replaces_them():
    drv = FakeDriver([(0x10000, 0x1000, "device", 0), (0x11000, 0x1000, "device", 0)])
    cache = AllocationCache(drv)
    cache.info(0x10000)
    cache.info(0x11000)
    drv.allocations = [(0x10800, 0x2000, "device", 1)]  # both freed; one allocation across them
    assert cache.info(0x12000).device == 1  # a miss: beyond both cached ranges
    assert cache.starts == [0x10800] and cache.info(0x10000).kind == "unknown"
    assert cache.info(0x11000).device == 1 and drv.calls == [0x10000, 0x11000, 0x12000, 0x10000]


def test_the_cache_starts_over_when_full():
    drv = FakeDriver([(0x1000 * i, 0x1000, "device", 0) for i in range(1, 6)])
    cache = AllocationCache(drv, capacity=3)
    for i in range(1, 5):
        cache.info(0x1000 * i)
    assert cache.starts == [0x4000]


def test_host_and_unknown_pointers_are_refused_naming_the_parameter(monkeypatch):
    drv = FakeDriver([(0x10000, 0x1000, "device", 0), (0x20000, 0x1000, "managed", None),
                      (0x30000, 0x1000, "host", None)])
    monkeypatch.setattr(pointers, "ALLOCATIONS", AllocationCache(drv))
    assert pointers.device_memory(0x10010, "x") == 0
    assert pointers.device_memory(0x20010, "x") is None
    with pytest.raises(ArgumentError) as info:
        pointers.device_memory(0x30000, "x")
    assert str(info.value) == ("argument 'x' points to page-locked host memory at 0x30000, not GPU memory; kernels "
                               "need device or managed memory — copy it to the GPU first")
    with pytest.raises(ArgumentError) as info:
        pointers.device_memory(0x5000, "y")
    assert str(info.value) == ("argument 'y' points to memory the CUDA driver does not know (host memory, or freed) "
                               "at 0x5000, not GPU memory; kernels need device or managed memory — copy it to the "
                               "GPU first")


def test_the_runtime_asks_where_an_interface_array_lives(monkeypatch):
    """`__cuda_array_interface__` arrays: host memory refused, the device ordinal compared."""
    drv = FakeDriver([(0x7000_0000, 0x1000, "device", 1)])
    monkeypatch.setattr(pointers, "ALLOCATIONS", AllocationCache(drv))
    rt = Runtime(ModuleImage(None, None), access={"x": VECTOR_X})
    rt._device = None
    assert rt.tensor_arg(FakeCudaArray((8,)), "x", "f32", 1) == (0x7000_0000, (8,), (1,))
    assert rt._device == 1
    rt._device = 0
    with pytest.raises(ArgumentError, match="argument 'x' is on cuda:1, but the launch runs on cuda:0"):
        rt.tensor_arg(FakeCudaArray((8,)), "x", "f32", 1)
    rt._device = None
    with pytest.raises(ArgumentError, match="argument 'y' points to memory the CUDA driver does not know"):
        rt.tensor_arg(FakeCudaArray((8,), ptr=0x9000_0000), "y", "f32", 1)
    with pytest.raises(ArgumentError, match="which is 4-byte aligned, but kernel parameter 'k.x'"):
        rt.tensor_arg(FakeCudaArray((8,), ptr=0x7000_0004), "x", "f32", 1)
    assert rt.tensor_arg(FakeCudaArray((0,), ptr=0x9000_0000), "y", "f32", 1)[1] == (0,)  # no memory touched
    assert drv.calls == [0x7000_0000, 0x9000_0000]


# --- streams --------------------------------------------------------------------------------

def test_stream_handles_that_are_not_64_bit_handles_are_refused():
    class Bad:
        def __init__(self, **attrs):
            self.__dict__.update(attrs)

        def __repr__(self):
            return f"Bad({self.__dict__})"

    class Protocol:
        def __init__(self, value):
            self.value = value

        def __cuda_stream__(self):
            return self.value

    refused = {
        -1: "stream=-1 is not a CUDA stream handle: handles are unsigned 64-bit values",
        2**64: f"stream={2**64} is not a CUDA stream handle: handles are unsigned 64-bit values",
        3.5: "stream=3.5 is not a CUDA stream",
        True: "stream=True is not a CUDA stream",
    }
    for stream, message in refused.items():
        with pytest.raises(ArgumentError) as info:
            stream_handle(stream)
        assert str(info.value) == message + " (pass an int handle, a CUstream, or a PyTorch/CuPy stream)"
    for stream, why in [(Bad(cuda_stream=-1), "its cuda_stream is -1"), (Bad(ptr=3.5), "its ptr is 3.5"),
                        (Bad(cuda_stream=True), "its cuda_stream is True"),
                        (Protocol((0, -2)), "its __cuda_stream__() handle is -2"),
                        (Protocol((0, 1.0)), "its __cuda_stream__() handle is 1.0")]:
        with pytest.raises(ArgumentError) as info:
            stream_handle(stream)
        assert str(info.value) == (f"stream={stream!r}: {why}, not an unsigned 64-bit handle (pass an int handle, "
                                   "a CUstream, or a PyTorch/CuPy stream)")
    with pytest.raises(ArgumentError, match=r"__cuda_stream__\(\) returned \(0, 1, 2\), not \(version, handle\)"):
        stream_handle(Protocol((0, 1, 2)))
    assert [stream_handle(s) for s in (0, 1, 2, 2**64 - 1, Protocol((0, 2**64 - 1)))] == [0, 1, 2, 2**64 - 1,
                                                                                          2**64 - 1]


def test_cuda_bindings_streams_are_taken():
    driver = pytest.importorskip("cuda.bindings.driver")
    assert stream_handle(driver.CUstream(1234)) == 1234
