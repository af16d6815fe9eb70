"""The `rt` a generated launcher binds when the interpreter runs it: host arrays in, CPU launches out.

The launcher source is the compiler's own (the `launcher` stage): the same argument order,
grid / block / smem arithmetic, run-time `assert`s and launch checks as on the GPU. Only the
two callables it asks for differ: `arg_reader` takes NumPy arrays (and CPU torch tensors)
instead of GPU arrays, with the checks the GPU reader makes (element type, rank, unit
innermost stride, 32-bit extents, alignment for the kernels' vector accesses, no writes into
read-only arrays); `kernel(symbol, codes)` returns a launch that runs the kernel's `Program`.

NumPy has no bf16 or fp8 types: pass `ml_dtypes` arrays, or any array of their bits wrapped
with `dsl.interpreter.bits(array, dsl.bf16)`.
"""

from __future__ import annotations

import struct
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from dsl.diagnostics import ArgumentError, SourceRange
from dsl.interpreter.execute import run_launch
from dsl.interpreter.memory import Pointer, Region
from dsl.interpreter.program import Program
from dsl.interpreter.tensor_core_ops import TensorMap
from dsl.interpreter.values import from_python_int, round_to_bf16
from dsl.language.types import DType, dtype_from_foreign
from dsl.runtime.dlpack import INT32_MAX, _check_access, check_strides
from dsl.runtime.launch import ArgPacker, Runtime


@dataclass(frozen=True)
class Bits:
    """Host memory holding values of a type NumPy lacks (bf16, fp8) as their raw bits."""

    array: np.ndarray
    dtype: DType

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape)


def bits(array: Any, dtype: DType) -> Bits:
    """`array` (of 16-bit integers for bf16, 8-bit ones for fp8) read as `dtype` by kernels."""
    array = np.asarray(array)
    if array.dtype.itemsize != dtype.nbytes or array.dtype.kind not in "iuV":
        raise TypeError(f"dsl.interpreter.bits needs {dtype.nbytes}-byte integers for {dtype.name}, not {array.dtype}")
    return Bits(array, dtype)


@dataclass
class HostTensor:
    """What the argument reader hands the launcher as a tensor's pointer."""

    region: Region
    dtype: DType


def _describe(value: Any, name: str) -> tuple[np.ndarray, DType, bool]:
    """(a NumPy array over the argument's memory, its element type, whether it may be written)."""
    if isinstance(value, Bits):
        return value.array, value.dtype, bool(value.array.flags.writeable)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        if value.device.type != "cpu":
            raise ArgumentError(f"argument '{name}' is a {value.device} tensor; the interpreter runs on host memory "
                                "(pass .cpu())")
        dtype = dtype_from_foreign(value.dtype)
        if dtype is None:
            raise ArgumentError(f"argument '{name}' has unsupported element type {value.dtype}")
        if dtype.name in ("bf16", "f8e4m3", "f8e5m2"):  # NumPy has no such type: the same bits as integers
            value = value.view(torch.int16 if dtype.bits == 16 else torch.int8)
        return value.detach().numpy(), dtype, True
    if isinstance(value, np.ndarray):
        dtype = dtype_from_foreign(value.dtype)
        if dtype is None:
            raise ArgumentError(f"argument '{name}' has unsupported element type {value.dtype}")
        return value, dtype, bool(value.flags.writeable)
    raise ArgumentError(f"argument '{name}' is a {type(value).__name__}; the interpreter runs kernels on NumPy arrays "
                        "(and CPU torch tensors)")


