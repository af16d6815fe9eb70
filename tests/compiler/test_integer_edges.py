"""The README's integer edge rules hold in the PTX, not only in the interpreter.

Found by the generated programs' reference (tests/fuzz, issue #32), read against the PTX:
LLVM's `shl` / `lshr` / `ashr` are poison for an amount of the width or more, so
`x << 40` on an i32 compiled to no store at all; `sdiv INT_MIN, -1` is undefined in LLVM;
and a float converted to an 8- or 16-bit integer became `cvt.rzi.s16.f32` truncated to a
byte (300.0 gave 44 in an i8, not the saturated 127). A Python float cast to an integer
(`dsl.cast(-1.5, dsl.u32)`) wrapped instead of saturating. Fixture: `EDGES`, one store per rule.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import dsl
from dsl import Tensor, f32, f64, i8, i32, i64, u8, u32, u64

INT_MIN = -(2**31)


@dsl.kernel
def edges(x: Tensor[i32], f: Tensor[f32], out: Tensor[i32], small: Tensor[i8], usmall: Tensor[u8]):
    t = dsl.thread_idx.x
    out[8 * t + 0] = x[t] << 40  # a compile-time amount past the width: 0
    out[8 * t + 1] = x[t] >> 33  # the sign
    out[8 * t + 2] = x[t] >> x[t + 4]  # a run-time amount, read unsigned: clamped
    out[8 * t + 3] = x[t] << x[t + 4]
    out[8 * t + 4] = x[t] // x[t + 4]  # INT_MIN // -1 wraps to INT_MIN
    out[8 * t + 5] = x[t] % x[t + 4]  # and INT_MIN % -1 is 0
    out[8 * t + 6] = dsl.cast(-1.5, u32).to(i32) + dsl.cast(math.nan, i32)  # literals saturate; NaN is 0
    out[8 * t + 7] = dsl.cast(3.0e9, i32)
    small[t] = dsl.cast(f[t], i8)  # saturating to the narrow range
    usmall[t] = dsl.cast(f[t], u8)


@dsl.jit
def run(x: Tensor[i32], f: Tensor[f32], out: Tensor[i32], small: Tensor[i8], usmall: Tensor[u8]):
    edges(x, f, out, small, usmall).launch(grid=1, block=4)


def _shift(op: str, a: int, amount: int) -> int:
    amount &= 0xFFFFFFFF
    if amount >= 32:
        return -1 if op == ">>" and a < 0 else 0
    value = (a << amount) & 0xFFFFFFFF if op == "<<" else a >> amount
    return value - 2**32 if value >= 2**31 else value


def test_the_interpreter_keeps_the_rules() -> None:
    a = [INT_MIN, -5, 7, 123]
    b = [-1, 40, -3, 31]
    x = np.array(a + b + [0] * 24, dtype=np.int32)
    f = np.array([300.0, -300.0, math.nan, -1.5] + [0.0] * 28, dtype=np.float32)
    out, small, usmall = np.zeros(32, np.int32), np.zeros(32, np.int8), np.zeros(32, np.uint8)
    dsl.interpret(run, x, f, out, small, usmall)
    rows = out.reshape(4, 8)
    for t, (p, q) in enumerate(zip(a, b)):
        quotient = INT_MIN if (p, q) == (INT_MIN, -1) else int(p / q)
        assert list(rows[t]) == [0, -1 if p < 0 else 0, _shift(">>", p, q), _shift("<<", p, q), quotient,
                                 p - q * quotient if (p, q) != (INT_MIN, -1) else 0, 0, 2**31 - 1], t
    assert list(small[:4]) == [127, -128, 0, -1] and list(usmall[:4]) == [255, 0, 0, 0]


def test_the_ptx_keeps_every_store_and_guards_what_llvm_leaves_undefined() -> None:
    ptx = dsl.compile(run).ptx
    stores = re.findall(r"st\.global\.b32\s+\[[^\]]*\], ([^;]+);", ptx)
    assert len(stores) == 8, stores  # none folded away as poison
    assert "0" in stores and "2147483647" in stores
    assert re.search(r"shr\.s32\s+%r\d+, %r\d+, 31;", ptx)  # x >> 33: the sign
    assert re.search(r"min\.u32\s+%r\d+, %r\d+, 31;", ptx)  # a run-time amount for >>, clamped
    assert "setp.eq.b32" in ptx and "-2147483648" in ptx  # the INT_MIN / -1 guard before div.s32
    assert re.search(r"cvt\.rzi\.s32\.f32", ptx) and not re.search(r"cvt\.rzi\.[su]16\.f32", ptx)
    assert re.search(r"max\.s32\s+%r\d+, %r\d+, -128;", ptx) and re.search(r"min\.u32\s+%r\d+, %r\d+, 255;", ptx)


@dsl.kernel
def wide_casts(x: Tensor[f64], y: Tensor[u64], z: Tensor[i64], w: Tensor[u32]):
    i = dsl.thread_idx.x
    y[i] = dsl.cast(x[i], dsl.u64)
    z[i] = dsl.cast(x[i], dsl.i64)
    w[i] = dsl.cast(x[i], dsl.u32)


@dsl.jit
def run_wide_casts(x: Tensor[f64], y: Tensor[u64], z: Tensor[i64], w: Tensor[u32]):
    wide_casts(x, y, z, w).launch(grid=1, block=8)


WIDE_INPUT = [math.nan, -1.5, 1e30, -1e30, 3.7, -0.0, math.inf, -math.inf]
U64 = [0, 0, 2**64 - 1, 0, 3, 0, 2**64 - 1, 0]
I64 = [0, -1, 2**63 - 1, -(2**63), 3, 0, 2**63 - 1, -(2**63)]
U32 = [0, 0, 2**32 - 1, 0, 3, 0, 2**32 - 1, 0]


def test_casts_to_32_and_64_bit_integers_saturate_and_send_nan_to_zero() -> None:
    """Found by the generated programs on an H200: LLVM's fptoui/fptosi are poison out of range,
    and a NaN or negative f64 cast to u64 came back as 2**63. The edges are now selected in the
    PTX (the interpreter always had the rule); the GPU test checks the hardware's answer."""
    x = np.array(WIDE_INPUT)
    y, z, w = np.zeros(8, np.uint64), np.zeros(8, np.int64), np.zeros(8, np.uint32)
    with dsl.interpret():
        run_wide_casts(x, y, z, w)
    assert (y.tolist(), z.tolist(), w.tolist()) == (U64, I64, U32)
    compiled = dsl.compile(run_wide_casts, x, y, z, w, target="sm_90")
    ptx = compiled.stages["ptx"]
    assert ptx.count("cvt.rzi.") == 3 and len(re.findall(r"selp\.b(32|64)", ptx)) >= 7  # each edge selected


