"""The CUDA driver API through `cuda-bindings`: initialisation, contexts, errors.

Everything that touches the GPU goes through `check()`, so no CUresult is ever ignored.
Initialisation is lazy: importing `dsl` never needs a GPU. Where no NVIDIA driver can be
loaded (or it sees no device), `driver()` raises `NoGPUError` with a plain explanation.

Contexts: kdsl uses the CUDA *primary* context of a device, the one PyTorch, CuPy and the
runtime API use, so arrays from those libraries are valid in kdsl launches and the other
way round. A launch on device N runs in the calling thread's current context when that one
is on device N (PyTorch's, CuPy's, or one the caller made), else in device N's primary
context (`launch_context`), retained once per process. Switching is `enter` / `leave`: the
thread's current context is left as it was found (pushed and popped around the work), except
that a thread with none keeps the one it was given, as the CUDA runtime gives one on first
use; so `torch.cuda.current_device()` never changes under the caller.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from dsl.diagnostics import Diagnostic, SourceRange
from dsl.runtime.devices import current_arch as current_arch


class NoGPUError(RuntimeError):
    """No usable NVIDIA GPU: the driver library is missing, or it reports no device."""


class DriverError(RuntimeError):
    """A CUDA driver call failed; `code` is the CUresult, `name` its symbolic name."""

    def __init__(self, message: str, code: int = 0, name: str = ""):
        super().__init__(message)
        self.code = int(code)
        self.name = name


class LaunchError(DriverError):
    """A kernel launch failed or was refused before launching (DSL601).

    `diagnostic` points at the `.launch(...)` call in the `@jit` function when its source
    range is known, so editors and tracebacks show the failing launch.
    """

    def __init__(self, message: str, *, kernel: str, grid: tuple, block: tuple, smem: int,
                 code: int = 0, name: str = "", range: SourceRange | None = None, diagnostic_code: str = "DSL601"):
        text = (f"launching kernel '{kernel}' with grid={tuple(grid)}, block={tuple(block)}, "
                f"smem={smem} failed: {message}")
        super().__init__(text, code, name)
        self.kernel = kernel
        self.grid = tuple(grid)
        self.block = tuple(block)
        self.smem = smem
        self.diagnostic = Diagnostic.make(diagnostic_code, text, range) if range is not None else None

    def __str__(self) -> str:
        text = super().__str__()
        if self.diagnostic is not None:
            r = self.diagnostic.range
            text += f"\n  at {r.file}:{r.line}:{r.column + 1}"
        return text


_NO_DRIVER = (
    "no NVIDIA GPU driver found ({detail}). kdsl compiles kernels without a GPU "
    "(dsl.compile, the IR views, `kdsl lint`), but running them needs an NVIDIA GPU and its driver."
)

_lock = threading.Lock()
_driver: Any = None
_init_error: NoGPUError | None = None


def driver() -> Any:
    """The initialised `cuda.bindings.driver` module; raises `NoGPUError` when there is no GPU."""
    global _driver, _init_error
    if _driver is not None:
        return _driver
    with _lock:
        if _driver is not None:
            return _driver
        if _init_error is not None:
            raise _init_error
        try:
            from cuda.bindings import driver as drv
        except ImportError as err:
            _init_error = NoGPUError(_NO_DRIVER.format(detail=f"cuda-bindings is not installed: {err}"))
            raise _init_error from None
        try:
            (err,) = drv.cuInit(0)
        except Exception as exc:  # cuda.pathfinder's DynamicLibNotFoundError when libcuda.so is absent
            _init_error = NoGPUError(_NO_DRIVER.format(detail=_load_failure(exc)))
            raise _init_error from None
        if err != drv.CUresult.CUDA_SUCCESS:
            _init_error = NoGPUError(_NO_DRIVER.format(detail=f"cuInit failed with {_name(drv, err)}"))
            raise _init_error
        err, count = drv.cuDeviceGetCount()
        if err != drv.CUresult.CUDA_SUCCESS or count == 0:
            _init_error = NoGPUError("the NVIDIA driver is installed but reports no GPU device "
                                     "(check CUDA_VISIBLE_DEVICES)")
            raise _init_error
        _driver = drv
        return drv


def _load_failure(exc: Exception) -> str:
    """Why the driver's library did not load, in a few words of ours: the editor shows this
    message, and cuda.pathfinder's text for a missing library (where it searched, what to
    install) says no more than "not found"."""
    if type(exc).__name__ == "DynamicLibNotFoundError":
        return "libcuda.so was not found"
    return f"{type(exc).__name__}: {exc}"


def available() -> bool:
    """Whether a GPU can be used (never raises)."""
    try:
        driver()
        return True
    except NoGPUError:
        return False


def _name(drv: Any, code: Any) -> str:
    try:
        err, name = drv.cuGetErrorName(code)
        if err == drv.CUresult.CUDA_SUCCESS and name:
            return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:
        pass
    return f"CUresult {int(code)}"


def error_text(code: Any) -> tuple[str, str]:
    """(symbolic name, description) of a CUresult."""
    drv = driver()
    name = _name(drv, code)
    try:
        err, desc = drv.cuGetErrorString(code)
        text = desc.decode() if isinstance(desc, bytes) else str(desc)
    except Exception:
        text = ""
    return name, text


def check(result: Any, what: str) -> Any:
    """Checks the CUresult of a cuda-bindings call; returns its other value(s)."""
    err = result[0]
    if err:
        name, text = error_text(err)
        raise DriverError(f"{what} failed: {name}" + (f" ({text})" if text else ""), int(err), name)
    if len(result) == 1:
        return None
    if len(result) == 2:
        return result[1]
    return result[1:]


@dataclass
class Context:
    """A CUDA context kdsl launches into, with the device limits launches are checked against."""

    handle: Any  # CUcontext
    key: int  # int(handle): hashable identity
    device: int  # ordinal
    cc: tuple[int, int]
    smem_per_block: int
    smem_optin: int
    sm_count: int
    name: str
    primary: bool = False  # the device's primary context (the only kind the native launch path takes)

    @property
    def arch(self) -> str:
        return f"sm_{self.cc[0]}{self.cc[1]}"


_contexts: dict[int, Context] = {}  # handle -> description; only ever gains complete entries
_primary: dict[int, Context] = {}  # ordinal -> its primary context, retained for the process
_context_lock = threading.Lock()  # creates the entries above (driver() takes `_lock` itself)
_tls = threading.local()
_count: int | None = None


def device_count() -> int:
    """GPUs visible to this process (after CUDA_VISIBLE_DEVICES), asked of the driver once."""
    global _count
    if _count is None:
        _count = int(check(driver().cuDeviceGetCount(), "cuDeviceGetCount"))
    return _count


def _describe(handle: Any, ordinal: int, primary: bool) -> Context:
    """Device `ordinal`'s limits, read through the device (the context need not be current)."""
    drv = driver()
    dev = check(drv.cuDeviceGet(ordinal), f"cuDeviceGet({ordinal})")
    A = drv.CUdevice_attribute

    def attr(a: Any) -> int:
        return int(check(drv.cuDeviceGetAttribute(a, dev), f"cuDeviceGetAttribute({a.name})"))

    raw_name = check(drv.cuDeviceGetName(256, dev), "cuDeviceGetName")
    name = raw_name.split(b"\0", 1)[0].decode(errors="replace") if isinstance(raw_name, bytes) else str(raw_name)
    return Context(
        handle=handle, key=int(handle), device=ordinal,
        cc=(attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR), attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)),
        smem_per_block=attr(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK),
        smem_optin=attr(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
        sm_count=attr(A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
        name=name, primary=primary,
    )


def primary_context(ordinal: int) -> Context:
    """Device `ordinal`'s primary context, retained once per process (never made current here)."""
    ctx = _primary.get(ordinal)
    if ctx is not None:
        return ctx
    drv = driver()
    count = device_count()
    if not 0 <= ordinal < count:
        raise DriverError(f"there is no cuda:{ordinal}: {count} GPU{'s are' if count != 1 else ' is'} visible"
                          " (CUDA_VISIBLE_DEVICES chooses which)", 101, "CUDA_ERROR_INVALID_DEVICE")
    with _context_lock:
        ctx = _primary.get(ordinal)
        if ctx is None:
            dev = check(drv.cuDeviceGet(ordinal), f"cuDeviceGet({ordinal})")
            handle = check(drv.cuDevicePrimaryCtxRetain(dev), f"cuDevicePrimaryCtxRetain(cuda:{ordinal})")
            ctx = _contexts.get(int(handle)) or _describe(handle, ordinal, True)
            ctx.primary = True
            _contexts[ctx.key] = ctx
            _primary[ordinal] = ctx
    return ctx


def primary_contexts() -> tuple[int, ...]:
    """The handles of the primary contexts seen so far (the native path switches between them)."""
    return tuple(ctx.key for ctx in list(_primary.values()))


def _known(handle: Any, key: int) -> Context:
    """The description of the thread's current context `handle`, made once per context."""
    ctx = _contexts.get(key)
    if ctx is not None:
        return ctx
    drv = driver()
    ordinal = int(check(drv.cuCtxGetDevice(), "cuCtxGetDevice"))
    # Is it the device's primary context (made by PyTorch, say)? Only asked when that one is
    # active: retaining an inactive one would create it, device memory and all, to compare.
    state = drv.cuDevicePrimaryCtxGetState(check(drv.cuDeviceGet(ordinal), "cuDeviceGet"))
    if not state[0] and len(state) == 3 and state[2] and primary_context(ordinal).key == key:
        return _primary[ordinal]
    with _context_lock:
        ctx = _contexts.get(key)
        if ctx is None:
            ctx = _contexts[key] = _describe(handle, ordinal, False)
    return ctx


def _current() -> tuple[Any, int]:
    handle = check(driver().cuCtxGetCurrent(), "cuCtxGetCurrent")
    return handle, int(handle) if handle is not None else 0


def current_context(device: int | None = None) -> Context:
    """The calling thread's current context, making device `device`'s (default 0) primary
    context current when none is. Cheap after the first call on a thread."""
    handle, key = _current()
    if key == 0:
        ctx = primary_context(device or 0)
        check(driver().cuCtxSetCurrent(ctx.handle), "cuCtxSetCurrent")
    else:
        ctx = _known(handle, key)
    _tls.ctx = ctx
    return ctx


def launch_context(device: int | None) -> Context:
    """The context a launch on `device` runs in: the thread's current context when it is on
    that device, else the device's primary one (not made current: see `enter`). None, when
    no argument says where (no arrays, or only managed memory): the current context."""
    if device is None:
        return current_context()
    handle, key = _current()
    if key:
        ctx = _known(handle, key)
        if ctx.device == device:
            return ctx
    return primary_context(device)


def enter(ctx: Context) -> bool:
    """Makes `ctx` current for work that needs it; True when it was pushed (`leave` pops it).
    A thread with no current context keeps `ctx` current afterwards (nothing to restore)."""
    drv = driver()
    _handle, key = _current()
    if key == ctx.key:
        return False
    if key == 0:
        check(drv.cuCtxSetCurrent(ctx.handle), "cuCtxSetCurrent")
        return False
    check(drv.cuCtxPushCurrent(ctx.handle), f"cuCtxPushCurrent(cuda:{ctx.device})")
    return True


def leave() -> None:
    """Restores the context `enter` pushed over."""
    check(driver().cuCtxPopCurrent(), "cuCtxPopCurrent")


@contextlib.contextmanager
def on_context(ctx: Context) -> Iterator[Context]:
    """`with on_context(ctx):` runs the block with `ctx` current (module loads, allocations)."""
    pushed = enter(ctx)
    try:
        yield ctx
    finally:
        if pushed:
            leave()


_attributes: dict[tuple[int, str], int] = {}


def device_attribute(ctx: Context, name: str) -> int:
    """`CU_DEVICE_ATTRIBUTE_<NAME>` of the context's device, read once per device."""
    key = (ctx.device, name)
    value = _attributes.get(key)
    if value is None:
        drv = driver()
        which = getattr(drv.CUdevice_attribute, "CU_DEVICE_ATTRIBUTE_" + name.upper())
        dev = check(drv.cuDeviceGet(ctx.device), f"cuDeviceGet({ctx.device})")
        value = _attributes[key] = int(check(drv.cuDeviceGetAttribute(which, dev), f"cuDeviceGetAttribute({name})"))
    return value


class DeviceBuffer:
    """Raw device memory (cuMemAlloc) freed when the object is; used by `dsl.run_function`."""

    def __init__(self, nbytes: int):
        current_context()
        self.nbytes = nbytes
        self.ptr = int(check(driver().cuMemAlloc(max(1, nbytes)), f"cuMemAlloc({nbytes})"))

    def upload(self, data: Any) -> None:
        view = memoryview(data).cast("B")
        check(driver().cuMemcpyHtoD(self.ptr, view, view.nbytes), "cuMemcpyHtoD")

    def download(self, out: Any) -> None:
        view = memoryview(out).cast("B")
        check(driver().cuMemcpyDtoH(view, self.ptr, view.nbytes), "cuMemcpyDtoH")

    def free(self) -> None:
        if self.ptr:
            try:
                driver().cuMemFree(self.ptr)
            finally:
                self.ptr = 0

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:
            pass
