"""Runs a traced kernel on the CPU, one thread at a time, through MLIR's own lowering and JIT.

A test oracle for control flow: the kernel's traced `gpu.func` becomes a `func.func` whose
thread and block coordinates are arguments, is lowered with upstream `scf`/`cf`/`arith`
passes to LLVM and JIT-compiled for the host. Only kernels whose threads do not talk to
each other (no barriers, shuffles, shared memory or atomics) can run this way; that is
what the property tests of control flow need, and it needs no GPU.
"""

from __future__ import annotations

import ctypes
import re
from typing import Any

import numpy as np
from mlir import execution_engine, ir, passmanager

_FUNC = re.compile(r"^(\s*)gpu\.func @(\w+)\((.*?)\) kernel(?: attributes \{[^\n]*\})? \{\n(.*?)^\1\}", re.S | re.M)
_COORD = re.compile(r"^(\s*)(%\w+) = gpu\.(thread_id|block_id|block_dim|grid_dim)\s+([xyz])$", re.M)
_LOWER = ("builtin.module(convert-scf-to-cf,convert-cf-to-llvm,convert-arith-to-llvm,convert-index-to-llvm,"
          "convert-func-to-llvm,reconcile-unrealized-casts)")
_C_TYPES = {"i1": ctypes.c_bool, "i8": ctypes.c_int8, "i16": ctypes.c_int16, "i32": ctypes.c_int32,
            "i64": ctypes.c_int64, "f32": ctypes.c_float, "f64": ctypes.c_double}
COORDS = [f"{kind}_{axis}" for kind in ("thread_id", "block_id", "block_dim", "grid_dim") for axis in "xyz"]


class CpuKernel:
    """A traced kernel JIT-compiled for the host; call `run(grid, block, *flat_args)`."""

    def __init__(self, traced: str):
        match = _FUNC.search(traced)
        if match is None:
            raise ValueError("no gpu.func in the traced module")
        _, self.name, params, body = match.groups()
        self.param_types = [p.split(":")[1].strip() for p in params.split(", ") if p]
        coord_params = ", ".join(f"%coord_{c}: index" for c in COORDS)
        body = _COORD.sub(lambda m: f"{m.group(1)}{m.group(2)} = index.add %coord_{m.group(3)}_{m.group(4)}, "
                                    f"%coord_zero", body)
        zeros = "    %coord_zero = index.constant 0\n"
        body = body.replace("gpu.return", "func.return")
        text = (f"module {{\n  func.func @{self.name}({params}, {coord_params}) attributes {{llvm.emit_c_interface}} "
                f"{{\n{zeros}{body}  }}\n}}\n")
        self._context = ir.Context()
        with self._context, ir.Location.unknown():
            module = ir.Module.parse(text)
            passmanager.PassManager.parse(_LOWER).run(module.operation)
            self._engine = execution_engine.ExecutionEngine(module, opt_level=0)

    def run(self, grid: tuple[int, int, int], block: tuple[int, int, int], *args: Any) -> None:
        """Runs every thread of the grid in order; `args` are the kernel's flat parameters
        (NumPy arrays for pointers, Python numbers for scalars)."""
        values = []
        for ty, arg in zip(self.param_types, args, strict=True):
            if ty.startswith("!llvm.ptr"):
                values.append(ctypes.c_void_p(arg.ctypes.data))
            else:
                values.append(_C_TYPES[ty](arg))
        for bz in range(grid[2]):
            for by in range(grid[1]):
                for bx in range(grid[0]):
                    for tz in range(block[2]):
                        for ty_ in range(block[1]):
                            for tx in range(block[0]):
                                coords = [tx, ty_, tz, bx, by, bz, *block, *grid]
                                cargs = values + [ctypes.c_size_t(c) for c in coords]
                                self._engine.invoke(self.name, *[ctypes.pointer(a) for a in cargs])


def tensor_args(array: np.ndarray) -> list[Any]:
    """A tensor's flat kernel parameters: the pointer, each extent, the outer strides."""
    strides = [s // array.itemsize for s in array.strides][:-1]
    return [array, *array.shape, *strides]
