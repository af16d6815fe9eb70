"""Building an export into a shared library, and calling it from Python (`dsl.load_export`).

`load_export(DIR)` builds `lib<NAME>.so` from `NAME.c` with the C compiler (`$CC`, else
gcc) when it is missing or older than the source, loads it with ctypes and returns an
object with one callable per exported jit function. Those take what a jit function takes,
torch / CuPy / any DLPack or `__cuda_array_interface__` array for each tensor (read by
`dsl.runtime.dlpack`, as the Python launcher reads them) and `stream=` (else the arrays'
framework's current stream), fill the entry point's `kdsl_tensor`s and raise
`ExportCallError` with the entry point's own message when it returns an error.
"""

from __future__ import annotations

import ctypes
import inspect
import json
import os
import shlex
import struct
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dsl.diagnostics import ArgumentError
from dsl.export.c_types import DTYPE_CODES, MAX_RANK
from dsl.runtime.driver import DriverError

MANIFEST = "{base}.export.json"


class KdslTensor(ctypes.Structure):
    """`kdsl_tensor` of the exported header."""

    _fields_ = [("data", ctypes.c_uint64), ("dtype", ctypes.c_int32), ("rank", ctypes.c_int32),
                ("device", ctypes.c_int32), ("reserved", ctypes.c_int32), ("shape", ctypes.c_int64 * MAX_RANK),
                ("strides", ctypes.c_int64 * MAX_RANK)]


class ExportCallError(DriverError):
    """An exported entry point returned an error; the message is its `NAME_error_string()`."""


_C_TYPES = {
    "float": ctypes.c_float, "double": ctypes.c_double, "bool": ctypes.c_bool, "int8_t": ctypes.c_int8,
    "int16_t": ctypes.c_int16, "int32_t": ctypes.c_int32, "int64_t": ctypes.c_int64, "uint8_t": ctypes.c_uint8,
    "uint16_t": ctypes.c_uint16, "uint32_t": ctypes.c_uint32, "uint64_t": ctypes.c_uint64,
}


def build_command(source: Path, library: Path, debug: bool = False, nvtx: bool = False) -> list[str]:
    """How the library is built: the C compiler alone, no CUDA toolkit."""
    flags = (["-DKDSL_EXPORT_DEBUG"] if debug else []) + (["-DKDSL_EXPORT_NVTX"] if nvtx else [])
    return [os.environ.get("CC", "gcc"), "-std=c11", "-O2", "-shared", "-fPIC", *flags, "-o", str(library),
            str(source), "-ldl", "-lpthread", "-lm"]


def build_library(folder: str | os.PathLike, debug: bool = False, nvtx: bool = False) -> Path:
    """`lib<NAME>[-debug][-nvtx].so` in the export's folder, (re)built when older than its source."""
    folder = Path(folder)
    manifest = _manifest(folder)
    base = manifest["base"]
    source = folder / f"{base}.c"
    library = folder / f"lib{base}{'-debug' if debug else ''}{'-nvtx' if nvtx else ''}.so"
    return built_atomically(library, [source], lambda out: [build_command(source, out, debug, nvtx)])


def built_atomically(result: Path, sources: list[Path], commands: Callable[[Path], list[list[str]]]) -> Path:
    """`result`, made by `commands(a temporary path)` unless it is newer than every source; the
    temporary file (and an object file beside it) replaces it only once every command succeeded."""
    if result.exists() and all(result.stat().st_mtime >= s.stat().st_mtime for s in sources):
        return result
    fd, temporary = tempfile.mkstemp(prefix=f".{result.name}-", dir=result.parent)
    os.close(fd)
    work = Path(temporary)
    try:
        for command in commands(work):
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"building {result} failed:\n{shlex.join(command)}\n"
                                   f"{(done.stderr or done.stdout).strip()}")
        os.chmod(work, 0o755)  # mkstemp made it private
        os.replace(work, result)  # atomic: a process loading it meanwhile sees the old or the new one
    finally:
        for leftover in (work, Path(f"{work}.o")):
            if leftover.exists():
                leftover.unlink()
    return result


def _manifest(folder: Path) -> dict[str, Any]:
    found = sorted(folder.glob(MANIFEST.format(base="*")))
    if len(found) != 1:
        what = "no" if not found else f"{len(found)}"
        raise FileNotFoundError(f"{folder} holds {what} kdsl exports ({MANIFEST.format(base='NAME')}); "
                                "`kdsl export ... -o DIR` writes one")
    return json.loads(found[0].read_text())


class LoadedExport:
    """The exported functions of one library, by their jit names and their C names."""

    def __init__(self, library: Path, manifest: dict[str, Any]):
        self.library = library
        self._lib = ctypes.CDLL(str(library))
        error = getattr(self._lib, f"{manifest['base']}_error_string")
        error.restype = ctypes.c_char_p
        error.argtypes = []
        self.error_string = lambda: (error() or b"").decode(errors="replace")
        self.functions: dict[str, ExportedFunction] = {}
        for spec in manifest["functions"]:
            fn = ExportedFunction(self._lib, spec, self.error_string)
            self.functions[spec["jit"]] = self.functions[spec["name"]] = fn
            setattr(self, spec["jit"], fn)
            setattr(self, spec["name"], fn)

    def __repr__(self) -> str:
        return f"<kdsl export {self.library} ({', '.join(sorted(set(f.name for f in self.functions.values())))})>"


