"""Arguments refused before anything launches, on a GPU (marked gpu): host memory behind a
`__cuda_array_interface__`, negative sizes and strides, pointers and strides misaligned for
the kernel's vector accesses, read-only arrays a kernel writes, stream handles that are
not handles. Each refusal is checked to have launched nothing (the output keeps its NaNs).
"""

import ctypes
import functools
import importlib
import sys

import pytest

from dsl.runtime import ArgumentError

pytestmark = pytest.mark.gpu


class CudaArray:
    """A bare `__cuda_array_interface__` over memory someone else owns (`keep` keeps it alive)."""

    def __init__(self, ptr, shape, strides=None, readonly=False, keep=None, typestr="<f4"):
        self.shape = shape
        self.dtype = "float32"
        self.keep = keep
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, readonly),
                                         "strides": strides, "version": 3}


def over(tensor, **kw):
    """A CudaArray over a torch CUDA tensor's memory."""
    return CudaArray(tensor.data_ptr(), tuple(tensor.shape), keep=tensor, **kw)


def nothing_launched(torch, out):
    torch.cuda.synchronize()
    return bool(torch.isnan(out).all())


def module_from(folder, name, source):
    (folder / f"{name}.py").write_text(source)
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(folder))


ROWS = (
    "import dsl\nfrom dsl import Tensor, f32\n\n"
    "@dsl.kernel\n"
    "def copy_rows(x: Tensor[f32, 2], y: Tensor[f32, 2]):\n"
    "    r = dsl.block_idx.x\n"
    "    c = dsl.thread_idx.x * 4\n"
    "    if c + 4 <= x.shape[1]:\n"
    "        y.vstore((r, c), x.vload((r, c), 4))\n\n"
    "@dsl.jit\n"
    "def run(x: Tensor[f32, 2], y: Tensor[f32, 2]):\n"
    "    copy_rows(x, y).launch(grid=x.shape[0], block=32)\n")


# --- host memory ------------------------------------------------------------------------------

def test_pageable_host_memory_behind_an_interface_is_refused(torch):
    np = pytest.importorskip("numpy")
    from examples.vector_add import add

    host = np.zeros(1024 + 4, np.float32)
    first = (-host.ctypes.data % 16) // 4  # 16-byte aligned: only the kind of memory is wrong
    a = CudaArray(host.ctypes.data + 4 * first, (1024,), keep=host)
    b = torch.randn(1024, device="cuda")
    c = torch.full_like(b, float("nan"))
    # pageable memory is unknown to the driver (or, where the GPU can reach it, host memory): refused either way
    with pytest.raises(ArgumentError, match="^argument 'a' points to (memory the CUDA driver does not know|"
                                            "page-locked host memory)"):
        add(a, b, c)
    assert nothing_launched(torch, c)


def test_page_locked_host_memory_is_refused(torch):
    from examples.vector_add import add

    pinned = torch.zeros(1024, pin_memory=True)
    b = torch.randn(1024, device="cuda")
    c = torch.full_like(b, float("nan"))
    with pytest.raises(ArgumentError) as info:
        add(b, CudaArray(pinned.data_ptr(), (1024,), keep=pinned), c)
    assert str(info.value) == (f"argument 'b' points to page-locked host memory at {pinned.data_ptr():#x}, not GPU "
                               "memory; kernels need device or managed memory — copy it to the GPU first")
    assert nothing_launched(torch, c)


def test_managed_memory_is_taken(torch):
    from cuda.bindings import driver

    from dsl.runtime.driver import current_context
    from examples.vector_add import add

    current_context()  # cuMemAllocManaged allocates in the current context
    n = 1000
    err, ptr = driver.cuMemAllocManaged(3 * 4 * 1024, int(driver.CUmemAttach_flags.CU_MEM_ATTACH_GLOBAL))
    assert err == driver.CUresult.CUDA_SUCCESS
    try:
        base = int(ptr)
        values = (ctypes.c_float * (3 * 1024)).from_address(base)
        for i in range(n):
            values[i], values[1024 + i], values[2048 + i] = float(i), 0.5, float("nan")
        add(CudaArray(base, (n,)), CudaArray(base + 4096, (n,)), CudaArray(base + 8192, (n,)))
        torch.cuda.synchronize()
        assert [values[2048 + i] for i in range(n)] == [i + 0.5 for i in range(n)]
    finally:
        driver.cuMemFree(ptr)


