"""The native launch path's devices, on a stand-in libcuda (no GPU needed).

`stub_libcuda/libcuda.c` is built here and put first on the library path of a fresh
process, which then imports `dsl.runtime._fastpath` and drives its `Kernel` directly: one
slot per device (context, function), the launch device per thread, the context pushed
over another device's and popped, a thread with none given the device's, and what is not
the common case handed to Python. The stub records each launch's function, the context
current at that moment and the first parameter; nothing runs on a GPU.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STUB = Path(__file__).parent / "stub_libcuda" / "libcuda.c"

PRELUDE = """
import ctypes, sys, threading
from dsl.runtime import _fastpath as fp

stub = ctypes.CDLL("libcuda.so.1")
CTX = {0: 0xC0, 1: 0xC1}  # the primary contexts of cuda:0 and cuda:1
FN = {0: 0xF0, 1: 0xF1}  # the kernel loaded in each
slow, reported = [], []

def entries():
    out = []
    for i in range(stub.stub_logged()):
        e = (ctypes.c_uint64 * 3)()
        stub.stub_entry(i, e)
        out.append(tuple(e))
    return out

def counts():
    c = (ctypes.c_int * 3)()
    stub.stub_counts(c)
    return dict(zip(("pushes", "pops", "sets"), c))

def current():
    p = ctypes.c_void_p()
    stub.cuCtxGetCurrent(ctypes.byref(p))
    return p.value or 0

def make_current(ctx):
    stub.cuCtxSetCurrent(ctypes.c_void_p(ctx))

def fallback(kernel, grid, block, smem, stream, values):
    slow.append((fp.device(), values))

def report(err, grid, block, smem):
    reported.append(err)

def kernel():
    k = fp.Kernel(("u64", "i32"), fallback, report)
    for d in (0, 1):
        k.arm(d, CTX[d], FN[d], 48 * 1024)
    fp.set_primary_contexts((CTX[0], CTX[1]))
    return k

def launch(k, marker):
    k.launch((1, 1, 1), (32, 1, 1), 0, 0, marker, 7)

def reset():
    stub.stub_reset()
    slow.clear()
    reported.clear()
