"""fp8 (`f8e4m3`, `f8e5m2`): literals encoded while tracing, and conversions on sm_89+.

fp8 values travel as their i8 bits (`DType.mlir_type`). The conversions are the hardware's
pairwise instructions: `cvt.rn.satfinite.{e4m3,e5m2}x2.f32` and `cvt.rn.f16x2.{e4m3,e5m2}x2`.
A vector converts two lanes per instruction; a scalar uses one instruction for itself.
Where the target is known to have them they are NVVM ops (LLVM selects the instructions);
where it is not known they are inline PTX, so a target without them fails in ptxas with a
diagnostic instead of stopping LLVM's instruction selection (which aborts the process).

Semantics, the same for literals (encoded here) and run-time values (the instructions):

- to fp8: every source goes through f32 first (exact from f16, bf16, bool and from ints up
  to 2**24, which covers every finite fp8 value), then rounds to nearest, ties to even.
  It saturates: finite values beyond the largest and +-inf become +-448 (e4m3) or
  +-57344 (e5m2); NaN stays NaN (0x7F). torch's `.to(torch.float8_e4m3fn)` agrees for
  |x| <= 464 and gives NaN beyond; its `.to(torch.float8_e5m2)` gives inf where we give
  +-57344. From f64 the value is rounded twice (to f32, then to fp8).
- from fp8: exact (every fp8 value is an f16), then the f16 converts on as any f16 does.
"""

from __future__ import annotations

import bisect
import functools
import math
from typing import Any

from mlir import ir

from dsl.frontend import ops
from dsl.frontend.values import DSLTypeError
from dsl.language.types import DType, f8e4m3

NAN_BITS = 0x7F  # what the hardware produces for a NaN, in both formats


def mlir_fp8_type(dtype: DType) -> Any:
    """The MLIR type the nvvm conversion ops name (their operands are plain bits)."""
    return ir.Float8E4M3FNType.get() if dtype == f8e4m3 else ir.Float8E5M2Type.get()


def check_target(target: Any, dtype: DType) -> None:
    """fp8 conversions are sm_89+ instructions (and on sm_89 need PTX ISA 8.1); None = not known."""
    if target is None:
        return
    if target.compute_capability < (8, 9):
        raise DSLTypeError(f"{dtype.name} conversions need sm_89 or newer (the cvt fp8 instructions); "
                           f"the target is {target.name}")
    if target.compute_capability == (8, 9) and getattr(target, "ptx_version", 80) < 81:
        raise DSLTypeError(f"{dtype.name} conversions on sm_89 need PTX ISA 8.1, newer than the PTX "
                           "emitted for this target")


# --- literals ------------------------------------------------------------------------------

def _layout(dtype: DType) -> tuple[int, int]:
    """(mantissa bits, exponent bias)."""
    return (3, 7) if dtype == f8e4m3 else (2, 15)


def decode(code: int, dtype: DType) -> float:
    """The value of an fp8 bit pattern (0..255)."""
    man_bits, bias = _layout(dtype)
    sign = -1.0 if code & 0x80 else 1.0
    magnitude = code & 0x7F
    exponent, mantissa = magnitude >> man_bits, magnitude & ((1 << man_bits) - 1)
    if dtype == f8e4m3 and magnitude == 0x7F:
        return math.nan
    if dtype != f8e4m3 and exponent == 31:
        return math.nan if mantissa else sign * math.inf
    if exponent == 0:
        return sign * mantissa * 2.0 ** (1 - bias - man_bits)
    return sign * (1 + mantissa / (1 << man_bits)) * 2.0 ** (exponent - bias)


@functools.cache
def _finite(dtype: DType) -> tuple[list[float], list[int]]:
    """The non-negative finite values in ascending order, and their codes."""
    pairs = sorted((decode(c, dtype), c) for c in range(0x80) if math.isfinite(decode(c, dtype)))
    return [v for v, _ in pairs], [c for _, c in pairs]


