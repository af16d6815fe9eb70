"""Every example in examples/ runs in the interpreter and matches a NumPy reference (what CI
promises users without a GPU), the tensor-core ones (warp MMA, and Hopper's TMA, mbarriers and
wgmma in warp-specialized pipelines) included.

Inputs are small (a few thousand elements) so the whole file runs in seconds on a CPU. Floats
compare to a float64 NumPy reference within the error of the kernel's own rounding; integer and
fp8 results compare exactly.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

import dsl
from dsl.frontend import fp8
from dsl.interpreter import bits
from dsl.runtime.launch import _bf16_bits

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RNG = np.random.default_rng(7)


@pytest.fixture
def example(monkeypatch):
    """Imports an example by name, with examples/ on sys.path (for `reductions`)."""
    monkeypatch.syspath_prepend(str(EXAMPLES))

    def load(name: str):
        spec = importlib.util.spec_from_file_location(f"kdsl_example_{name}", EXAMPLES / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    yield load
    sys.modules.pop("reductions", None)


def to_bf16(values: np.ndarray) -> np.ndarray:
    """The bf16 bits of float values (rounded to nearest even, by the GPU runtime's own helper)."""
    return np.array([_bf16_bits(float(v)) for v in values.reshape(-1)], dtype=np.uint16).reshape(values.shape)


def from_bf16(raw: np.ndarray) -> np.ndarray:
    return (raw.astype(np.uint32) << 16).view(np.float32)


def softmax_reference(x: np.ndarray) -> np.ndarray:
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_vector_add(example):
    module = example("vector_add")
    a, b = RNG.standard_normal(5000, dtype=np.float32), RNG.standard_normal(5000, dtype=np.float32)
    c = np.zeros_like(a)
    dsl.interpret(module.add, a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_saxpy(example):
    module = example("saxpy")
    x, y = RNG.standard_normal(3000, dtype=np.float32), RNG.standard_normal(3000, dtype=np.float32)
    expected = np.float32(2.5) * x + y
    dsl.interpret(module.run_saxpy, x, y, 2.5)
    np.testing.assert_array_equal(y, expected)  # the interpreter rounds the multiply and the add


def test_row_sum(example):
    module = example("row_sum")
    x = RNG.standard_normal((6, 3000), dtype=np.float32)[:, :2048]  # a view: row stride 3000
    out = np.zeros(6, dtype=np.float32)
    dsl.interpret(module.run_row_sum, x, out)
    np.testing.assert_allclose(out, x.astype(np.float64).sum(axis=1), rtol=0, atol=2e-4)


def test_softmax(example):
    module = example("softmax")
    x = RNG.standard_normal((40, 256), dtype=np.float32)
    y = np.zeros_like(x)
    dsl.interpret(module.run_softmax, x, y)
    np.testing.assert_allclose(y, softmax_reference(x), rtol=2e-6, atol=1e-9)


def test_softmax_autotuned_runs_its_first_config(example):
    module = example("softmax_autotuned")
    x = RNG.standard_normal((20, 512), dtype=np.float32)
    y = np.zeros_like(x)
    dsl.interpret(module.run_softmax_autotuned, x, y)
    np.testing.assert_allclose(y, softmax_reference(x), rtol=2e-6, atol=1e-9)


def test_layernorm(example):
    module = example("layernorm")
    x = RNG.standard_normal((12, 512), dtype=np.float32)
    w, b = RNG.standard_normal(512, dtype=np.float32), RNG.standard_normal(512, dtype=np.float32)
    y = np.zeros_like(x)
    dsl.interpret(module.run_layernorm, x, w, b, y)
    x64 = x.astype(np.float64)
    expected = (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + 1e-5) * w + b
    np.testing.assert_allclose(y, expected, rtol=0, atol=2e-4)


def test_transpose(example):
    module = example("transpose")
    x = RNG.standard_normal((70, 45), dtype=np.float32)
    out = np.zeros((45, 70), dtype=np.float32)
    dsl.interpret(module.run_transpose, x, out)
    np.testing.assert_array_equal(out, x.T)


def test_matmul_tiled(example):
    module = example("matmul_tiled")
    a, b = RNG.standard_normal((72, 40), dtype=np.float32), RNG.standard_normal((40, 70), dtype=np.float32)
    c = np.full((72, 70), np.nan, dtype=np.float32)
    dsl.interpret(module.run_matmul_tiled, a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=0, atol=1e-4)


def test_linear_search(example):
    module = example("linear_search")
    x = RNG.standard_normal((300, 24), dtype=np.float32)
    out = np.full(300, 99, dtype=np.int32)
    dsl.interpret(module.run_first_above, x, out, 1.5)
    expected = [next((c for c in range(24) if x[r, c] > np.float32(1.5)), -1) for r in range(300)]
    np.testing.assert_array_equal(out, expected)


def test_gelu_bf16(example):
    module = example("gelu_bf16")
    x = to_bf16(RNG.standard_normal(2051, dtype=np.float32) * 3)  # a tail past the 8-wide vectors
    y = np.zeros_like(x)
    dsl.interpret(module.run_gelu_bf16, bits(x, dsl.bf16), bits(y, dsl.bf16))
    # in f32, as the kernel computes it (each operation rounded), erf correctly rounded to f32
    v = from_bf16(x)
    t = v * np.float32(module.SQRT1_2)
    erf = np.array([math.erf(float(a)) for a in t]).astype(np.float32)
    expected = to_bf16((v * np.float32(0.5)) * (np.float32(1.0) + erf))
    np.testing.assert_array_equal(y, expected)


def test_fp8_quantize(example):
    module = example("fp8_quantize")
    x = to_bf16(RNG.standard_normal(10_001, dtype=np.float32) * 4)
    q = np.zeros(x.shape, dtype=np.uint8)
    amax, scale_inv = np.zeros(1, dtype=np.float32), np.zeros(1, dtype=np.float32)
    dsl.interpret(module.run_fp8_quantize, bits(x, dsl.bf16), bits(q, dsl.f8e4m3), amax, scale_inv)
    values = from_bf16(x)
    assert amax[0] == np.abs(values).max()  # the atomic max over every block, exactly
    assert scale_inv[0] == np.float32(amax[0] / np.float32(448.0))
    scale = np.float32(448.0) / amax[0]
    expected = [fp8.encode(float(np.float32(v * scale)), dsl.f8e4m3) for v in values]
    np.testing.assert_array_equal(q, expected)  # the compiler's own literal encoder agrees bit for bit


def bf16_matrix(rows: int, cols: int, *lead: int) -> np.ndarray:
    return to_bf16(RNG.standard_normal((*lead, rows, cols), dtype=np.float32))


def assert_bf16_close(got_bits: np.ndarray, expected: np.ndarray) -> None:
    """Within one bf16 rounding of the float64 result (tensor cores add in f32, then the
    kernel rounds to bf16 once)."""
    got = from_bf16(got_bits).astype(np.float64)
    excess = np.abs(got - expected) - (np.abs(expected) * 2.0**-8 + 1e-6)
    assert excess.max() <= 0, f"off by {np.abs(got - expected).max()} at {np.unravel_index(excess.argmax(), got.shape)}"


def test_matmul_mma(example):
    module = example("matmul_mma")
    a, b_t = bf16_matrix(128, 96), bf16_matrix(256, 96)  # two blocks, three K tiles through the 4-stage ring
    c = np.zeros((128, 256), dtype=np.uint16)
    dsl.interpret(module.matmul_mma, bits(a, dsl.bf16), bits(b_t, dsl.bf16), bits(c, dsl.bf16))
    assert_bf16_close(c, from_bf16(a).astype(np.float64) @ from_bf16(b_t).astype(np.float64).T)


def test_matmul_int8_mma(example):
    """int8 tiles through cp.async and ldmatrix (bytes as they are) into mma.sync m16n8k32:
    exact int32 sums; three K tiles through the 4-stage ring, two blocks along N."""
    module = example("matmul_int8_mma")
    a = RNG.integers(-128, 128, (128, 192), dtype=np.int8)
    b_t = RNG.integers(-128, 128, (256, 192), dtype=np.int8)
    c = np.zeros((128, 256), dtype=np.int32)
    dsl.interpret(module.matmul_int8_mma, a, b_t, c)
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b_t.astype(np.int64).T)


def test_rmsnorm_rows(example):
    """37 rows in blocks of 4 warps: the last block's three warps past the end return before
    their vector loads, which would read past `x` (a fault here)."""
    module = example("rmsnorm_rows")
    x = RNG.standard_normal((37, 512)).astype(np.float16)
    w = RNG.standard_normal(512).astype(np.float16)
    y = np.zeros_like(x)
    dsl.interpret(module.run_rmsnorm, x, w, y)
    xf = x.astype(np.float64)
    expected = xf / np.sqrt((xf * xf).mean(axis=1, keepdims=True) + 1e-6) * w.astype(np.float64)
    np.testing.assert_allclose(y.astype(np.float64), expected, rtol=2e-3, atol=2e-3)


def test_gemm_hopper(example):
    """TMA loads through the mbarrier ring, warp specialization, wgmma and TMA stores; M = 192
    leaves the second tile row half outside A and C (TMA reads zeros there and writes nothing)."""
    module = example("gemm_hopper")
    a, b_t = bf16_matrix(192, 128), bf16_matrix(256, 128)
    c = np.full((192, 256), 0x7FC0, dtype=np.uint16)  # NaN where nothing is written
    dsl.interpret(module.gemm_hopper, bits(a, dsl.bf16), bits(b_t, dsl.bf16), bits(c, dsl.bf16))
    assert_bf16_close(c, from_bf16(a).astype(np.float64) @ from_bf16(b_t).astype(np.float64).T)


def test_gemm_hopper_in_clusters_of_two(example):
    """CLUSTER=2: the two blocks of each cluster run together; each loads half of their common
    B tile and multicasts it into both, and frees a stage with arrivals on both blocks'
    mbarriers; cluster barriers fence the start and the end."""
    module = example("gemm_hopper")
    a, b_t = bf16_matrix(256, 128), bf16_matrix(256, 128)
    c = np.full((256, 256), 0x7FC0, dtype=np.uint16)
    dsl.interpret(module.gemm_hopper, bits(a, dsl.bf16), bits(b_t, dsl.bf16), bits(c, dsl.bf16), CLUSTER=2)
    assert_bf16_close(c, from_bf16(a).astype(np.float64) @ from_bf16(b_t).astype(np.float64).T)


def test_gemm_hopper_swiglu(example):
    """The SwiGLU epilogue: B's rows alternate eight gate and eight up rows, so each thread holds
    a gate column and its up column; the tile stored is silu(gate) * up, half as wide (BN=128:
    two tiles of 64 output columns; M = 192 leaves the second tile row half outside)."""
    module = example("gemm_hopper")
    a, gate_up = bf16_matrix(192, 128), bf16_matrix(256, 128)  # gate rows 0-127, up rows 128-255
    interleaved = gate_up.reshape(2, 16, 8, 128).transpose(1, 0, 2, 3).reshape(256, 128)
    out = np.full((192, 128), 0x7FC0, dtype=np.uint16)
    dsl.interpret(module.gemm_hopper_swiglu, bits(a, dsl.bf16), bits(interleaved, dsl.bf16), bits(out, dsl.bf16),
                  BN=128)
    product = from_bf16(a).astype(np.float64) @ from_bf16(gate_up).astype(np.float64).T
    gate, up = (from_bf16(to_bf16(half.astype(np.float32))).astype(np.float64) for half in (product[:, :128],
                                                                                              product[:, 128:]))
    expected = gate / (1.0 + np.exp(-gate)) * up  # each product rounded to bf16 first, as the kernel does
    got = from_bf16(out).astype(np.float64)
    excess = np.abs(got - expected) - (np.abs(expected) * 2.0**-7 + 1e-3)
    assert excess.max() <= 0, f"off by {np.abs(got - expected).max()}"


def attention_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> np.ndarray:
    qf, kf, vf = (from_bf16(x).astype(np.float64) for x in (q, k, v))
    s = qf @ kf.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ vf


@pytest.mark.parametrize("causal", [False, True])
def test_attention_hopper(example, causal):
    """Two K/V tiles per block (the pipelined loop runs), two heads, causal masking of the
    diagonal tile; P is rounded to bf16 before P V, as on the GPU."""
    module = example("attention_hopper")
    q, k, v = (bf16_matrix(256, 64, 2) for _ in range(3))
    o = np.zeros((2, 256, 64), dtype=np.uint16)
    dsl.interpret(module.attention_hopper, *(bits(x, dsl.bf16) for x in (q, k, v, o)), D=64, CAUSAL=causal)
    got = from_bf16(o).astype(np.float64)
    np.testing.assert_allclose(got, attention_reference(q, k, v, causal), rtol=0, atol=1.5e-2)


def test_every_example_is_covered():
    covered = {"vector_add", "saxpy", "row_sum", "softmax", "softmax_autotuned", "layernorm", "transpose",
               "matmul_tiled", "linear_search", "gelu_bf16", "fp8_quantize", "matmul_mma", "matmul_int8_mma",
               "gemm_hopper", "attention_hopper", "rmsnorm_rows", "attention_decode", "gemm_small_m",
               "gemm_batched", "gemm_int8_hopper", "gemm_fp8",  # gemm_fp8: tests/interpreter/test_gemm_fp8.py
               "attention_backward_hopper"}  # tests/interpreter/test_attention_backward.py
    assert {p.stem for p in EXAMPLES.glob("*.py")} - {"reductions"} == covered