"""


@pytest.fixture(scope="module")
def stub_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if importlib.util.find_spec("dsl.runtime._fastpath") is None:
        pytest.skip("the native launch path is not built here (python setup.py build_ext --inplace)")
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("no C compiler to build the stand-in libcuda")
    folder = tmp_path_factory.mktemp("stub_libcuda")
    subprocess.run([gcc, "-shared", "-fPIC", "-O2", "-o", str(folder / "libcuda.so.1"), str(STUB), "-lpthread"],
                   check=True)
    return folder


def run(stub_dir: Path, body: str, setup: str = "") -> None:
    """Runs PRELUDE, `setup` and `body` in a fresh process whose libcuda is the stub; it must print ok."""
    env = dict(os.environ, LD_LIBRARY_PATH=os.pathsep.join(p for p in (str(stub_dir),
                                                                        os.environ.get("LD_LIBRARY_PATH")) if p))
    env.pop("KDSL_PURE_PYTHON", None)
    code = PRELUDE + setup + textwrap.dedent(body) + "\nprint('ok')\n"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stdout + done.stderr


def test_a_launch_takes_the_function_and_context_of_its_device(stub_dir):
    run(stub_dir, """
        k = kernel()
        make_current(CTX[0])  # as torch leaves a thread: cuda:0 current
        fp.set_device(1)
        launch(k, 11)
        assert entries() == [(FN[1], CTX[1], 11)], entries()
        assert counts() == {"pushes": 1, "pops": 1, "sets": 1}, counts()
        assert current() == CTX[0]  # the caller's context is back
        fp.set_device(0)
        launch(k, 10)
        assert entries()[1:] == [(FN[0], CTX[0], 10)] and counts()["pushes"] == 1
        assert slow == [] and reported == []
    """)


def test_a_thread_with_no_context_keeps_its_device_s(stub_dir):
    run(stub_dir, """
        k = kernel()
        def work():
            assert current() == 0
            fp.set_device(1)
            launch(k, 1)
            assert current() == CTX[1] and counts()["pushes"] == 0
            launch(k, 2)
        t = threading.Thread(target=work)
        t.start(); t.join()
        assert entries() == [(FN[1], CTX[1], 1), (FN[1], CTX[1], 2)], entries()
        assert counts()["sets"] == 1 and slow == []
    """)


def test_what_the_native_path_does_not_know_goes_to_python(stub_dir):
    run(stub_dir, """
        k = kernel()
        make_current(0xDEAD)  # a context the caller made: the Python path decides
        fp.set_device(1)
        assert not k.armed() and not k.armed(1)
        launch(k, 1)
        make_current(CTX[0])
        assert k.armed() and k.armed(0) and k.armed(1) and not k.armed(2)
        fp.set_device(2)  # not loaded on cuda:2 yet
        launch(k, 2)
        fp.set_device(-1)  # no argument said where: the current context's slot
        launch(k, 3)
        make_current(0)
        launch(k, 4)  # nothing current and no device said
        assert entries() == [(FN[0], CTX[0], 3)], entries()
        assert slow == [(1, (1, 7)), (2, (2, 7)), (-1, (4, 7))], slow
        k.disarm()
        make_current(CTX[0])
        fp.set_device(0)
        launch(k, 5)
        assert slow[-1] == (0, (5, 7)) and len(entries()) == 1
    """)


def test_threads_driving_two_devices_keep_their_own_device_and_parameters(stub_dir):
    """Two threads launch the same kernel at once, each on its own device (the one on cuda:1
    from a thread where cuda:0 is current, as one process driving both does)."""
    run(stub_dir, """
        sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter allows
        k = kernel()
        start = threading.Barrier(2)
        depth = {}
        def work(device):
            make_current(CTX[0])
            start.wait()
            for _ in range(5000):
                fp.set_device(device)
                launch(k, device)
            depth[device] = (stub.stub_depth(), current())
        threads = [threading.Thread(target=work, args=(d,)) for d in (0, 1)]
        for t in threads: t.start()
        for t in threads: t.join()
        seen = entries()
        assert len(seen) == 10000 and slow == []
        assert set(seen) == {(FN[0], CTX[0], 0), (FN[1], CTX[1], 1)}, set(seen)
        assert counts()["pushes"] == counts()["pops"] == 5000
        assert depth == {0: (1, CTX[0]), 1: (1, CTX[0])}, depth
    """)


def test_a_failed_launch_is_reported_after_the_context_is_restored(stub_dir):
    run(stub_dir, """
        k = kernel()
        make_current(CTX[0])
        stub.stub_fail_with(700)
        fp.set_device(1)
        launch(k, 1)
        assert reported == [700] and current() == CTX[0] and stub.stub_depth() == 1
        assert counts()["pushes"] == counts()["pops"] == 1
    """)


def test_only_plain_ints_and_floats_are_packed_natively(stub_dir):
    """Anything that could run Python code while the shared buffer is half packed goes to Python."""
    run(stub_dir, """
        class Index(int):
            pass
        class Weird:
            def __index__(self):
                return 3
        k = kernel()
        make_current(CTX[0])
        fp.set_device(0)
        k.launch((1, 1, 1), (32, 1, 1), 0, 0, Index(5), 7)  # an int subclass: read as an int
        k.launch((1, 1, 1), (32, 1, 1), 0, 0, Weird(), 7)
        assert entries() == [(FN[0], CTX[0], 5)], entries()
        assert len(slow) == 1 and type(slow[0][1][0]).__name__ == "Weird"
    """)


def test_the_launch_device_is_per_thread(stub_dir):
    run(stub_dir, """
        fp.set_device(3)
        seen = []
        t = threading.Thread(target=lambda: (seen.append(fp.device()), fp.set_device(1), seen.append(fp.device())))
        t.start(); t.join()
        assert seen == [-1, 1] and fp.device() == 3
    """)


# The C argument reader with a stand-in for torch.Tensor (what it reads of one: dtype, shape,
# stride(), data_ptr(), get_device(), is_cuda); torch's current stream is 1000 + the device.
READER = """
F32 = object()
class T:
    def __init__(self, device, ptr=0x1000):
        self.dtype, self.shape, self._device, self._ptr = F32, (8,), device, ptr
    def stride(self):
        return (1,)
    def data_ptr(self):
        return self._ptr
    def get_device(self):
        return self._device
    @property
    def is_cuda(self):
        return self._device >= 0
