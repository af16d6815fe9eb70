"""Grouped-query attention in `examples/attention_hopper.py`, run by the interpreter: k and v
have fewer heads than q, and each query head reads the K/V head of its group in its own
batch entry, as Llama 3 lays them out (q [B * HQ, S, D], k and v [B * HKV, S, D]).

The float64 NumPy reference spells the mapping out per batch entry (query head `h` of the
flat layout reads K/V head `(h // HQ) * HKV + (h % HQ) // (HQ // HKV)`), so it does not
share the kernel's `h // group` shortcut. Two batch entries make a mapping that forgets the
entry (or takes `h % HKV`) read the wrong head. Inputs are small: seconds on a CPU.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import dsl
from dsl.interpreter import bits
from dsl.runtime import ArgumentError
from dsl.runtime.launch import _bf16_bits

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RNG = np.random.default_rng(11)


@pytest.fixture(scope="module")
def attention() -> ModuleType:
    """examples/attention_hopper.py, imported from its file."""
    spec = importlib.util.spec_from_file_location("kdsl_example_attention_gqa", EXAMPLES / "attention_hopper.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bf16_values(*shape: int) -> np.ndarray:
    """Random bf16 bits (rounded to nearest even by the GPU runtime's own helper)."""
    values = RNG.standard_normal(shape, dtype=np.float32).reshape(-1)
    return np.array([_bf16_bits(float(v)) for v in values], dtype=np.uint16).reshape(shape)


def as_float64(raw: np.ndarray) -> np.ndarray:
    return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def gqa_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, batch: int, causal: bool) -> np.ndarray:
    """softmax(q k^T / sqrt(D)) v in float64, each query head against its group's K/V head."""
    hq, hkv = q.shape[0] // batch, k.shape[0] // batch
    kv_of = [(h // hq) * hkv + (h % hq) // (hq // hkv) for h in range(q.shape[0])]
    qf, kf, vf = as_float64(q), as_float64(k)[kv_of], as_float64(v)[kv_of]
    s = qf @ kf.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ vf


def run(attention: ModuleType, q: np.ndarray, k: np.ndarray, v: np.ndarray, D: int, causal: bool) -> np.ndarray:
    o = np.zeros(q.shape, dtype=np.uint16)
    dsl.interpret(attention.attention_hopper, *(bits(x, dsl.bf16) for x in (q, k, v, o)), D=D, CAUSAL=causal)
    return as_float64(o)


@pytest.mark.parametrize("causal", [False, True])
def test_two_query_heads_share_a_kv_head_in_each_of_two_batch_entries(attention, causal):
    """B=2, HQ=2, HKV=1: flat query heads 0, 1 read K/V head 0 and heads 2, 3 read head 1;
    two K/V tiles per block, so the pipelined loop runs with the mapped coordinates."""
    q = bf16_values(2 * 2, 256, 64)
    k, v = bf16_values(2 * 1, 256, 64), bf16_values(2 * 1, 256, 64)
    got = run(attention, q, k, v, 64, causal)
    np.testing.assert_allclose(got, gqa_reference(q, k, v, 2, causal), rtol=0, atol=1.5e-2)


def test_four_query_heads_per_kv_head_at_head_dim_128(attention):
    """Llama 3's group of 4 (32 query heads over 8), at head dim 128: HQ=4 over HKV=1, causal."""
    q = bf16_values(4, 128, 128)
    k, v = bf16_values(1, 128, 128), bf16_values(1, 128, 128)
    got = run(attention, q, k, v, 128, True)
    np.testing.assert_allclose(got, gqa_reference(q, k, v, 1, True), rtol=0, atol=1.5e-2)


def test_query_heads_that_are_no_multiple_of_the_kv_heads_are_refused(attention):
    q, o = bf16_values(3, 128, 64), np.zeros((3, 128, 64), dtype=np.uint16)
    k = v = bf16_values(2, 128, 64)
    with pytest.raises(ArgumentError, match=r"q's heads must be a multiple of k's and v's \(GQA\)"):
        dsl.interpret(attention.attention_hopper, *(bits(x, dsl.bf16) for x in (q, k, v, o)), D=64)
