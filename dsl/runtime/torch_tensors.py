"""The native launch path's PyTorch tensor reader: `_torch_tensors.cpp`, built per torch and Python.

`_fastpath.c` reads a torch tensor argument through torch's Python API: dtype, shape,
stride(), device and data_ptr(), about 0.4 us a tensor, most of what a warm launch costs
above `cuLaunchKernel`. Compiled against the installed torch's headers, `_torch_tensors`
reads the same fields from the tensor's TensorImpl in C++ (`tensor_reader.h`), and
`_fastpath` uses it once `install()` has handed it over.

It cannot be built when kdsl is installed (pip builds in an environment without torch), so
it is built the first time it would be used: the first launch that reads torch tensors
natively starts the build in a background thread (one compiler process, about 2 s) and goes on
with the attribute reads; later launches in that process, and later processes, load the
library from the cache: `<kdsl cache>/native/_torch_tensors-<torch>-<python>-<digest>.so`,
the digest over its sources and `$CXX`, built once across processes (a lock) and atomically.
`KDSL_NO_TORCH_READER=1` turns it off. A build that fails is said once, as a warning naming
the command and its output; the attribute reads go on, as correct and slower.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import importlib.util
import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from dsl import environment

HERE = Path(__file__).parent
SOURCES = (HERE / "_torch_tensors.cpp", HERE / "tensor_reader.h")

_lock = threading.Lock()
_state: dict[str, Any] = {"started": False, "module": None}


def build_command(output: Path) -> list[str]:
    """The compiler line that makes the reader: torch's flags and libraries, Python's headers,
    a C++ compiler that links the shared libstdc++ (`dsl.runtime.torch_cxx`)."""
    from dsl.runtime.torch_cxx import package_cxx, torch_flags

    flags = torch_flags()
    return [package_cxx(), *flags.compile(), "-w", "-shared", f"-I{HERE}", f"-I{sysconfig.get_paths()['include']}",
            "-o", str(output), str(SOURCES[0]), *flags.link()]


def library_path() -> Path:
    """Where the reader for this torch and this Python is kept: the kdsl cache, or with the
    cache off (`KDSL_NO_DISK_CACHE`) a private folder of this process's."""
    import torch

    from dsl.compiler.disk_cache import cache_dir, enabled

    digest = hashlib.sha256(os.environ.get("CXX", "").encode())
    for source in SOURCES:
        digest.update(source.read_bytes())
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    name = f"_torch_tensors-{torch.__version__}-{sys.implementation.cache_tag}-{digest.hexdigest()[:16]}{suffix}"
    folder = cache_dir() / "native" if enabled() else Path(tempfile.mkdtemp(prefix="kdsl-native-"))
    return folder / name.replace("+", "_")


def build(output: Path) -> Path:
    """`output`, compiled unless it is there; atomic, once across processes. RuntimeError
    (with the command and the compiler's output) when the compiler fails."""
    from dsl.compiler.disk_cache import lock
    from dsl.runtime.torch_cxx import check_shared_cxx_runtime

    output.parent.mkdir(parents=True, exist_ok=True)
    with lock(f"native-{output.name}"):
        if output.exists():
            return output
        _remove_leftovers(output)
        fd, temporary = tempfile.mkstemp(prefix=f".{output.name}-", dir=output.parent)
        os.close(fd)
        work = Path(temporary)
        try:
            command = build_command(work)
            done = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600)
            if done.returncode != 0:
                raise RuntimeError(f"building kdsl's torch tensor reader failed:\n{shlex.join(command)}\n"
                                   f"{(done.stderr or done.stdout).strip()}")
            check_shared_cxx_runtime(work)
            os.replace(work, output)
        finally:
            if work.exists():
                work.unlink()
    return output