@pytest.mark.gpu
def test_the_gpu_saturates_wide_casts_too() -> None:
    from dsl.runtime import driver

    if not driver.available():
        pytest.skip("needs an NVIDIA GPU")
    torch = pytest.importorskip("torch")
    x = torch.tensor(WIDE_INPUT, dtype=torch.float64, device="cuda")
    y, z = torch.zeros(8, dtype=torch.uint64, device="cuda"), torch.zeros(8, dtype=torch.int64, device="cuda")
    w = torch.zeros(8, dtype=torch.uint32, device="cuda")
    run_wide_casts(x, y, z, w)
    got_y = [v % 2**64 for v in y.view(torch.int64).cpu().tolist()]
    assert (got_y, z.cpu().tolist(), [v % 2**32 for v in w.view(torch.int32).cpu().tolist()]) == (U64, I64, U32)


@dsl.kernel(contract=False)
def twice_rounded(x: Tensor[i64], out: Tensor[f32]):
    i = dsl.thread_idx.x
    wide = dsl.cast(x[i].to(u64), f64)
    out[i] = dsl.cast(wide, f32)


@dsl.jit
def run_twice_rounded(x: Tensor[i64], out: Tensor[f32]):
    twice_rounded(x, out).launch(grid=1, block=4)


def test_an_integer_cast_to_f64_then_f32_rounds_twice_as_written() -> None:
    """Found by the generated programs on an H200: MLIR's canonicalizer folded truncf(uitofp) into
    one u64 -> f32 conversion, which rounds 2**62 + 2**38 + 1 up to 2**62 + 2**39, where the two
    casts written round it to f64's 2**62 + 2**38 and then, a tie, to even: 2**62."""
    x = np.full(4, 2**62 + 2**38 + 1, dtype=np.int64)
    out = np.zeros(4, np.float32)
    with dsl.interpret():
        run_twice_rounded(x, out)
    assert out.tolist() == [2.0**62] * 4
    ptx = dsl.compile(run_twice_rounded, x, out, target="sm_90").stages["ptx"]
    assert "cvt.rn.f64.u64" in ptx and "cvt.rn.f32.f64" in ptx and "cvt.rn.f32.u64" not in ptx
