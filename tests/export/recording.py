"""Running an export's C and its Python launcher side by side on the CPU, recording launches.

The C entry point runs in a child process against `data/recording_cuda.c` (a stand-in
for libcuda.so.1 that writes each launch, with every parameter's bytes, to a log); the
Python launcher runs here against `RecordingRuntime`, which is kdsl's own `Runtime` (its
argument reader, `check_tensor`, `ArgPacker`, `check_block`, `check_smem`, `trunc_div`, ...)
with the driver calls replaced by the same records. A test then compares the two records
call by call: the same launches with the same bytes, or both refusing.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsl.compiler.api import compile_function
from dsl.compiler.build_options import BuildOptions
from dsl.diagnostics import ArgumentError
from dsl.export import emit_c
from dsl.export.exporter import export_function
from dsl.export.model import Export
from dsl.runtime.dlpack import check_tensor
from dsl.runtime.driver import DriverError, LaunchError
from dsl.runtime.launch import ArgPacker, Runtime
from dsl.runtime.module import DEFAULT_SMEM_LIMIT, ModuleImage
from dsl.runtime.tensor_maps import _problem

DATA = Path(__file__).parent / "data"
SIZES = {"ptr": 8, "i32": 4, "f32": 4, "i64": 8, "f64": 8, "u32": 4, "f16": 2, "bf16": 2, "bool": 1, "i8": 1,
         "i16": 2, "u8": 1, "u16": 2, "u64": 8, "index": 8, "tmap": 128}
TYPESTRS = {"f32": "<f4", "f64": "<f8", "f16": "<f2", "i32": "<i4", "i64": "<i8", "i8": "|i1", "i16": "<i2",
            "u8": "|u1", "u16": "<u2", "u32": "<u4", "u64": "<u8", "bool": "|b1", "bf16": "<V2"}
NBYTES = {"f32": 4, "f64": 8, "f16": 2, "bf16": 2, "i32": 4, "i64": 8, "i8": 1, "i16": 2, "u8": 1, "u16": 2,
          "u32": 4, "u64": 8, "bool": 1}
ATTRIBUTES = {"multiprocessor_count": 132, "max_shared_memory_per_block_optin": 232448}
OPTIN = 232448


@dataclass
class Array:
    """A GPU array as `__cuda_array_interface__` describes one (its memory is never touched)."""

    ptr: int
    shape: tuple[int, ...]
    dtype: str = "f32"
    strides: tuple[int, ...] | None = None  # in elements; None: row-major
    device: int = 0

    def element_strides(self) -> tuple[int, ...]:
        if self.strides is not None:
            return self.strides
        out, acc = [], 1
        for s in reversed(self.shape):
            out.append(acc)
            acc *= max(1, s)
        return tuple(reversed(out))

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        size = NBYTES[self.dtype]
        return {"shape": self.shape, "typestr": TYPESTRS[self.dtype], "data": (self.ptr, False), "version": 3,
                "strides": tuple(s * size for s in self.element_strides()),
                **({"descr": [("bfloat16", "<V2")]} if self.dtype == "bf16" else {})}

    def to_json(self) -> dict[str, Any]:
        return {"ptr": self.ptr, "shape": list(self.shape), "dtype": self.dtype,
                "strides": list(self.element_strides()), "device": self.device}


class RecordingRuntime(Runtime):
    """kdsl's launcher runtime, recording each launch (and shared-memory opt-in) instead of
    asking a driver; the GPU it pretends to be is the recording driver's."""

    def __init__(self, access: dict):
        super().__init__(ModuleImage(None, None), {}, "run", access)
        self.log: list[str] = []
        self.allowed: dict[str, int] = {}

    def arg_reader(self, params: tuple) -> Any:
        return functools.partial(self._read, params)

    def _read(self, params: tuple, *args: Any) -> tuple:
        out: list[Any] = []
        for (name, dtype, rank), value in zip(params, args):
            if rank is None:
                out.append(self.scalar_arg(value, name, dtype))
            else:
                ptr, shape, strides, _dev, _fw = check_tensor(value, name, dtype, rank, None, self.access.get(name))
                out += [ptr, shape, strides]
        return (*out, 0)

    def device_attribute(self, name: str) -> int:
        return ATTRIBUTES[name]

    @staticmethod
    def tensor_map(ptr: int, shape: Any, strides: Any, dtype: str, box: tuple, swizzle: int) -> bytes:
        from dsl.export.c_types import SWIZZLES, TENSOR_MAP_TYPES

        rank = len(box)
        size = NBYTES[dtype]
        byte_strides = [s * size for s in reversed(strides[:rank - 1])]
        problem = _problem(ptr, tuple(shape[:rank]), byte_strides, box)
        if problem:
            raise ArgumentError(f"a TMA tensor map of this tensor (shape {list(shape[:rank])}, {dtype}) {problem}")
        words = [TENSOR_MAP_TYPES[dtype], rank, ptr, *reversed(shape[:rank]), *byte_strides,
                 *((b << 32) | 1 for b in reversed(box)), SWIZZLES[swizzle] << 48 | 3 << 16]
        return b"".join(w.to_bytes(8, "little") for w in words).ljust(128, b"\0")

    def kernel(self, symbol: str, codes: tuple, cluster: tuple | None = None) -> Any:
        def launch(grid: tuple, block: tuple, smem: int, stream: int, *values: Any) -> None:
            gx, gy, gz = (int(g) for g in grid)
            block = tuple(int(b) for b in block)
            smem = int(smem)
            if gx <= 0 or gy <= 0 or gz <= 0:
                if gx == 0 or gy == 0 or gz == 0:
                    return
                raise self._error("grid dimensions must be positive", symbol, grid, block, smem)
            if smem > self.allowed.get(symbol, DEFAULT_SMEM_LIMIT):
                if smem > OPTIN:
                    raise self._error(f"{smem} bytes of dynamic shared memory requested", symbol, grid, block, smem)
                self.log.append(f"attribute {symbol} 8 {smem}")
                self.allowed[symbol] = smem
            packer = ArgPacker(codes)
            try:
                packer.pack(values)
            except Exception as err:
                raise self._error(f"a kernel argument does not fit its parameter type: {err}", symbol, grid, block,
                                  smem) from None
            base = ctypes.addressof(packer.buf)
            raw = bytes(packer.buf)
            params = [raw[packer.ptrs[i] - base:packer.ptrs[i] - base + SIZES[c]].hex() for i, c in enumerate(codes)]
            line = f"launch {symbol} grid {gx} {gy} {gz} block {block[0]} {block[1]} {block[2]} smem {smem}"
            if cluster is not None:
                line += " cluster " + " ".join(str(c) for c in tuple(cluster) + (1,) * (3 - len(cluster)))
            self.log.append(" ".join([line, *params]))

        return launch


