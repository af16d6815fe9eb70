"""Decode attention (`examples/attention_decode.py`) on the GPU (marked gpu) against
`torch.nn.functional.scaled_dot_product_attention` over the cache slice [:kv_len], with grouped
query heads (`enable_gqa=True`): Llama 3 shapes (HQ=32, HKV=8), head dim 128 and 64, a batch
of four, one long sequence split over every SM, and a short cache left unsplit.

The cache past kv_len holds NaN, as a reused cache may, so a read past the end shows. The
reference is SDPA in float64, and each element must be within the kernel's own rounding: P in
bf16 (2^-9 of softmax(q k^T) |v|, which is SDPA with |v|) plus the bf16 output (2^-8 of |o|).
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu


def sdpa(torch, q, k, v):
    """SDPA of one query token per sequence, in float64, each query head on its group's KV head."""
    import torch.nn.functional as F

    q, k, v = (x.double() for x in (q.unsqueeze(2), k, v))
    try:
        out = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    except TypeError:  # torch before 2.5: repeat the KV heads instead
        group = q.shape[1] // k.shape[1]
        out = F.scaled_dot_product_attention(q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1))
    return out.squeeze(2)


def assert_matches_sdpa(torch, q, k_cache, v_cache, o, kv_len: int) -> None:
    k, v = k_cache[:, :, :kv_len], v_cache[:, :, :kv_len]
    ref = sdpa(torch, q, k, v)
    bound = ref.abs() * 2.0**-8 + sdpa(torch, q, k, v.abs()) * 2.0**-9 + 1e-5
    err = (o.double() - ref).abs()
    worst = int((err - bound).argmax())
    assert bool((err <= bound).all()), \
        f"kv_len={kv_len}: off by {err.flatten()[worst].item()} (bound {bound.flatten()[worst].item()}) at {worst}"


def check(torch, B: int, kv_len: int, L_max: int, D: int, HQ: int = 32, HKV: int = 8, ws_chunks: int | None = None,
          **knobs: int) -> None:
    """One call on fresh tensors: NaN past kv_len in the caches, and in o and ws before the call."""
    from attention_decode import attention_decode, workspace_shape

    q = (torch.randn(B, HQ, D, device="cuda") * 2).bfloat16()
    k_cache, v_cache = (torch.randn(B, HKV, L_max, D, device="cuda").bfloat16() for _ in range(2))
    k_cache[:, :, kv_len:] = float("nan")
    v_cache[:, :, kv_len:] = float("nan")
    o = torch.full_like(q, float("nan"))
    shape = workspace_shape(B, HQ, HKV, D) if ws_chunks is None else (B * HQ * ws_chunks, D + 4)
    ws = torch.full(shape, float("nan"), device="cuda")
    attention_decode(q, k_cache, v_cache, o, kv_len, ws, D=D, GROUP=HQ // HKV, **knobs)
    assert_matches_sdpa(torch, q, k_cache, v_cache, o, kv_len)


@pytest.mark.parametrize("D", [128, 64])
def test_a_batch_of_four_matches_sdpa_with_a_partial_last_tile(torch, D):
    """B=4 over 8 KV heads: 32 groups, 8 chunks each on 132 SMs; kv_len=5000 is no multiple of
    the 64-key tile, nor of the chunk."""
    check(torch, 4, 5000, 8192, D)


def test_one_long_sequence_is_split_over_every_sm(torch):
    """B=1, kv_len=32768: 8 groups, so each KV head's cache is cut into about 33 chunks."""
    check(torch, 1, 32768, 32768, 128)


def test_a_short_cache_of_a_large_batch_is_not_split(torch):
    """B=64 fills the GPU by itself: one chunk per sequence, written straight into o."""
    check(torch, 64, 100, 1024, 128)


def test_growing_kv_len_reuses_the_workspace(torch):
    """A decode loop: one workspace (stale rows from the step before) at kv_len 1 to 300."""
    from attention_decode import attention_decode, workspace_shape

    B, HQ, HKV, D = 2, 32, 8, 128
    q = (torch.randn(B, HQ, D, device="cuda") * 2).bfloat16()
    k_cache, v_cache = (torch.randn(B, HKV, 512, D, device="cuda").bfloat16() for _ in range(2))
    o = torch.empty_like(q)
    ws = torch.empty(workspace_shape(B, HQ, HKV, D), device="cuda")
    for kv_len in (1, 2, 63, 64, 65, 129, 300):
        attention_decode(q, k_cache, v_cache, o, kv_len, ws)
        assert_matches_sdpa(torch, q, k_cache, v_cache, o, kv_len)


def test_forced_splits_agree_with_sdpa(torch):
    """SPLITS=1 (one block per KV head for all 10000 keys) and SPLITS=40 (more chunks than the
    automatic 16, in a workspace that holds 64)."""
    check(torch, 2, 10000, 10000, 128, SPLITS=1)
    check(torch, 2, 10000, 10000, 128, ws_chunks=64, SPLITS=40)
