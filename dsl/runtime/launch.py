"""The runtime object `rt` that a generated launcher binds: argument reader, kernel launches.

A generated launcher (the `launcher` stage) binds, once per jit specialization:

    _read_args = rt.arg_reader((('x', 'f32', 1), ('a', 'f32', None)))
    _launch_saxpy = rt.kernel('saxpy', ('ptr', 'i32', 'f32', 'i32'))

and then, per call:

    x_ptr, x_shape, x_strides, a, stream = _read_args(x, a, stream)
    _launch_saxpy((gx, 1, 1), (256, 1, 1), 0, stream, x_ptr, x_shape[0], a, x_shape[0])

Kernel parameters go into a buffer owned by each kernel (and thread, in Python), one
8-byte slot per parameter (128 bytes for a TMA tensor map), with a `void**` array pointing
at the slots; `cuLaunchKernel`
copies them at launch. Every CUresult is checked: a failure raises `LaunchError` (DSL601)
naming the kernel, grid, block and shared memory and pointing at the `.launch(...)` call.

Before any launch, the reader checks every argument against the specialization and
against what the kernels do with it (the launcher's `TENSOR_ACCESS`: alignment, writes),
checks that all arrays are on one device (`devices.py`; two arrays on different devices
are refused naming both, before any driver call), asks the driver about every pointer that
does not come from PyTorch (`pointers.py`: device or managed memory only, cached per
allocation) and checks `stream=` (`streams.py`). `KDSL_NVTX=1` wraps each launch in an
NVTX range named after the kernel, when the `nvtx` package (or PyTorch) provides NVTX.

Devices: the launch runs on the device its arrays are on, in that device's context
(`driver.launch_context`: the thread's current one when it is on that device, else the
primary one, pushed for the launch and popped after), with that device's loaded module
(one per context, loaded on first use there), limits and current torch / CuPy stream. The
reader notes the device per thread (in C, `_fastpath.device()`, for the native path too);
the launches that follow in the same launcher call read it. On a host whose GPUs differ in
architecture, a specialization takes only the devices it was compiled for: another one is
an ArgumentError, which sends the jit call to the specialization for that architecture.
"""

from __future__ import annotations

import ctypes
import functools
import os
import struct
import sys
import threading
from typing import Any

from dsl.diagnostics import SourceRange
from dsl.language.types import SCALAR_TYPES
from dsl.runtime import devices, torch_tensors
from dsl.runtime import driver as _driver_mod
from dsl.runtime.dlpack import ArgumentError, check_tensor, torch_dtypes, torch_fast
from dsl.runtime.driver import DriverError, LaunchError, NoGPUError, driver
from dsl.runtime.module import DEFAULT_SMEM_LIMIT, ModuleImage
from dsl.runtime.native import fastpath
from dsl.runtime.pointers import device_memory
from dsl.runtime.streams import FRAMEWORK_STREAMS, STREAM_MAX, stream_handle
from dsl.runtime.streams import torch_stream as _torch_stream  # noqa: F401  (kept importable from here)

_FORMATS = {
    "ptr": "Q", "i32": "i", "f32": "f", "i64": "q", "f64": "d", "u32": "I", "f16": "e", "bf16": "H",
    "bool": "?", "i8": "b", "i16": "h", "u8": "B", "u16": "H", "u64": "Q", "index": "q",
}
_INT_CODES = {"i32", "i64", "u32", "i8", "i16", "u8", "u16", "u64", "index", "bool"}
_FLOAT_CODES = {"f32", "f64", "f16", "bf16"}


def _bf16_bits(value: float) -> int:
    """Round-to-nearest-even bfloat16 bits of a Python float."""
    (bits,) = struct.unpack("<I", struct.pack("<f", value))
    if (bits & 0x7F800000) == 0x7F800000 and bits & 0x7FFFFF:  # NaN stays NaN
        return (bits >> 16) | 0x40
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