def test_the_driver_is_asked_once_per_allocation(torch, monkeypatch):
    """Launches on the same buffers find their allocation in the cache: no driver call."""
    from dsl.runtime import pointers
    from examples.vector_add import add

    calls = []

    def query(ptr):
        calls.append(ptr)
        return pointers.query_pointer(ptr)

    monkeypatch.setattr(pointers, "ALLOCATIONS", pointers.AllocationCache(query))
    a, b = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    c = torch.empty_like(a)
    info = pointers.query_pointer(a.data_ptr())
    assert info.kind == "device" and info.device == a.device.index
    assert info.start <= a.data_ptr() < a.data_ptr() + 4 * 4096 <= info.start + info.size
    add(over(a), over(b), over(c))
    first = len(calls)
    assert 1 <= first <= 3  # three tensors, from one or more of the allocator's segments
    for _ in range(3):
        add(over(a), over(b), over(c))
    torch.cuda.synchronize()
    assert len(calls) == first and torch.equal(c, a + b)


# --- shapes and strides -------------------------------------------------------------------------

def test_negative_shape_and_strides_are_refused(torch, tmp_path):
    from examples.vector_add import add

    a = torch.randn(1024, device="cuda")
    c = torch.full_like(a, float("nan"))
    with pytest.raises(ArgumentError, match=r"^argument 'a' has a negative size in its shape \(-5,\)$"):
        add(CudaArray(a.data_ptr(), (-5,), keep=a), a, c)
    assert nothing_launched(torch, c)
    rows = module_from(tmp_path, "neg_rows", ROWS)
    x = torch.randn(4, 8, device="cuda")
    y = torch.full_like(x, float("nan"))
    backwards = CudaArray(x[3].data_ptr(), (4, 8), strides=(-32, 4), keep=x)  # rows last to first
    with pytest.raises(ArgumentError, match=r"^argument 'x' has negative strides \(-8, 1\)"):
        rows.run(backwards, y)
    assert nothing_launched(torch, y)


# --- alignment for vector accesses -------------------------------------------------------------

def test_view_misaligned_for_128_bit_accesses_is_refused(torch):
    from examples.vector_add import add

    a, b = torch.randn(1028, device="cuda"), torch.randn(1028, device="cuda")
    c = torch.full_like(a, float("nan"))
    with pytest.raises(ArgumentError) as info:
        add(a[1:], b[1:], c[1:])
    assert str(info.value) == (
        f"argument 'a' starts at {a[1:].data_ptr():#x}, which is 4-byte aligned, but kernel parameter "
        "'vector_add.a' is accessed with 16-byte vector loads/stores: its data pointer must be 16-byte aligned "
        "(a view such as x[1:] moves it; pass a copy)")
    with pytest.raises(ArgumentError, match="^argument 'c' starts at .* kernel parameter 'vector_add.c'"):
        add(a[4:], b[4:], c[2:-2])
    assert nothing_launched(torch, c)
    add(a[4:], b[4:], c[4:])  # 16 bytes in: aligned
    torch.cuda.synchronize()
    assert torch.equal(c[4:], a[4:] + b[4:]) and bool(torch.isnan(c[:4]).all())


def test_cupy_view_misaligned_for_128_bit_accesses_is_refused(gpu):
    cp = pytest.importorskip("cupy")
    from examples.vector_add import add

    a = cp.arange(1025, dtype=cp.float32)
    c = cp.full(1025, cp.nan, dtype=cp.float32)
    with pytest.raises(ArgumentError, match="^argument 'a' starts at .*, which is 4-byte aligned, but kernel "
                                            "parameter 'vector_add.a'"):
        add(a[1:], a[1:], c[1:])
    cp.cuda.Device().synchronize()
    assert bool(cp.isnan(c).all())


