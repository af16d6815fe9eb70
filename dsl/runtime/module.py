"""Loading a compiled function's kernels into a CUDA context, once per context.

One context per device in practice (its primary context, or the caller's own), so each GPU
of a host gets its own module, loaded lazily by the first launch there, with that device
made current for the load (`driver.on_context`). Loads and function lookups happen under
the image's lock, once each; launches read the loaded handles without one.

The cubin from ptxas is loaded with `cuModuleLoadData`. If the driver rejects it (a cubin
from a newer ptxas than the driver knows, or one built for another architecture), the
PTX is loaded instead and the driver compiles it. Kernels asking for more than 48 KiB of
dynamic shared memory get `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` raised to what
the launch needs; anything beyond the device's opt-in maximum is refused before launching.
"""

from __future__ import annotations

import threading
from typing import Any

from dsl.runtime.driver import Context, DriverError, check, driver, on_context

# Errors after which loading the PTX (driver JIT) may succeed where the cubin did not.
_RETRY_WITH_PTX = {
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "CUDA_ERROR_NO_BINARY_FOR_GPU", "CUDA_ERROR_INVALID_IMAGE",
    "CUDA_ERROR_INVALID_PTX", "CUDA_ERROR_INVALID_SOURCE", "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED",
}
DEFAULT_SMEM_LIMIT = 48 * 1024
_smem_lock = threading.Lock()  # one thread at a time raises a kernel's shared-memory limit


class LoadedFunction:
    """A kernel's handle in one context and the dynamic shared memory it is allowed."""

    __slots__ = ("address", "ctx", "handle", "smem_allowed", "static_smem", "symbol")

    def __init__(self, handle: Any, symbol: str, static_smem: int, ctx: Context):
        self.handle = handle
        self.address = int(handle)  # the raw CUfunction, for the native launch path
        self.symbol = symbol
        self.static_smem = static_smem
        self.smem_allowed = DEFAULT_SMEM_LIMIT - static_smem
        self.ctx = ctx

    def max_dynamic_smem(self) -> int:
        """The most dynamic shared memory a launch may ask for on this device."""
        return self.ctx.smem_optin - self.static_smem

    def allow_smem(self, smem: int) -> None:
        """Raises the kernel's dynamic shared-memory limit to `smem` (caller checked the max);
        never lowers it, whichever thread asks first."""
        drv = driver()
        with _smem_lock:
            if smem <= self.smem_allowed:
                return
            check(drv.cuFuncSetAttribute(
                self.handle, drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem),
                f"cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES={smem}) for '{self.symbol}'")
            self.smem_allowed = smem


class ModuleImage:
    """The binary of one compiled function, loaded lazily into each context that runs it."""

    def __init__(self, cubin: bytes | None, ptx: str | None, static_smem: dict[str, int] | None = None):
        self.cubin = cubin
        self.ptx = ptx
        self.static_smem = static_smem or {}
        self.loaded_from: dict[int, str] = {}  # ctx key -> "cubin" | "ptx"
        self._modules: dict[int, Any] = {}
        self._functions: dict[int, dict[str, LoadedFunction]] = {}
        self._lock = threading.Lock()

    def functions(self, ctx: Context) -> dict[str, LoadedFunction]:
        """symbol -> LoadedFunction in `ctx`, loading the module on first use."""
        funcs = self._functions.get(ctx.key)
        if funcs is None:
            with self._lock:
                funcs = self._functions.get(ctx.key)
                if funcs is None:
                    with on_context(ctx):  # cuModuleLoadData loads into the current context
                        self._modules[ctx.key] = self._load(ctx)
                    funcs = self._functions[ctx.key] = {}
        return funcs

    def function(self, ctx: Context, symbol: str) -> LoadedFunction:
        """Kernel `symbol` in `ctx`: one `LoadedFunction` per context, whichever thread asks."""
        funcs = self.functions(ctx)
        fn = funcs.get(symbol)
        if fn is None:
            with self._lock:
                fn = funcs.get(symbol)
                if fn is None:
                    handle = check(driver().cuModuleGetFunction(self._modules[ctx.key], symbol.encode()),
                                   f"cuModuleGetFunction('{symbol}')")
                    fn = funcs[symbol] = LoadedFunction(handle, symbol, self._static_smem(handle, symbol), ctx)
        return fn

    def _static_smem(self, handle: Any, symbol: str) -> int:
        drv = driver()
        try:
            return int(check(drv.cuFuncGetAttribute(
                drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, handle), "cuFuncGetAttribute"))
        except DriverError:
            return self.static_smem.get(symbol, 0)

    def _load(self, ctx: Context) -> Any:
        drv = driver()
        first_error: DriverError | None = None
        if self.cubin:
            err, module = drv.cuModuleLoadData(self.cubin)
            if not err:
                self.loaded_from[ctx.key] = "cubin"
                return module
            try:
                check((err,), "cuModuleLoadData(cubin)")
            except DriverError as exc:
                first_error = exc
            if first_error.name not in _RETRY_WITH_PTX or not self.ptx:
                raise first_error
        if not self.ptx:
            raise DriverError("the compiled function has neither a cubin nor PTX to load")
        try:
            module = check(drv.cuModuleLoadData(self.ptx.encode() + b"\0"), "cuModuleLoadData(PTX, driver JIT)")
        except DriverError as exc:
            if first_error is not None:
                raise DriverError(f"{first_error}; then {exc}", exc.code, exc.name) from None
            raise
        self.loaded_from[ctx.key] = "ptx"
        return module