def _remove_leftovers(output: Path, older_than_s: float = 600) -> None:
    """Temporary files of builds that were killed before their rename (a process that exits
    during the background build takes its compiler with it: an editor's short runs do)."""
    now = time.time()
    for leftover in output.parent.glob(f".{output.name}-*"):
        with contextlib.suppress(OSError):
            if now - leftover.stat().st_mtime > older_than_s:
                leftover.unlink()


def load(library: Path) -> Any:
    """The built reader module, configured for this torch and checked against torch's own
    readings (`check`): `read(tensor)`, `scalar_type(dtype)`, `READER`."""
    import torch

    spec = importlib.util.spec_from_file_location("dsl.runtime._torch_tensors", library)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    probes = [torch.empty(3, device="cpu"), torch.empty(2, 5, dtype=torch.float16, device="cpu").t(),
              torch.nn.Parameter(torch.empty(4, device="cpu"))]
    scalar_types: dict[Any, int] = {}  # filled below, once read() can say each dtype's code
    module.configure(torch.Tensor, torch.nn.Parameter, [(t, t._cdata) for t in probes], scalar_types)
    for dtype in DTYPES:
        if isinstance(getattr(torch, dtype, None), torch.dtype):
            scalar_types[getattr(torch, dtype)] = module.read(torch.empty(1, dtype=getattr(torch, dtype),
                                                                          device="cpu"))[3]
    check(module, [*probes, torch.arange(24, dtype=torch.int32, device="cpu").view(2, 3, 4)[:, 1:, ::2],
                   torch.tensor(7, device="cpu")])
    return module


DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "uint16",
          "uint32", "uint64", "bool", "float8_e4m3fn", "float8_e5m2")


def torch_reading(t: Any) -> tuple:
    """What `read(t)` must return, as torch's Python API says it."""
    device_type = {"cpu": 0, "cuda": KDSL_DEVICE_CUDA}.get(t.device.type, -2)
    return (t.data_ptr(), tuple(t.shape), t.stride(), t.dtype, device_type,
            -1 if t.device.index is None else t.device.index)


KDSL_DEVICE_CUDA = 1  # tensor_reader.h


def check(module: Any, tensors: list[Any]) -> None:
    """RuntimeError unless `module.read` says what torch says of each tensor."""
    for t in tensors:
        got = module.read(t)
        want = torch_reading(t)
        if got is None or got[:3] != want[:3] or got[3] != module.scalar_type(t.dtype) or got[4:] != want[4:]:
            raise RuntimeError(f"the C++ tensor reader read {got} where torch says {want}")


def install(wait: bool = False) -> Any:
    """Hands the reader to the native launch path: at once when it is built, else after a build
    in a background thread (`wait=True`: in this call, or by waiting for that thread). Returns
    the module once installed, else None. Called by the runtime at the first native read of
    torch tensors; a no-op after the first call (but for the wait), without the native path,
    or with `KDSL_NO_TORCH_READER=1`."""
    from dsl.runtime.native import fastpath

    if fastpath is None or environment.switch("KDSL_NO_TORCH_READER"):
        return None
    with _lock:
        started, _state["started"] = _state["started"], True
    if started:
        thread = _state.get("thread")
        if wait and thread is not None:
            thread.join()
        return _state["module"]
    # A thread of its own even when the library is built: its probe tensors are made outside
    # whatever torch modes the caller's thread runs under (a fake-tensor trace, a default device).
    thread = _state["thread"] = threading.Thread(target=_install_from, args=(library_path(),),
                                                 name="kdsl-torch-reader", daemon=True)
    thread.start()
    if wait:
        thread.join()
    return _state["module"]


def _install_from(library: Path) -> None:
    from dsl.runtime.native import fastpath

    try:
        module = load(build(library))
        fastpath.set_torch_reader(module.READER)
    except Exception as error:  # the attribute reads stay: said, not raised, as the launch went on
        warnings.warn(f"kdsl launches read torch tensors through Python ({type(error).__name__}: {error}); "
                      "KDSL_NO_TORCH_READER=1 stops this attempt", RuntimeWarning, stacklevel=2)
        return
    _state["module"] = module