def test_row_stride_misaligned_for_128_bit_accesses_is_refused(torch, tmp_path):
    rows = module_from(tmp_path, "stride_rows", ROWS)
    for x in (torch.randn(8, 10, device="cuda"), torch.randn(8, 10, device="cuda")[:, :8]):
        y = torch.full((8, x.shape[1]), float("nan"), device="cuda")
        with pytest.raises(ArgumentError) as info:
            rows.run(x, y)  # contiguous (the native reader's case) and a column slice
        assert str(info.value) == (
            "argument 'x' has stride 10 (40 bytes) in dimension 0, but kernel parameter 'copy_rows.x' is accessed "
            "with 16-byte vector loads/stores: each row must start 16-byte aligned, so outer strides must be "
            "multiples of 4 elements")
        assert nothing_launched(torch, y)
    x = torch.randn(8, 12, device="cuda")[:, :8]  # 48-byte rows: aligned
    y = torch.full((8, 8), float("nan"), device="cuda")
    rows.run(x, y)
    torch.cuda.synchronize()
    assert torch.equal(y, x)


# --- read-only arrays -------------------------------------------------------------------------

def test_read_only_array_written_by_the_kernel_is_refused(torch):
    from examples.vector_add import add

    a, b = torch.randn(1024, device="cuda"), torch.randn(1024, device="cuda")
    c = torch.full_like(a, float("nan"))
    with pytest.raises(ArgumentError) as info:
        add(a, b, over(c, readonly=True))
    assert str(info.value) == ("argument 'c' is a read-only array, but kernel parameter 'vector_add.c' writes it; "
                               "pass a writable array")
    assert nothing_launched(torch, c)
    add(over(a, readonly=True), over(b, readonly=True), c)  # read-only inputs are fine
    torch.cuda.synchronize()
    assert torch.equal(c, a + b)


# --- streams ------------------------------------------------------------------------------------

@pytest.mark.parametrize("stream", [-1, 3.5, True, 2**64])
def test_bad_stream_handles_are_refused(torch, stream):
    from examples.vector_add import add

    a = torch.randn(1024, device="cuda")
    c = torch.full_like(a, float("nan"))
    with pytest.raises(ArgumentError, match=f"^stream={stream!r} is not a CUDA stream"):
        add(a, a, c, stream=stream)
    assert nothing_launched(torch, c)


def test_stream_objects_with_bad_handles_are_refused(torch):
    from examples.vector_add import add

    class Claims:
        cuda_stream = -1

    a = torch.randn(1024, device="cuda")
    c = torch.full_like(a, float("nan"))
    with pytest.raises(ArgumentError, match="its cuda_stream is -1, not an unsigned 64-bit handle"):
        add(a, a, c, stream=Claims())
    assert nothing_launched(torch, c)


def test_good_streams_keep_working(torch):
    from examples.vector_add import add

    a = torch.randn(1024, device="cuda")
    s = torch.cuda.Stream()
    for stream in (None, 0, s, s.cuda_stream):
        c = torch.full_like(a, float("nan"))
        add(a, a, c, stream=stream)
        torch.cuda.synchronize()
        assert torch.equal(c, a + a), stream


# --- the C reader and the Python reader agree ----------------------------------------------------

def _outcome(fn, *args):
    try:
        return "ok", fn(*args)
    except ArgumentError as err:
        return "error", str(err)


@pytest.fixture(params=["python-api", "cpp"])
def tensor_reads(request, torch):
    """Each native-reader test twice: tensors read through torch's Python API, and through the
    C++ reader built against this torch (dsl/runtime/_torch_tensors.cpp)."""
    from dsl.runtime import torch_tensors
    from dsl.runtime.native import fastpath

    if fastpath is None:
        pytest.skip("the native launch path is not built here")
    module = torch_tensors.install(wait=True)
    assert module is not None, "the C++ tensor reader did not build (see the warning)"
    fastpath.set_torch_reader(module.READER if request.param == "cpp" else None)
    assert fastpath.has_torch_reader() == (request.param == "cpp")
    yield request.param
    fastpath.set_torch_reader(module.READER)