class ArgPacker:
    """One kernel's parameter buffer and `void**` array, filled with one `pack_into`."""

    __slots__ = ("address", "bf16", "buf", "codes", "ptrs", "struct")

    def __init__(self, codes: tuple[str, ...]):
        fmt, offsets, at = "<", [], 0
        for code in codes:
            if code == "tmap":  # a TMA tensor map: its 128 bytes, 64-byte aligned
                c, size, align = "128s", 128, 64
            elif code in _FORMATS:
                c, size, align = _FORMATS[code], 8, 8
            else:
                raise ArgumentError(f"unknown kernel parameter type code {code!r}")
            fmt += "x" * (-at % align)
            at += -at % align
            offsets.append(at)
            fmt += c + "x" * (size - struct.calcsize("<" + c))
            at += size
        self.codes = codes
        self.struct = struct.Struct(fmt)
        self.buf = (ctypes.c_char * max(8, self.struct.size))()
        base = ctypes.addressof(self.buf)
        n = len(codes)
        self.ptrs = (ctypes.c_void_p * max(1, n))(*[base + offset for offset in offsets])
        self.address = ctypes.addressof(self.ptrs)
        self.bf16 = tuple(i for i, c in enumerate(codes) if c == "bf16")

    def pack(self, values: tuple | list) -> int:
        if self.bf16:
            values = list(values)
            for i in self.bf16:
                values[i] = _bf16_bits(float(values[i]))
        self.struct.pack_into(self.buf, 0, *values)
        return self.address


def _nvtx_ranges() -> tuple[Any, Any] | None:
    if os.environ.get("KDSL_NVTX", "") not in ("1", "true", "yes"):
        return None
    try:
        import nvtx  # type: ignore[import-not-found]

        return nvtx.push_range, nvtx.pop_range
    except ImportError:
        torch = sys.modules.get("torch")
        if torch is not None:
            return torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop
    return None


_single_device: bool | None = None


def _context(device: int | None) -> Any:
    """The context a launch on `device` runs in (`driver.launch_context`). With one GPU
    visible: the one this thread found current before, without asking the driver again."""
    if single_device():
        ctx = getattr(_driver_mod._tls, "ctx", None)
        return ctx if ctx is not None else _driver_mod.current_context(device)
    return _driver_mod.launch_context(device)


def _torch_tensor() -> Any:
    """torch.Tensor when torch is imported (kdsl never imports it)."""
    torch = sys.modules.get("torch")
    return torch.Tensor if torch is not None else None


def single_device() -> bool:
    """Whether one GPU is visible (then every CUDA tensor is on the current context's device,
    and a launch never switches contexts)."""
    global _single_device
    if _single_device is None:
        _single_device = _driver_mod.device_count() == 1
    return _single_device


def _nbytes(dtype: str) -> int:
    t = SCALAR_TYPES.get(dtype)
    return t.nbytes if t is not None else 1


_SCALAR_KINDS = {**{c: "float" for c in _FLOAT_CODES}, **{c: "int" for c in _INT_CODES}, "bool": "bool"}