@dataclass
class Outcome:
    log: list[str]
    error: str | None  # the message, when the call failed


def python_outcomes(launcher: str, calls: list[list[Any]]) -> list[Outcome]:
    """Runs the launcher once per argument list, with one runtime (as one process would)."""
    namespace: dict[str, Any] = {}
    exec(compile(launcher, "<launcher>", "exec"), namespace)
    rt = RecordingRuntime(namespace["TENSOR_ACCESS"])
    launch = namespace["bind"](rt)
    outcomes = []
    for args in calls:
        at = len(rt.log)
        try:
            launch(*args)
            error = None
        except (ArgumentError, LaunchError, DriverError, ArithmeticError) as err:
            error = str(err).splitlines()[0]
        outcomes.append(Outcome(rt.log[at:], error))
    return outcomes


@dataclass
class Exported:
    """An export built into a shared library in `folder`, with each function's launcher."""

    folder: Path
    library: Path
    export: Export
    launchers: dict[str, str]  # entry point -> the Python launcher of its (first) specialization

    def param_sizes(self) -> str:
        """RECORDING_CUDA_PARAMS: each kernel's parameter sizes, by symbol and cubin."""
        sizes = {}
        for fn in self.export.functions:
            for spec in fn.specs:
                for build in spec.builds:
                    for kernel in build.plan.kernels.values():
                        key = f"{kernel.symbol}@{cubin_hash(build.cubin or b''):016x}"
                        sizes[key] = ",".join(str(SIZES[c]) for c in kernel.codes)
        return ";".join(f"{k}={v}" for k, v in sizes.items())