def test_native_reader_refuses_as_the_python_reader_does(torch, tensor_reads):
    """With the kernels' alignment facts, misaligned tensors and bad streams go to Python."""
    from dsl.runtime.launch import Runtime
    from dsl.runtime.module import ModuleImage
    from dsl.runtime.native import fastpath

    if fastpath is None:
        pytest.skip("the native launch path is not built here")
    params = (("x", "f32", 2), ("n", "i32", None))
    rt = Runtime(ModuleImage(None, None), access={"x": (16, "k.x", None)})
    native = rt.arg_reader(params)
    python = functools.partial(rt._read_args, params)
    assert type(native).__name__ == "builtin_function_or_method"
    flat = torch.randn(64 * 32 + 4, device="cuda")
    tensors = [flat[:2048].view(64, 32), flat[1:2049].view(64, 32), flat[4:2052].view(64, 32),
               torch.randn(64, 31, device="cuda"), torch.randn(64, 36, device="cuda")[:, :32],
               torch.randn(1, 31, device="cuda"), torch.empty(0, 31, device="cuda")]
    stream = torch.cuda.Stream()
    for t in tensors:
        for st in (None, 0, -1, 2**64, 2**64 - 1, 3.5, True, stream, stream.cuda_stream):
            got, want = _outcome(native, t, 7, st), _outcome(python, t, 7, st)
            assert got == want, (t.shape, t.stride(), t.data_ptr() % 16, st)
    assert _outcome(native, tensors[1], 7, None)[0] == "error"
    assert _outcome(native, tensors[3], 7, None)[0] == "error"
    assert _outcome(native, tensors[2], 7, None)[0] == "ok"
    assert _outcome(native, tensors[0], 7, -1)[0] == "error"


def test_native_reader_takes_aligned_tensors_and_hands_on_the_rest(torch, tensor_reads):
    """The C reader itself: aligned tensors and int handles never reach the fallback."""
    from dsl.runtime.native import fastpath

    if fastpath is None:
        pytest.skip("the native launch path is not built here")
    handed_on = []

    def fallback(*args):
        handed_on.append(args)
        return "fallback"

    raw_stream = torch._C._cuda_getCurrentRawStream
    reader = fastpath.ArgReader((("tensor", torch.float32, 2, 16, 4),), torch.Tensor, raw_stream, fallback).read
    flat = torch.randn(4 * 32 + 4, device="cuda")
    good = flat[4:132].view(4, 32)
    assert reader(good, 5) == (good.data_ptr(), (4, 32), (32, 1), 5)
    assert reader(good, 2**64 - 1)[3] == 2**64 - 1
    assert reader(torch.randn(1, 31, device="cuda"), 0)[1] == (1, 31)  # one row: its stride is not used
    assert handed_on == []
    for args in [(flat[1:129].view(4, 32), 0), (torch.randn(4, 30, device="cuda"), 0), (good, -1), (good, 2**64),
                 (good, 3.5), (good, True)]:
        assert reader(*args) == "fallback"
        assert handed_on[-1] == args
    assert len(handed_on) == 6
    # an nn.Parameter is a tensor to the C++ reader; through the Python API, Python's to read
    weight = torch.nn.Parameter(torch.randn(4, 32, device="cuda"))
    read_natively = (weight.data_ptr(), (4, 32), (32, 1), 0)
    assert reader(weight, 0) == ("fallback" if tensor_reads == "python-api" else read_natively)
    for other in (torch.randn(4, 32, device="cuda").double(), torch.randn(4, 32), torch.randn(2, 4, 32, device="cuda"),
                  torch.randn(4, 32, device="cuda").to_sparse()):
        assert reader(other, 0) == "fallback"
    with pytest.raises(ValueError, match="power of two"):
        fastpath.ArgReader((("tensor", torch.float32, 1, 12, 4),), torch.Tensor, raw_stream, fallback)