def python_read(*args):
    slow.append(args)
    return "python"
def reader(accept=None, single=False):
    entries = (("tensor", F32, 1, 4, 4), ("tensor", F32, 1, 4, 4), ("float", None, 0, 1, 1))
    return fp.ArgReader(entries, T, lambda device: 1000 + device, python_read, accept, single).read
"""


def test_the_reader_notes_the_tensors_device_and_its_stream(stub_dir):
    run(stub_dir, setup=READER, body="""
        assert reader()(T(1), T(1, 0x2000), 2.0, None) == (0x1000, (8,), (1,), 0x2000, (8,), (1,), 2.0, 1001)
        assert fp.device() == 1
        assert reader()(T(0), T(0), 2.0, 5) == (0x1000, (8,), (1,), 0x1000, (8,), (1,), 2.0, 5)
        assert fp.device() == 0 and slow == []
    """)


def test_the_reader_hands_two_devices_and_host_tensors_to_python(stub_dir):
    run(stub_dir, setup=READER, body="""
        fp.set_device(5)
        assert reader()(T(0), T(1), 2.0, None) == "python"
        assert reader()(T(1), T(-1), 2.0, None) == "python"
        assert fp.device() == 5  # not the reader's to say: the Python reader sets it
        assert len(slow) == 2
    """)


def test_the_reader_takes_only_the_devices_of_its_architecture(stub_dir):
    run(stub_dir, setup=READER, body="""
        read = reader(accept=bytes([0, 1]))  # compiled for cuda:1's architecture, not cuda:0's
        assert read(T(0), T(0), 2.0, None) == "python"
        assert read(T(1), T(1), 2.0, None)[-1] == 1001 and fp.device() == 1
        assert read(T(2), T(2), 2.0, None) == "python"  # beyond what it was told of
    """)


def test_with_one_gpu_a_cuda_tensor_is_on_device_0(stub_dir):
    run(stub_dir, setup=READER, body="""
        read = reader(single=True)
        assert read(T(0), T(0), 2.0, None)[-1] == 1000 and fp.device() == 0
        assert read(T(-1), T(0), 2.0, None) == "python"
    """)


def test_the_cpp_tensor_reader_is_taken_checked_and_handed_back(stub_dir, tmp_path):
    """`set_torch_reader` with the reader built against this torch: CPU tensors still go to
    Python (their device), stand-ins that are not tensors too; a capsule of another name is
    refused; None gives the reads back to torch's Python API."""
    pytest.importorskip("torch")
    from dsl.runtime import torch_tensors

    if shutil.which("g++") is None and shutil.which("c++") is None:
        pytest.skip("no C++ compiler to build the reader")
    library = torch_tensors.build(tmp_path / torch_tensors.library_path().name)
    run(stub_dir, setup=READER, body=f"""
        import torch
        from dsl.runtime import torch_tensors
        module = torch_tensors.load(torch_tensors.Path({str(library)!r}))
        assert not fp.has_torch_reader()
        fp.set_torch_reader(module.READER)
        assert fp.has_torch_reader()
        entries = (("tensor", torch.float32, 1, 4, 4), ("float", None, 0, 1, 1))
        read = fp.ArgReader(entries, torch.Tensor, lambda device: 1000 + device, python_read).read
        assert read(torch.ones(8), 2.0, None) == "python"  # a CPU tensor: its device is Python's to refuse
        assert read(T(0), 2.0, None) == "python"  # not a tensor
        assert len(slow) == 2
        import ctypes
        new_capsule = ctypes.pythonapi.PyCapsule_New
        new_capsule.restype = ctypes.py_object
        new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        for wrong in (new_capsule(8, b"another.READER", None), 3):
            try:
                fp.set_torch_reader(wrong)
            except ValueError:
                pass
            else:
                raise AssertionError(f"set_torch_reader took {{wrong!r}}")
        assert fp.has_torch_reader()
        fp.set_torch_reader(None)
        assert not fp.has_torch_reader()
    """)