class ExportedFunction:
    """One entry point, called with arrays and Python numbers."""

    def __init__(self, lib: Any, spec: dict[str, Any], error_string: Any):
        self.name = spec["name"]
        self.params = spec["params"]
        self.written = set(spec.get("written", []))
        self.error_string = error_string
        self._c = getattr(lib, self.name)
        self._c.restype = ctypes.c_int
        self._c.argtypes = [ctypes.c_void_p] + [ctypes.POINTER(KdslTensor) if p["kind"] == "tensor"
                                                else _C_TYPES[p["ctype"]] for p in self.params]
        self.signature = inspect.Signature([
            inspect.Parameter(p["name"], inspect.Parameter.POSITIONAL_OR_KEYWORD,
                              default=inspect.Parameter.empty if p["default"] is None else p["default"])
            for p in self.params])

    def __call__(self, *args: Any, stream: Any = None, **kwargs: Any) -> None:
        from dsl.runtime.streams import FRAMEWORK_STREAMS, stream_handle

        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        values: list[Any] = []
        keep: list[KdslTensor] = []
        framework, device = None, None
        for p in self.params:
            value = bound.arguments[p["name"]]
            if p["kind"] == "tensor":
                tensor, fw = _tensor(value, p["name"], p["name"] in self.written)
                framework, device = framework or fw, tensor.device if device is None else device
                keep.append(tensor)
                values.append(ctypes.byref(tensor))
            else:
                values.append(_scalar(value, p["name"], p["ctype"]))
        if stream is None:
            handle = FRAMEWORK_STREAMS[framework](device) if framework in FRAMEWORK_STREAMS else 0
        else:
            handle = stream_handle(stream)
        result = self._c(handle or None, *values)
        if result:
            raise ExportCallError(self.error_string(), result)

    def __repr__(self) -> str:
        return f"<exported {self.name}{self.signature}>"


def _tensor(value: Any, name: str, written: bool) -> tuple[KdslTensor, str | None]:
    from dsl.runtime.dlpack import describe
    from dsl.runtime.pointers import device_memory

    try:
        ptr, shape, strides, dtype, device, framework, readonly = describe(value)
    except ArgumentError as err:
        raise ArgumentError(f"argument '{name}' {err}") from None
    if len(shape) > MAX_RANK:
        raise ArgumentError(f"argument '{name}' has rank {len(shape)}; exported entry points take at most {MAX_RANK}")
    if readonly and written:
        raise ArgumentError(f"argument '{name}' is a read-only array, but a kernel writes it; pass a writable array")
    if device is None and ptr:  # __cuda_array_interface__ does not say which device: the driver does
        device = device_memory(ptr, name)
    t = KdslTensor(ptr, DTYPE_CODES[dtype.name], len(shape), device or 0, 0)
    for k, (s, st) in enumerate(zip(shape, strides)):
        t.shape[k], t.strides[k] = s, st
    return t, framework


_INT_BITS = {"int8_t": (True, 8), "int16_t": (True, 16), "int32_t": (True, 32), "int64_t": (True, 64),
             "uint8_t": (False, 8), "uint16_t": (False, 16), "uint32_t": (False, 32), "uint64_t": (False, 64)}


def _scalar(value: Any, name: str, ctype: str) -> Any:
    """A Python number for a C scalar parameter, taken as the Python launcher takes it (a value
    its type cannot hold is refused, not wrapped around or rounded to infinity)."""
    item = getattr(value, "item", None)
    if item is not None and not isinstance(value, int | float):
        value = item()
    if ctype in ("float", "double"):
        if isinstance(value, int | float):
            if ctype == "float":
                try:
                    struct.pack("<f", value)
                except OverflowError:
                    raise ArgumentError(f"argument '{name}' is {value!r}, too large for a 32-bit float") from None
            return float(value)
    elif ctype == "bool":
        if isinstance(value, bool):
            return value
    elif isinstance(value, int):
        signed, bits = _INT_BITS[ctype]
        lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
        if not lo <= value <= hi:
            raise ArgumentError(f"argument '{name}' is {value}, outside the {ctype} range {lo}..{hi}")
        return int(value)
    kind = "float" if ctype in ("float", "double") else "bool" if ctype == "bool" else "int"
    raise ArgumentError(f"argument '{name}' must be a {kind} for a {ctype} parameter, not "
                        f"{type(value).__name__} ({value!r})")


def load_export(folder: str | os.PathLike, *, debug: bool = False, nvtx: bool = False) -> LoadedExport:
    """Loads the library that `kdsl export ... -o folder` describes, building it first if needed.

    `debug=True` builds with `KDSL_EXPORT_DEBUG` (synchronize and check after every launch),
    `nvtx=True` with `KDSL_EXPORT_NVTX` (an NVTX range around each launch)."""
    library = build_library(folder, debug, nvtx)
    return LoadedExport(library, _manifest(Path(folder)))