def encode(value: float, dtype: DType) -> int:
    """The fp8 bits of a Python float: round to nearest even, saturating (as the hardware)."""
    if math.isnan(value):
        return NAN_BITS
    sign = 0x80 if math.copysign(1.0, value) < 0 else 0
    values, codes = _finite(dtype)
    a = abs(value)
    if a >= values[-1]:
        return sign | codes[-1]
    k = bisect.bisect_right(values, a) - 1  # values[k] <= a < values[k + 1]
    below, above = values[k] - a, values[k + 1] - a
    if -below < above or (-below == above and codes[k] % 2 == 0):
        return sign | codes[k]
    return sign | codes[k + 1]


# --- run-time conversions ------------------------------------------------------------------

def _f32x2_to_f8x2(hi: Any, lo: Any, to: DType, native: bool) -> ir.Value:
    if native:
        return ops.nvvm_f32x2_to_f8x2(hi, lo, mlir_fp8_type(to))
    name = "e4m3" if to == f8e4m3 else "e5m2"
    return ops.llvm_inline_asm(ir.IntegerType.get_signless(16), f"cvt.rn.satfinite.{name}x2.f32 $0, $1, $2;",
                               "=h,f,f", [hi, lo], side_effects=False)


def _f8x2_to_f16x2(pair: Any, src: DType, native: bool) -> ir.Value:
    if native:
        return ops.nvvm_f8x2_to_f16x2(pair, mlir_fp8_type(src))
    name = "e4m3" if src == f8e4m3 else "e5m2"
    bits = ops.vector_extract(ops.vector_bitcast(ir.VectorType.get([1], ir.IntegerType.get_signless(16)), pair), 0)
    word = ops.llvm_inline_asm(ir.IntegerType.get_signless(32), f"cvt.rn.f16x2.{name}x2 $0, $1;", "=r,h", [bits],
                               side_effects=False)
    f16x2 = ir.VectorType.get([2], ir.F16Type.get())
    return ops.vector_bitcast(f16x2, ops.vector_from_elements(ir.VectorType.get([1], word.type), [word]))


def from_f32(v: Any, to: DType, native: bool = True) -> ir.Value:
    """f32 (scalar or vector) to fp8 bits: i8 or vector<Nxi8>."""
    i8, i16 = ir.IntegerType.get_signless(8), ir.IntegerType.get_signless(16)
    if not isinstance(v.type, ir.VectorType):
        return ops.value("arith.trunci", i8, _f32x2_to_f8x2(v, v, to, native))  # the low byte
    width = ir.VectorType(v.type).shape[0]
    pairs = [_f32x2_to_f8x2(ops.vector_extract(v, k + 1), ops.vector_extract(v, k), to, native)
             for k in range(0, width, 2)]  # lane k in the low byte: little-endian lane order
    packed = ops.vector_from_elements(ir.VectorType.get([width // 2], i16), pairs)
    return ops.vector_bitcast(ir.VectorType.get([width], i8), packed)


def to_f16(v: Any, src: DType, native: bool = True) -> ir.Value:
    """fp8 bits (i8 or vector<Nxi8>) to f16 of the same shape, exactly."""
    i8x2 = ir.VectorType.get([2], ir.IntegerType.get_signless(8))
    if not isinstance(v.type, ir.VectorType):
        return ops.vector_extract(_f8x2_to_f16x2(ops.vector_from_elements(i8x2, [v, v]), src, native), 0)
    width = ir.VectorType(v.type).shape[0]
    lanes = []
    for k in range(0, width, 2):
        pair = ops.vector_from_elements(i8x2, [ops.vector_extract(v, k), ops.vector_extract(v, k + 1)])
        halves = _f8x2_to_f16x2(pair, src, native)
        lanes += [ops.vector_extract(halves, 0), ops.vector_extract(halves, 1)]
    return ops.vector_from_elements(ir.VectorType.get([width], ir.F16Type.get()), lanes)
