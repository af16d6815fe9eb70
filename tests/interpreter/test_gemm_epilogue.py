"""The Hopper GEMM with a fused bias + exact-GELU epilogue (`benchmarks/kernels/gemm_hopper_gelu.py`,
the kernel of issue 28's compile-time item) in the interpreter, against NumPy.

M = 192 leaves the second tile row half outside A and C (TMA reads zeros there and writes
nothing); each of the 128 accumulator elements of a consumer thread goes through `dsl.erf`,
which the compiler now calls instead of inlining 128 times (`tests/compiler/test_libdevice_calls.py`).
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

import dsl
from dsl.interpreter import bits
from dsl.runtime.launch import _bf16_bits

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "benchmarks" / "kernels" / "gemm_hopper_gelu.py"
RNG = np.random.default_rng(11)


@pytest.fixture
def fused(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples"))  # the kernel imports the example's helpers
    spec = importlib.util.spec_from_file_location("kdsl_gemm_hopper_gelu", FIXTURE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("gemm_hopper", None)


def to_bf16(values: np.ndarray) -> np.ndarray:
    return np.array([_bf16_bits(float(v)) for v in values.reshape(-1)], dtype=np.uint16).reshape(values.shape)


def from_bf16(raw: np.ndarray) -> np.ndarray:
    return (raw.astype(np.uint32) << 16).view(np.float32)


def test_the_fused_epilogue_matches_numpy(fused):
    M, N, K = 192, 256, 128
    a, b_t = to_bf16(RNG.standard_normal((M, K)) * 0.25), to_bf16(RNG.standard_normal((N, K)) * 0.25)
    bias = to_bf16(RNG.standard_normal(N))
    c = np.full((M, N), 0x7FC0, dtype=np.uint16)  # NaN where nothing is written
    dsl.interpret(fused.gemm_hopper_gelu, bits(a, dsl.bf16), bits(b_t, dsl.bf16), bits(bias, dsl.bf16),
                  bits(c, dsl.bf16))
    x = from_bf16(a).astype(np.float64) @ from_bf16(b_t).astype(np.float64).T + from_bf16(bias)
    erf = np.vectorize(math.erf)
    expected = x * 0.5 * (1.0 + erf(x / math.sqrt(2.0)))
    got = from_bf16(c).astype(np.float64)
    np.testing.assert_allclose(got, expected, rtol=2 ** -7, atol=2 ** -10)  # bf16 output rounding