def cubin_hash(cubin: bytes) -> int:
    """FNV-1a of the ELF image, as the recording driver hashes what it loads."""
    shoff = int.from_bytes(cubin[0x28:0x30], "little")
    size = shoff + int.from_bytes(cubin[0x3A:0x3C], "little") * int.from_bytes(cubin[0x3C:0x3E], "little")
    h = 1469598103934665603
    for b in cubin[:size]:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def export_and_build(folder: Path, functions: list[tuple[Any, list[tuple[tuple, dict]]]], base: str,
                     choose: set[str] | None = None, targets: tuple[str, ...] = ("sm_90",),
                     flags: tuple[str, ...] = ()) -> Exported:
    """Exports `functions` ((jit function, examples) pairs) into `folder` and builds it with gcc."""
    folder.mkdir(parents=True, exist_ok=True)
    exports, launchers = [], {}
    for fn, examples in functions:
        name = fn.fn.__name__
        exports.append(export_function(fn, name, f"{name}.py:1", list(targets), examples, choose or set()))
        args, kwargs = examples[0] if examples else ((), {})
        compiled, diags = compile_function(fn, args, kwargs, targets[0], until="cubin",
                                           options=BuildOptions(views=False))
        assert compiled is not None, [d.format() for d in diags]
        launchers[name] = compiled.stages["launcher"]
    export = Export(base, exports, "kdsl export (test)")
    (folder / f"{base}.h").write_text(emit_c.header(export))
    (folder / f"{base}_launch_config.h").write_text(emit_c.config_header(export))
    (folder / f"{base}.c").write_text(emit_c.source(export))
    library = folder / f"lib{base}.so"
    subprocess.run(["gcc", "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", *flags, "-o",
                    str(library), str(folder / f"{base}.c"), "-ldl", "-lpthread", "-lm"], check=True)
    return Exported(folder, library, export, launchers)


def recording_driver(folder: Path) -> Path:
    """libcuda.so.1 built from data/recording_cuda.c, in `folder`."""
    out = folder / "recording-driver"
    out.mkdir(exist_ok=True)
    library = out / "libcuda.so.1"
    if not library.exists():
        subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(library), str(DATA / "recording_cuda.c")],
                       check=True)
    return out


def c_outcomes(exported: Exported, entry: str, calls: list[list[Any]], env: dict[str, str] | None = None,
               ) -> list[Outcome]:
    """Calls `entry` of the built library once per argument list, in one child process that
    loads the recording driver; each call's launches and error."""
    driver = recording_driver(exported.folder)
    fn = next(f for f in exported.export.functions if f.name == entry)
    log = exported.folder / "launches.log"
    log.write_text("")
    spec = {"library": str(exported.library), "entry": entry, "error": f"{exported.export.base}_error_string",
            "params": [p.to_json() for p in fn.params],
            "calls": [[a.to_json() if isinstance(a, Array) else a for a in args] for args in calls]}
    done = subprocess.run([sys.executable, str(DATA / "call_entry.py"), json.dumps(spec)], capture_output=True,
                          text=True, env={**os.environ, "LD_LIBRARY_PATH": str(driver), "RECORDING_CUDA_LOG": str(log),
                                          "RECORDING_CUDA_PARAMS": exported.param_sizes(), **(env or {})})
    assert done.returncode == 0, done.stderr
    results = [json.loads(line) for line in done.stdout.splitlines()]
    lines = log.read_text().splitlines()
    outcomes, at = [], 0
    for result in results:
        taken = [line for line in lines[at:result["logged"]]]
        at = result["logged"]
        outcomes.append(Outcome(taken, result["error"] if result["code"] else None))
    return outcomes