class Runtime:
    """What a generated launcher binds; one per compiled specialization.

    `arg_reader` and `kernel` return the two callables a launcher uses per call. With the
    native path (`_fastpath.c`) they are C methods that take the common case (PyTorch
    tensors, plain scalars, a kernel already loaded in this thread) and hand anything else
    to the Python methods below, which check everything and explain what is wrong.
    """

    def __init__(self, image: ModuleImage, launch_ranges: dict[str, SourceRange] | None = None, name: str = "",
                 access: dict[str, tuple] | None = None, *, arch: str | None = None):
        self.image = image
        self.name = name
        self.launch_ranges = launch_ranges or {}
        self.access = access or {}  # the launcher's TENSOR_ACCESS: tensor -> (align, needed by, written by)
        self.arch = arch  # the architecture it was compiled for
        # On a host of mixed architectures, the devices of `arch` (None: any device).
        archs = devices.visible_archs() if arch is not None and devices.mixed_architectures() else ()
        self._accept = frozenset(i for i, a in enumerate(archs) if a == arch) if archs else None
        self._functions: dict[tuple[int, str], Any] = {}
        self._nvtx = _nvtx_ranges()
        self._call = threading.local()  # what one call found out: its device, framework, packers
        self._drv: Any = None  # cuda.bindings.driver, once a kernel is loaded
        self._attributes: dict[tuple[int, str], int] = {}

    # -- per-thread state: the launcher reads the arguments, then launches, in one thread ------

    @property
    def _device(self) -> int | None:
        return getattr(self._call, "device", None)

    @_device.setter
    def _device(self, value: int | None) -> None:
        self._call.device = value
        self._call.device_arg = None  # no argument put it there

    def _launch_device(self) -> int | None:
        """The device of this thread's current launcher call, as its argument reader found it."""
        if fastpath is not None:
            device = fastpath.device()
            return device if device >= 0 else None
        return self._device

    @property
    def _framework(self) -> str | None:
        return getattr(self._call, "framework", None)

    @_framework.setter
    def _framework(self, value: str | None) -> None:
        self._call.framework = value

    def _packer(self, symbol: str, codes: tuple) -> ArgPacker:
        """This thread's parameter buffer for `symbol` (freed with the thread)."""
        packers = getattr(self._call, "packers", None)
        if packers is None:
            packers = self._call.packers = {}
        packer = packers.get(symbol)
        if packer is None:
            packer = packers[symbol] = ArgPacker(codes)
        return packer

    # -- what a generated launcher binds ------------------------------------------------------

    def arg_reader(self, params: tuple) -> Any:
        """`read(*args, stream)` for one specialization: checks each argument against
        `params` ((name, dtype, rank) for tensors, (name, dtype, None) for scalars) and returns
        (ptr, shape, strides) per tensor, each scalar, then the raw stream handle."""
        read = functools.partial(self._read_args, params)
        if fastpath is None:
            return read
        torch = sys.modules.get("torch")
        native_torch = torch is not None  # the C reader knows PyTorch tensors only
        torch_dtype = torch_dtypes()
        # per tensor: the bytes its pointer and outer strides must be multiples of, its element size
        entries = tuple(
            ("tensor", torch_dtype.get(dtype), rank, self._alignment(name, dtype), _nbytes(dtype))
            if rank is not None and native_torch else ("other", None, 0, 1, 1) if rank is not None
            else (_SCALAR_KINDS.get(dtype, "other"), None, 0, 1, 1)
            for name, dtype, rank in params)
        if native_torch and any(e[0] == "tensor" and e[1] is None for e in entries):
            native_torch = False  # a dtype this torch build lacks: Python explains the mismatch
        raw_stream = getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None) if torch else None
        accept = None
        if self._accept is not None:
            accept = bytes(i in self._accept for i in range(len(devices.visible_archs())))
        try:
            single = single_device()  # then a CUDA tensor is on cuda:0: the C reader need not ask
        except NoGPUError:
            single = False
        if native_torch:
            torch_tensors.install()  # the C++ reader of tensor layouts, once built (in the background)
        return fastpath.ArgReader(entries, torch.Tensor if native_torch else None, raw_stream, read, accept,
                                  single).read

    def kernel(self, symbol: str, codes: tuple, cluster: tuple | None = None) -> Any:
        """`launch(grid, block, smem, stream, *params)` for one kernel of this module."""
        if fastpath is not None and cluster is None and "tmap" not in codes:
            fallback = functools.partial(self._launch_native_fallback, symbol, codes)
            return fastpath.Kernel(codes, fallback, functools.partial(self._report, symbol)).launch

        def launch(grid: tuple, block: tuple, smem: int, stream: int, *values: Any) -> None:
            self._launch(symbol, grid, block, smem, stream, cluster, codes, values)

        return launch

    # -- arguments ----------------------------------------------------------------------------

    def _read_args(self, params: tuple, *args: Any) -> tuple:
        self._device = None
        self._framework = None
        out: list[Any] = []
        pending: list[tuple[str, int, bool]] = []  # pointers the driver is asked about once all arrays agree
        try:
            for (name, dtype, rank), value in zip(params, args):
                if rank is None:
                    out.append(self.scalar_arg(value, name, dtype))
                else:
                    out.extend(self.tensor_arg(value, name, dtype, rank, pending))
        except ArgumentError:
            # a host array next to GPU ones is refused as arrays on two devices, naming both
            mixed = devices.mixed_error((name, value) for (name, _, rank), value in zip(params, args)
                                        if rank is not None)
            if mixed is not None:
                raise mixed from None
            raise
        for name, ptr, placed in pending:
            ordinal = device_memory(ptr, name)
            if not placed and ordinal is not None:
                self._note_device(name, ordinal)
        device = self._device
        if self._accept is not None and device is not None and device not in self._accept:
            archs = devices.visible_archs()
            raise ArgumentError(f"this specialization of '{self.name}' is compiled for {self.arch}, but its "
                                f"arguments are on cuda:{device}, an {archs[device] if device < len(archs) else '?'}")
        if fastpath is not None:
            fastpath.set_device(-1 if device is None else device)
        stream = args[len(params)]
        if stream is None:
            fw = self._framework
            out.append(FRAMEWORK_STREAMS[fw](device) if fw is not None else 0)
        elif type(stream) is int and 0 <= stream <= STREAM_MAX:
            out.append(stream)
        else:
            on = devices.stream_device(stream)
            if on is not None and device is not None and on != device:
                raise ArgumentError(f"stream= is a stream of cuda:{on}, but the arrays are on cuda:{device}; a "
                                    f"launch runs on its arrays' GPU: pass a stream of cuda:{device}")
            out.append(stream_handle(stream))
        return tuple(out)

    def _note_device(self, name: str, device: int) -> None:
        """Records that tensor `name` is on `device`; one on another device than an earlier
        tensor is refused, naming both."""
        if self._device is None:
            self._call.device = device
            self._call.device_arg = name
        elif device != self._device:
            first = getattr(self._call, "device_arg", None)
            if first is None:
                raise ArgumentError(f"argument '{name}' is on cuda:{device}, but the launch runs on "
                                    f"cuda:{self._device}")
            raise devices.mixed_devices((first, self._device), (name, device))

    def _alignment(self, name: str, dtype: str) -> int:
        """Bytes the data pointer of tensor `name` must be a multiple of (at least its element size)."""
        access = self.access.get(name)
        return max(access[0] if access else 1, _nbytes(dtype))

    def tensor_arg(self, value: Any, name: str, dtype: str, rank: int,
                   pending: list[tuple[str, int, bool]] | None = None) -> tuple:
        """(ptr, shape, strides) of tensor argument `name`, checked. A pointer the driver must
        vouch for is asked about here, or appended to `pending` (with whether the array said
        its device) for the caller to ask once every argument is read."""
        access = self.access.get(name)
        if type(value) is _torch_tensor():
            fast = torch_fast(value, dtype, rank, self._alignment(name, dtype))
            if fast is not None and (self._device is None or fast[3] == self._device):
                self._note_device(name, fast[3])
                self._framework = "torch"
                return fast[:3]
        ptr, shape, strides, dev, fw = check_tensor(value, name, dtype, rank, None, access)
        if dev is not None:
            self._note_device(name, dev)
        if fw != "torch" and ptr and all(shape):  # a CUDA tensor is device memory; others: ask the driver
            if pending is not None:
                pending.append((name, ptr, dev is not None))
            else:
                ordinal = device_memory(ptr, name)
                if dev is None and ordinal is not None:
                    self._note_device(name, ordinal)
        if fw is not None:
            self._framework = fw
        return ptr, shape, strides

    def scalar_arg(self, value: Any, name: str, code: str) -> Any:
        tp = type(value)
        if code in _FLOAT_CODES:
            if tp is float or tp is int:
                return value
        elif code == "bool":
            if tp is bool:
                return value
        elif code in _INT_CODES:
            if tp is int or tp is bool:
                return int(value)
        return self._convert_scalar(value, name, code)

    def _convert_scalar(self, value: Any, name: str, code: str) -> Any:
        # numpy / torch scalars and 0-d arrays
        item = getattr(value, "item", None)
        if item is not None and not isinstance(value, int | float):
            try:
                value = item()
            except Exception:
                pass
        if code in _FLOAT_CODES and isinstance(value, int | float):
            return float(value)
        if code in _INT_CODES and isinstance(value, int):
            return int(value)
        if code in _INT_CODES and isinstance(value, float) and value.is_integer():
            raise ArgumentError(f"argument '{name}' is a float ({value!r}) but the parameter is {code}; "
                                "pass an int")
        raise ArgumentError(f"argument '{name}' must be a {'float' if code in _FLOAT_CODES else 'int'} "
                            f"for a {code} parameter, not {type(value).__name__} ({value!r})")

    # -- launching ----------------------------------------------------------------------------

    def _launch_native_fallback(self, symbol: str, codes: tuple, native: Any, grid: tuple, block: tuple,
                                smem: int, stream: int, values: tuple) -> None:
        """What the C launch does not take; arms it for the next launches when it can."""
        fn = self._launch(symbol, grid, block, smem, stream, None, codes, values)
        if fn is not None and self._nvtx is None and fn.ctx.primary:
            fastpath.set_primary_contexts(_driver_mod.primary_contexts())
            native.arm(fn.ctx.device, fn.ctx.key, fn.address, fn.smem_allowed)

    def _report(self, symbol: str, err: int, grid: tuple, block: tuple, smem: int) -> None:
        self._raise_launch_error(self._drv.CUresult(err), symbol, grid, block, smem)

    def _launch(self, symbol: str, grid: tuple, block: tuple, smem: int, stream: int,
                cluster: tuple | None, codes: tuple, values: tuple) -> Any:
        """One launch with every check; returns the loaded function, None for an empty grid.
        `stream` is the raw handle the argument reader resolved."""
        ctx = _context(self._launch_device())
        fn = self._functions.get((ctx.key, symbol))
        if fn is None:
            fn = self._load(ctx, symbol, grid, block, smem)
        try:
            gx, gy, gz = (int(g) for g in grid)
            block = tuple(int(b) for b in block)
            smem = int(smem)
        except (TypeError, ValueError) as exc:
            raise self._error(f"grid, block and smem must be ints: {exc}", symbol, grid, block, smem) from None
        if gx <= 0 or gy <= 0 or gz <= 0:
            if gx == 0 or gy == 0 or gz == 0:
                return None  # an empty grid: nothing to do (e.g. a zero-size tensor)
            raise self._error("grid dimensions must be positive", symbol, grid, block, smem)
        if smem > fn.smem_allowed:
            self._grow_smem(fn, symbol, grid, block, smem)
        try:
            params = self._packer(symbol, codes).pack(values)
        except (struct.error, TypeError, OverflowError) as err:
            raise self._error(f"a kernel argument does not fit its parameter type "
                              f"({', '.join(codes)}): {err}", symbol, grid, block, smem) from None
        nvtx = self._nvtx
        if nvtx is not None:
            nvtx[0](symbol)
        pushed = not _single_device and _driver_mod.enter(ctx)  # another device's context was current
        try:
            try:
                if cluster is None:
                    (err,) = self._drv.cuLaunchKernel(fn.handle, gx, gy, gz, block[0], block[1], block[2],
                                                      smem, stream, params, 0)
                else:
                    err = self._launch_cluster(fn, (gx, gy, gz), block, smem, stream, params, cluster)
            except (OverflowError, TypeError, ValueError) as exc:
                raise self._error(str(exc), symbol, grid, block, smem) from None
        finally:
            if pushed:
                _driver_mod.leave()
            if nvtx is not None:
                nvtx[1]()
        if err:
            self._raise_launch_error(err, symbol, grid, block, smem)
        return fn

    def device_attribute(self, name: str) -> int:
        """`dsl.device_attribute(name)` in a launcher: of the device the arguments are on,
        read from the driver once per context."""
        ctx = _context(self._launch_device())
        value = self._attributes.get((ctx.key, name))
        if value is None:
            value = self._attributes[(ctx.key, name)] = _driver_mod.device_attribute(ctx, name)
        return value

    @staticmethod
    def trunc_div(a: int, b: int) -> int:
        """Integer `//` of the DSL (truncating, like the IR's divsi) where an operand may be
        negative; launchers use Python's `//` where both are known non-negative."""
        if b == 0:
            raise ArgumentError("integer division by zero in the jit function's launch arithmetic")
        q = abs(a) // abs(b)
        return q if (a < 0) == (b < 0) else -q

    @staticmethod
    def trunc_mod(a: int, b: int) -> int:
        """Integer `%` of the DSL: the remainder of `trunc_div`, with the sign of `a`."""
        return a - b * Runtime.trunc_div(a, b)

    @staticmethod
    def cdiv(a: int, b: int) -> int:
        """`dsl.cdiv` as the IR computes it, `(a + b - 1) // b` with the DSL's `//`."""
        return Runtime.trunc_div(a + b - 1, b)

    @staticmethod
    def tensor_map(ptr: int, shape: Any, strides: Any, dtype: str, box: tuple, swizzle: int) -> bytes:
        """`dsl.tensor_map(...)` in a launcher: the encoded map for this call's tensor."""
        from dsl.runtime.tensor_maps import tensor_map

        return tensor_map(ptr, shape, strides, dtype, box, swizzle)

    @staticmethod
    def argument_error(message: Any) -> ArgumentError:
        """What a failing run-time `assert` of the jit function raises: the user's message."""
        return ArgumentError(str(message))

    def check_smem(self, symbol: str, grid: tuple, block: tuple, smem: int, required: int) -> None:
        """Refuses a run-time `smem=` below what the kernel's shared arrays need (DSL205)."""
        if smem < required:
            raise LaunchError(f"launch smem={smem} is less than the {required} bytes allocated by SharedAllocator "
                              f"in kernel '{symbol}'", kernel=symbol, grid=grid, block=block, smem=smem,
                              range=self.launch_ranges.get(symbol), diagnostic_code="DSL205")

    def check_block(self, symbol: str, grid: tuple, block: tuple, known: tuple) -> None:
        """Refuses a run-time block that breaks the kernel's `known_block_size` (DSL202): the
        kernel was compiled for exactly that block, so any other would compute wrong indices."""
        if tuple(block) != known:
            from dsl.frontend.static_checks import contract_message

            axis = next(i for i in range(3) if block[i] != known[i])
            raise LaunchError(contract_message(symbol, axis, block[axis], known[axis]), kernel=symbol, grid=grid,
                              block=block, smem=0, range=self.launch_ranges.get(symbol), diagnostic_code="DSL202")

    def _raise_launch_error(self, err: Any, symbol: str, grid: tuple, block: tuple, smem: int) -> None:
        name, text = _driver_mod.error_text(err)
        raise self._error(f"{name}" + (f" ({text})" if text else ""), symbol, grid, block, smem, int(err), name)

    def _load(self, ctx: Any, symbol: str, grid: tuple, block: tuple, smem: int) -> Any:
        self._drv = driver()
        try:
            fn = self.image.function(ctx, symbol)
        except DriverError as err:
            raise self._error(str(err), symbol, grid, block, smem, err.code, err.name) from None
        self._functions[(ctx.key, symbol)] = fn
        return fn

    def _grow_smem(self, fn: Any, symbol: str, grid: tuple, block: tuple, smem: int) -> None:
        limit = fn.max_dynamic_smem()
        if smem > limit:
            raise self._error(
                f"{smem} bytes of dynamic shared memory requested, but {fn.ctx.name} allows at most {limit} "
                f"per block for this kernel ({fn.ctx.smem_optin} opt-in maximum, {fn.static_smem} static)",
                symbol, grid, block, smem)
        if smem > DEFAULT_SMEM_LIMIT - fn.static_smem:
            try:
                with _driver_mod.on_context(fn.ctx):
                    fn.allow_smem(smem)
            except DriverError as err:
                raise self._error(str(err), symbol, grid, block, smem, err.code, err.name) from None

    def _launch_cluster(self, fn: Any, grid: tuple, block: tuple, smem: int, stream: int, params: int,
                        cluster: tuple) -> Any:
        drv = self._drv
        cluster = tuple(cluster) + (1,) * (3 - len(cluster))
        config = drv.CUlaunchConfig()
        config.gridDimX, config.gridDimY, config.gridDimZ = grid
        config.blockDimX, config.blockDimY, config.blockDimZ = block
        config.sharedMemBytes = smem
        config.hStream = drv.CUstream(stream)
        attr = drv.CUlaunchAttribute()
        attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster
        config.attrs = [attr]
        config.numAttrs = 1
        (err,) = drv.cuLaunchKernelEx(config, fn.handle, params, 0)
        return err

    def _error(self, message: str, symbol: str, grid: tuple, block: tuple, smem: int, code: int = 0,
               name: str = "") -> LaunchError:
        return LaunchError(message, kernel=symbol, grid=grid, block=block, smem=smem, code=code, name=name,
                           range=self.launch_ranges.get(symbol))