def host_tensor(value: Any, name: str, dtype: str, rank: int, access: tuple | None) -> tuple:
    """(pointer handle, shape, strides in elements) of a tensor argument, checked as the GPU
    reader checks one (`dsl.runtime.dlpack.check_tensor`)."""
    array, dt, writable = _describe(value, name)
    if dt.name != dtype:
        raise ArgumentError(f"argument '{name}' has element type {dt.name}, but this specialization takes "
                            f"Tensor[{dtype}, {rank}]")
    shape = tuple(int(s) for s in array.shape)
    if len(shape) != rank:
        raise ArgumentError(f"argument '{name}' has rank {len(shape)} (shape {shape}), but this specialization "
                            f"takes Tensor[{dtype}, {rank}]")
    itemsize = array.dtype.itemsize
    if any(s % itemsize for s in array.strides):
        raise ArgumentError(f"argument '{name}' has strides {array.strides} (bytes) that are not multiples of its "
                            f"element size {itemsize}")
    strides = tuple(s // itemsize for s in array.strides)
    check_strides(name, shape, strides, rank, "np.ascontiguousarray")
    extent = sum((s - 1) * st for s, st in zip(shape, strides) if s > 1)
    if max(shape, default=0) > INT32_MAX or extent > INT32_MAX:
        raise ArgumentError(f"argument '{name}' spans {extent + 1} elements; kernels index with 32-bit integers")
    if all(shape):
        ptr = int(array.__array_interface__["data"][0])
        _check_access(name, ptr, shape, strides, itemsize, access, not writable)
    region = Region.of_array(array, f"tensor '{name}'", dt.name, shape, strides, itemsize, writable)
    return HostTensor(region, dt), shape, strides


class InterpreterRuntime:
    """What a generated launcher binds to run on the CPU (see the module docstring)."""

    # The launcher's helpers that do not touch a GPU are the GPU runtime's own.
    trunc_div = staticmethod(Runtime.trunc_div)
    trunc_mod = staticmethod(Runtime.trunc_mod)
    cdiv = staticmethod(Runtime.cdiv)
    argument_error = staticmethod(Runtime.argument_error)
    check_smem = Runtime.check_smem
    check_block = Runtime.check_block
    scalar_arg = Runtime.scalar_arg
    _convert_scalar = Runtime._convert_scalar
    _error = Runtime._error

    def __init__(self, programs: Any, kernels: dict[str, Any], launch_ranges: dict[str, SourceRange], name: str,
                 access: dict[str, tuple] | None, target: str, out: Any = None, breakpoints: Any = None):
        self.programs = programs  # symbol -> Program, built on first launch
        self.kernels = kernels  # symbol -> the traced kernel's parameters (names for breakpoints)
        self.launch_ranges = launch_ranges
        self.name = name
        self.access = access or {}
        self.target = target
        self.out = out
        self.breakpoints = breakpoints

    def arg_reader(self, params: tuple) -> Any:
        def read(*args: Any) -> tuple:
            out: list[Any] = []
            for (name, dtype, rank), value in zip(params, args):
                if rank is None:
                    out.append(self.scalar_arg(value, name, dtype))
                else:
                    out.extend(host_tensor(value, name, dtype, rank, self.access.get(name)))
            out.append(0)  # the stream: the interpreter runs every launch to completion, in order
            return tuple(out)

        return read

    def device_attribute(self, name: str) -> int:
        """What the target's GPU would answer (`dsl.sm_count()` and friends)."""
        from dsl.language.device import target_value

        return target_value(name, self.target)

    @staticmethod
    def tensor_map(ptr: Any, shape: Any, strides: Any, dtype: str, box: tuple, swizzle: int) -> TensorMap:
        """`dsl.tensor_map(...)`: what TMA reads through, with the checks the driver's encoder makes."""
        from dsl.runtime.tensor_maps import _NBYTES, _problem

        region = ptr.region
        rank = len(box)
        nbytes = _NBYTES[dtype]
        shape, strides = tuple(int(s) for s in shape[:rank]), tuple(int(s) for s in strides[:rank])
        problem = _problem(region.address, shape, [s * nbytes for s in reversed(strides[:-1])], box)
        if problem:
            raise ArgumentError(f"a TMA tensor map of this tensor (shape {list(shape)}, {dtype}) {problem}")
        return TensorMap(region, dtype, nbytes, shape, strides, tuple(box), swizzle)

    def kernel(self, symbol: str, codes: tuple, cluster: tuple | None = None) -> Any:
        def launch(grid: tuple, block: tuple, smem: int, stream: Any, *values: Any) -> None:
            self._launch(symbol, codes, cluster, grid, block, smem, values)

        return launch

    def _launch(self, symbol: str, codes: tuple, cluster: tuple | None, grid: tuple, block: tuple, smem: int,
                values: tuple) -> None:
        try:
            grid = tuple(int(g) for g in grid)
            block = tuple(int(b) for b in block)
            smem = int(smem)
        except (TypeError, ValueError) as exc:
            raise self._error(f"grid, block and smem must be ints: {exc}", symbol, grid, block, smem) from None
        if any(g == 0 for g in grid):
            return  # an empty grid: nothing to do
        if any(g < 0 for g in grid) or any(b <= 0 for b in block):
            raise self._error("grid and block dimensions must be positive", symbol, grid, block, smem)
        self._check_limits(symbol, grid, block, smem)
        if cluster is not None:
            cluster = tuple(int(c) for c in cluster)
            if len(cluster) != 3 or any(c <= 0 for c in cluster) or any(g % c for g, c in zip(grid, cluster)):
                raise self._error(f"the grid {grid} is not made of whole clusters of {cluster} blocks", symbol,
                                  grid, block, smem)
            if cluster[0] * cluster[1] * cluster[2] > 8:
                raise self._error(f"clusters of {cluster} blocks: at most 8 blocks a cluster (the portable limit)",
                                  symbol, grid, block, smem)
        try:  # the GPU runtime's packing says which values do not fit their parameter types
            ArgPacker(codes).pack([0 if isinstance(v, HostTensor) else bytes(128) if isinstance(v, TensorMap) else v
                                   for v in values])
        except (struct.error, TypeError, OverflowError) as err:
            raise self._error(f"a kernel argument does not fit its parameter type ({', '.join(codes)}): {err}",
                              symbol, grid, block, smem) from None
        program: Program = self.programs(symbol)
        args = [_kernel_value(v, t) for v, (_, t) in zip(values, program.params)]
        run_launch(program, grid, block, smem, args, self._names(symbol, args), kernel=symbol,
                   launch=self.launch_ranges.get(symbol), out=self.out, breakpoints=self.breakpoints,
                   cluster=cluster)

    def _check_limits(self, symbol: str, grid: tuple, block: tuple, smem: int) -> None:
        """What the GPU's driver refuses to launch: a block, grid or shared memory beyond the target's."""
        from dsl.targets import get_target

        t = get_target(self.target)
        threads = block[0] * block[1] * block[2]
        if threads > t.max_threads_per_block or any(b > m for b, m in zip(block, t.max_block_dims)):
            raise self._error(f"block {block} exceeds {t.name}'s limits ({t.max_threads_per_block} threads, "
                              f"dimensions {t.max_block_dims})", symbol, grid, block, smem)
        if any(g > m for g, m in zip(grid, t.max_grid_dims)):
            raise self._error(f"grid {grid} exceeds {t.name}'s limits {t.max_grid_dims}", symbol, grid, block, smem)
        program = self.programs(symbol)
        static = sum(d.size for d in program.shared.values() if d.size is not None)
        if smem + static > t.max_smem_per_block:
            raise self._error(f"{smem} bytes of dynamic shared memory requested, but {t.name} allows at most "
                              f"{t.max_smem_per_block - static} per block for this kernel ({static} static)",
                              symbol, grid, block, smem)

    def _names(self, symbol: str, args: list[Any]) -> dict[str, Any]:
        """Kernel parameter name -> its value (a tensor's pointer), for breakpoints."""
        from dsl.frontend.params import tensor_layout

        out: dict[str, Any] = {}
        position = 0
        for p in self.kernels.get(symbol, []):
            if p.kind == "tensor":
                out[p.name] = args[position]
                position += len(tensor_layout(p.rank))
            elif p.kind in ("scalar", "tensor_map"):
                out[p.name] = args[position]
                position += 1
        return out


def _kernel_value(value: Any, t: Any) -> Any:
    """A launcher value as the interpreter holds the kernel parameter."""
    if isinstance(value, HostTensor):
        return Pointer(value.region, np.asarray(0, dtype=np.int64))
    if isinstance(value, TensorMap):
        return value
    if t.kind == "float":
        if t.is_bf16:
            return round_to_bf16(np.asarray(float(value), dtype=np.float64))
        return np.asarray(float(value), dtype=t.np)
    if t.kind == "int":
        if t.bits == 1:
            return np.asarray(bool(value))
        return np.asarray(from_python_int(int(value), t))
    raise ArgumentError(f"the interpreter cannot pass a {t.name} parameter")

