"""The CUDA driver API through `cuda-bindings`: initialisation, contexts, errors.

Everything that touches the GPU goes through `check()`, so no CUresult is ever ignored.
Initialisation is lazy: importing `dsl` never needs a GPU. Where no NVIDIA driver can be
loaded (or it sees no device), `driver()` raises `NoGPUError` with a plain explanation.

Contexts: kdsl uses the CUDA *primary* context of a device, the one PyTorch, CuPy and the
runtime API use, so arrays from those libraries are valid in kdsl launches and the other
way round. When a context is already current on the calling thread it is used as is.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from typing import Any

from dsl.diagnostics import Diagnostic, SourceRange


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
            _init_error = NoGPUError(_NO_DRIVER.format(detail=f"{type(exc).__name__}: {exc}"))
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

    @property
    def arch(self) -> str:
        return f"sm_{self.cc[0]}{self.cc[1]}"


_contexts: dict[int, Context] = {}
_primary: dict[int, Any] = {}
_tls = threading.local()


def _describe(handle: Any, key: int) -> Context:
    drv = driver()
    dev = check(drv.cuCtxGetDevice(), "cuCtxGetDevice")
    A = drv.CUdevice_attribute

    def attr(a: Any) -> int:
        return int(check(drv.cuDeviceGetAttribute(a, dev), f"cuDeviceGetAttribute({a.name})"))

    raw_name = check(drv.cuDeviceGetName(256, dev), "cuDeviceGetName")
    name = raw_name.split(b"\0", 1)[0].decode(errors="replace") if isinstance(raw_name, bytes) else str(raw_name)
    return Context(
        handle=handle, key=key, device=int(dev),
        cc=(attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR), attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)),
        smem_per_block=attr(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK),
        smem_optin=attr(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
        sm_count=attr(A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
        name=name,
    )


def current_context(device: int | None = None) -> Context:
    """The calling thread's current context, making device `device`'s (default 0) primary
    context current when none is. Cheap after the first call on a thread."""
    drv = driver()
    handle = check(drv.cuCtxGetCurrent(), "cuCtxGetCurrent")
    key = int(handle) if handle is not None else 0
    if key == 0:
        ordinal = device or 0
        handle = _primary.get(ordinal)
        if handle is None:
            with _lock:
                handle = _primary.get(ordinal)
                if handle is None:
                    dev = check(drv.cuDeviceGet(ordinal), f"cuDeviceGet({ordinal})")
                    handle = check(drv.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
                    _primary[ordinal] = handle
        check(drv.cuCtxSetCurrent(handle), "cuCtxSetCurrent")
        key = int(handle)
    ctx = _contexts.get(key)
    if ctx is None:
        ctx = _describe(handle, key)
        _contexts[key] = ctx
    _tls.ctx = ctx
    return ctx


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


_COMPUTE_CAPABILITY_MAJOR, _COMPUTE_CAPABILITY_MINOR = 75, 76  # CUdevice_attribute values


def current_arch() -> str | None:
    """The architecture (`sm_90`) of the current context's device (device 0 when no context
    is current), read from libcuda directly in well under a millisecond; None if that fails.

    A first call needs only this before it compiles, so importing cuda-bindings (~15 ms) can
    wait for the time ptxas runs. Failures are not reported here: `current_context()`, which
    every launch goes through, reports them.
    """
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    ctx, dev, major, minor = ctypes.c_void_p(), ctypes.c_int(0), ctypes.c_int(), ctypes.c_int()
    if lib.cuInit(0) or lib.cuCtxGetCurrent(ctypes.byref(ctx)):
        return None
    if lib.cuCtxGetDevice(ctypes.byref(dev)) if ctx.value else lib.cuDeviceGet(ctypes.byref(dev), 0):
        return None
    if (lib.cuDeviceGetAttribute(ctypes.byref(major), _COMPUTE_CAPABILITY_MAJOR, dev)
            or lib.cuDeviceGetAttribute(ctypes.byref(minor), _COMPUTE_CAPABILITY_MINOR, dev)):
        return None
    return f"sm_{major.value}{minor.value}"


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
