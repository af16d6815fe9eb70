"""Every example in examples/ runs in the interpreter and matches a NumPy reference (what CI
promises users without a GPU); the Hopper tensor-core examples are refused with DSL402 at the
instructions the interpreter cannot run.

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
from dsl.diagnostics import CompileError
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


HOPPER = {
    "gemm_hopper": ("gemm_hopper", ["mbarriers", "setmaxnreg", "TMA bulk copies", "Hopper warpgroup MMA (wgmma)"]),
    "attention_hopper": ("attention_hopper", ["mbarriers", "TMA bulk copies", "Hopper warpgroup MMA (wgmma)"]),
    "matmul_mma": ("matmul_mma", ["ldmatrix", "warp MMA (mma.sync)"]),
}


@pytest.mark.parametrize("name", sorted(HOPPER))
def test_tensor_core_examples_are_refused_at_the_instructions(example, name):
    module = example(name)
    fn_name, kinds = HOPPER[name]
    zeros = {2: (256, 128), 3: (1, 128, 64)}
    rank = 3 if name == "attention_hopper" else 2
    args = [bits(np.zeros(zeros[rank], dtype=np.uint16), dsl.bf16) for _ in range(4 if rank == 3 else 3)]
    if name == "gemm_hopper":
        args[2] = bits(np.zeros((256, 256), dtype=np.uint16), dsl.bf16)
    if name == "matmul_mma":
        args = [bits(np.zeros(s, dtype=np.uint16), dsl.bf16) for s in ((128, 64), (128, 64), (128, 128))]
    kwargs = {"D": 64} if name == "attention_hopper" else {}
    with pytest.raises(CompileError) as caught:
        dsl.interpret(getattr(module, fn_name), *args, **kwargs)
    diagnostics = caught.value.diagnostics
    assert {d.code for d in diagnostics} == {"DSL402"}
    assert all(d.range.file == str(EXAMPLES / f"{name}.py") for d in diagnostics)
    for kind in kinds:
        assert any(f"the interpreter cannot run {kind}" in d.message for d in diagnostics), (kind, diagnostics)
    assert all(d.message.endswith("run this kernel on a GPU") for d in diagnostics)


def test_every_example_is_covered():
    covered = {"vector_add", "saxpy", "row_sum", "softmax", "softmax_autotuned", "layernorm", "transpose",
               "matmul_tiled", "linear_search", "gelu_bf16", "fp8_quantize", *HOPPER}
    assert {p.stem for p in EXAMPLES.glob("*.py")} - {"reductions"} == covered
