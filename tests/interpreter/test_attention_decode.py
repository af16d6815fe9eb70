"""Decode attention (`examples/attention_decode.py`) in the interpreter: one query token per
sequence against a KV cache longer than `kv_len`, grouped-query heads, split over the KV length.

Every cache entry at or past `kv_len` holds NaN, so a kernel that reads one, or lets a masked
key into the softmax or P V, fails. The float64 NumPy reference spells out the GQA mapping
(query head h reads KV head h // (HQ // HKV)) and attends to [0, kv_len) only. The bound each
element must meet is the kernel's own rounding: P is rounded to bf16 before P V (at most 2^-9
of sum_i p_i |v_i| / sum_i p_i) and the output to bf16 (2^-8 of |o|). Shapes are small (the
module takes a few seconds on a CPU): B=2, HQ=4, HKV=2, L_max=320.
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
RNG = np.random.default_rng(5)
B, HQ, HKV, L_MAX = 2, 4, 2, 320
NAN_BF16 = 0x7FC0


@pytest.fixture(scope="module")
def decode() -> ModuleType:
    """examples/attention_decode.py, imported from its file."""
    spec = importlib.util.spec_from_file_location("kdsl_example_attention_decode", EXAMPLES / "attention_decode.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bf16_values(*shape: int, scale: float = 1.0) -> np.ndarray:
    """Random bf16 bits (rounded to nearest even by the GPU runtime's own helper)."""
    values = RNG.standard_normal(shape, dtype=np.float32).reshape(-1) * np.float32(scale)
    return np.array([_bf16_bits(float(v)) for v in values], dtype=np.uint16).reshape(shape)


def as_float64(raw: np.ndarray) -> np.ndarray:
    return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


@pytest.fixture(scope="module")
def caches() -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(q, k_cache, v_cache) bits per head dim; q scaled by 2 so a few keys dominate each head."""
    return {D: (bf16_values(B, HQ, D, scale=2.0), bf16_values(B, HKV, L_MAX, D), bf16_values(B, HKV, L_MAX, D))
            for D in (64, 128)}


def past_kv_len_is_nan(cache: np.ndarray, kv_len: int) -> np.ndarray:
    stale = cache.copy()
    stale[:, :, kv_len:] = NAN_BF16
    return stale


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, kv_len: int) -> tuple[np.ndarray, np.ndarray]:
    """softmax(q k^T / sqrt(D)) v over keys [0, kv_len) in float64, and the bound on the error
    the kernel's roundings allow at each element."""
    group = q.shape[1] // k.shape[1]
    kv_of = [h // group for h in range(q.shape[1])]
    qf = as_float64(q)
    kf, vf = (as_float64(x[:, kv_of, :kv_len]) for x in (k, v))
    s = np.einsum("bhd,bhld->bhl", qf, kf) / math.sqrt(q.shape[-1])
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = np.einsum("bhl,bhld->bhd", p, vf)
    bound = np.abs(out) * 2.0**-8 + np.einsum("bhl,bhld->bhd", p, np.abs(vf)) * 2.0**-9 + 1e-6
    return out, bound


def run(decode: ModuleType, q: np.ndarray, k: np.ndarray, v: np.ndarray, kv_len: int, ws_rows: int | None = None,
        **knobs: int) -> tuple[np.ndarray, np.ndarray]:
    """o (as float64) and the workspace after one call; the workspace starts as NaN."""
    b, hq, d = q.shape
    o = np.zeros(q.shape, dtype=np.uint16)
    ws = np.full((ws_rows or b * hq * 64, d + 4), np.nan, dtype=np.float32)
    dsl.interpret(decode.attention_decode, *(bits(x, dsl.bf16) for x in (q, k, v, o)), kv_len, ws, D=d,
                  GROUP=hq // k.shape[1], **knobs)
    return as_float64(o), ws


def assert_within(got: np.ndarray, expected: tuple[np.ndarray, np.ndarray]) -> None:
    out, bound = expected
    excess = np.abs(got - out) - bound
    worst = np.unravel_index(excess.argmax(), got.shape)
    assert excess.max() <= 0, f"off by {np.abs(got - out)[worst]} (bound {bound[worst]}) at {worst}"


@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("kv_len", [1, 37, 300])
def test_matches_the_reference_and_never_reads_past_kv_len(decode, caches, D, kv_len):
    """kv_len 1 and 37: one chunk, written straight into o (37 ends inside the first tile);
    300: chunks of 128 keys merged by the combine kernel, the last one 44 keys long."""
    q, k, v = caches[D]
    k, v = past_kv_len_is_nan(k, kv_len), past_kv_len_is_nan(v, kv_len)
    got, _ = run(decode, q, k, v, kv_len)
    assert_within(got, reference(q, k, v, kv_len))


def test_forced_chunks_end_anywhere_and_merge_to_the_unsplit_result(decode, caches):
    """SPLITS=5 at kv_len=300: five chunks of 64 keys (one tile each, the last one 44 keys),
    each row of the workspace holding a chunk's output, maximum and sum; SPLITS=1 gives one
    chunk of all 300 keys, and the two results agree with the reference alike."""
    q, k, v = caches[64]
    k, v = past_kv_len_is_nan(k, 300), past_kv_len_is_nan(v, 300)
    split, ws = run(decode, q, k, v, 300, SPLITS=5)
    assert np.isfinite(ws[:B * HQ * 5, :66]).all() and np.isnan(ws[B * HQ * 5:]).all()  # 66: D, then m and l
    whole, _ = run(decode, q, k, v, 300, SPLITS=1)
    expected = reference(q, k, v, 300)
    assert_within(split, expected)
    assert_within(whole, expected)


def test_a_workspace_of_one_row_per_head_means_one_chunk(decode, caches):
    """ws with B * HQ rows holds one chunk per head: however many the GPU would want, the
    cache is not split (the combine kernel is not launched and the workspace not touched)."""
    q, k, v = caches[128]
    got, ws = run(decode, q, k, v, 300, ws_rows=B * HQ)
    assert np.isnan(ws).all()
    assert_within(got, reference(q, k, v, 300))


def test_sixteen_query_heads_per_kv_head_fill_both_fragment_rows(decode):
    """GROUP=16 (HQ=16, HKV=1): heads 8-15 sit in the fragments' second rows (g + 8), with
    their own maxima and sums; three chunks at kv_len=300."""
    q, k, v = bf16_values(1, 16, 64, scale=2.0), bf16_values(1, 1, L_MAX, 64), bf16_values(1, 1, L_MAX, 64)
    k, v = past_kv_len_is_nan(k, 300), past_kv_len_is_nan(v, 300)
    got, _ = run(decode, q, k, v, 300)
    assert_within(got, reference(q, k, v, 300))


@pytest.mark.parametrize(("kv_len", "ws_rows", "message"), [
    (0, None, r"kv_len must be in \[1, L_max\]"),
    (L_MAX + 1, None, r"kv_len must be in \[1, L_max\]"),
    (10, B * HQ - 1, r"ws: f32 \(rows, D \+ 4\) with rows >= B \* HQ"),
])
def test_out_of_range_lengths_and_short_workspaces_are_refused(decode, caches, kv_len, ws_rows, message):
    q, k, v = caches[64]
    with pytest.raises(ArgumentError, match=message):
        run(decode, q, k, v, kv_len, ws_rows=ws_rows)


def test_query_heads_must_be_group_times_kv_heads(decode, caches):
    q, k, v = caches[64]
    o = np.zeros(q.shape, dtype=np.uint16)
    ws = np.zeros((B * HQ * 4, 68), dtype=np.float32)
    with pytest.raises(ArgumentError, match=r"HQ must be GROUP \* HKV"):
        dsl.interpret(decode.attention_decode, *(bits(x, dsl.bf16) for x in (q, k, v, o)), 10, ws, D=64, GROUP=4)


def test_workspace_shape_holds_the_chunks_the_gpu_fills(decode):
    """132 SMs, two blocks each at head dim 128: 264 slots over B * HKV = 8 groups is 33 chunks
    per sequence; a batch that fills the GPU by itself needs one."""
    assert decode.workspace_shape(1, 32, 8, 128, sm_count=132) == (32 * 33, 132)
    assert decode.workspace_shape(64, 32, 8, 128, sm_count=132) == (64 * 32, 132)
    assert decode.workspace_shape(1, 32, 8, 64, sm_count=132) == (32 * 49, 68)  # three blocks per SM
