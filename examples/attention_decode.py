"""Decode attention (one query token per sequence, a long KV cache, grouped-query heads), split
over the KV length as flash-decoding does: `o = softmax(q k[:kv_len]^T / sqrt(D)) v[:kv_len]`.

q and o are (B, HQ, D) bf16, the caches (B, HKV, L_max, D) bf16 with HQ = GROUP * HKV; every
sequence attends to positions [0, kv_len). Decode is memory-bound: each K/V byte is read once,
so the work is spread over enough blocks to keep every SM streaming even at B = 1.

- `decode_split_kernel`: one block per (batch, KV head, chunk of the cache). It streams its
  chunk through a ring of shared-memory stages with `cp.async` (16-byte copies that zero-fill
  rows at or past `kv_len`, so stale cache entries are never read), and serves ALL the GROUP
  query heads of that KV head from each K/V read. Each warp takes 16 keys of every 64-key
  tile on the tensor cores: S = Q K^T on `mma.sync` m16n8k16 with the GROUP query heads as
  the first rows of its 16 (the rest is padding: tensor cores have throughput to spare here,
  memory does not), an online softmax in f32 (log2 units; the four lanes of a quad share a
  head), then O += P V with P in bf16. The four warps' partial (max, sum, O) merge in shared
  memory; the block writes them to the workspace, or, when the cache is not split, the
  normalised output straight into `o`.
- `decode_combine_kernel`: merges the chunks of each (batch, query head) with log-sum-exp
  rescaling into `o` (launched with an empty grid, so not at all, when there is one chunk).

The number of chunks comes from `kv_len`, B * HKV and `dsl.sm_count()`: enough blocks for every
SM's resident slots, chunks of at least MIN_CHUNK keys, and at most what `ws` holds.

**Workspace.** A `@dsl.jit` function cannot allocate memory, so the caller passes `ws`: f32,
(rows, D + 4), rows >= B * HQ, any contents. It bounds the chunks to rows // (B * HQ);
`workspace_shape(B, HQ, HKV, D)` is the shape that never limits them on the current GPU.

    python examples/attention_decode.py    # on an H100 / H200: checks against torch SDPA
"""

from __future__ import annotations

import math
from typing import Any

import dsl
from dsl import Constexpr, Float32, Int32, Tensor, bf16, f32

BN = 64  # keys per shared-memory stage: 16 per warp
WARPS = 4
THREADS = 32 * WARPS
MIN_CHUNK = 128  # keys per split at least: shorter chunks cost more to merge than they save
MAX_SPLITS = 64  # chunks per sequence at most, in `workspace_shape`
COMBINE_THREADS = 128
COMBINE_UNROLL = 8  # chunks a thread loads at once in the merge
NEG_INF = -math.inf
M_START = -1.0e30  # the running maximum before any key: finite, so a warp that saw none rescales by 1, not NaN
LOG2E = 1.4426950408889634


def stages_for(head_dim: int) -> int:
    """K/V stages in the ring: 3 x 32 KiB at head dim 128 (two blocks per SM), 4 x 16 KiB at 64."""
    return 3 if head_dim == 128 else 4


def blocks_per_sm(head_dim: int, group: int) -> int:
    """The split kernel's blocks one SM holds at once: shared memory is the limit (228 KiB per
    SM, 1 KiB of it reserved per block; registers allow three blocks of 128 threads)."""
    ring = stages_for(head_dim) * 2 * BN * head_dim * 2
    merge = WARPS * group * (head_dim + 2) * 4
    return max(1, min(3, 233472 // (ring + merge + 1024)))


def workspace_shape(batch: int, q_heads: int, kv_heads: int, head_dim: int, sm_count: int | None = None
                    ) -> tuple[int, int]:
    """The `ws` shape that holds as many chunks as `attention_decode` picks on a GPU of
    `sm_count` SMs (default: the current GPU's, see `dsl.sm_count`): (B * HQ * chunks, D + 4)
    f32, one row per (batch, query head, chunk): its unnormalised output, maximum and sum."""
    sms = dsl.sm_count() if sm_count is None else sm_count
    fill = sms * blocks_per_sm(head_dim, q_heads // kv_heads) // (batch * kv_heads)
    return batch * q_heads * max(1, min(MAX_SPLITS, fill)), head_dim + 4


def load_stage(tiles: Any, stage: Any, tile: Any) -> None:
    """Starts the 16-byte copies of keys [tile * BN, +BN) of this block's chunk into `stage`; rows
    at or past kv_len read nothing and are zero-filled (their scores are masked below)."""
    sk, sv, k_cache, v_cache, b, kvh, first, kv_len, tid, D = tiles
    per_row = D // 8  # 16-byte copies per K/V row
    row = tid // per_row
    col = (tid % per_row) * 8
    for i in dsl.static_range(BN * per_row // THREADS):
        r = row + i * (THREADS // per_row)
        key = first + tile * BN + r
        src = dsl.min(key, kv_len - 1)
        dsl.cp_async(sk, (stage, col // 64, r, col % 64), k_cache, (b, kvh, src, col), mask=key < kv_len)
        dsl.cp_async(sv, (stage, col // 64, r, col % 64), v_cache, (b, kvh, src, col), mask=key < kv_len)


@dsl.kernel(known_block_size=[THREADS, 1, 1], minnctapersm=2)
def decode_split_kernel(q: Tensor[bf16, 3], k_cache: Tensor[bf16, 4], v_cache: Tensor[bf16, 4], o: Tensor[bf16, 3],
                        ws: Tensor[f32, 2], kv_len: Int32, chunk: Int32, splits: Int32, scale: Float32,
                        D: Constexpr[int], G: Constexpr[int], STAGES: Constexpr[int]):
    """One (chunk, KV head, batch) per block: the chunk's partial softmax statistics and output for
    the G query heads of the KV head, each K/V byte read once (see the module's docstring)."""
    smem = dsl.SharedAllocator(dynamic=True)
    sk = smem.array(bf16, (STAGES, D // 64, BN, 64), swizzle=128)
    sv = smem.array(bf16, (STAGES, D // 64, BN, 64), swizzle=128)
    part_o = smem.array(f32, (WARPS, G, D))
    part_m = smem.array(f32, (WARPS, G))
    part_l = smem.array(f32, (WARPS, G))
    split = dsl.block_idx.x
    kvh = dsl.block_idx.y
    b = dsl.block_idx.z
    tid = dsl.thread_idx.x
    lane = tid % 32
    warp = tid // 32
    g = lane // 4  # this lane's rows of every fragment: heads g and g + 8
    t = lane % 4
    head0 = kvh * G
    first = split * chunk
    n_tiles = dsl.cdiv(dsl.min(chunk, kv_len - first), BN)
    tiles = (sk, sv, k_cache, v_cache, b, kvh, first, kv_len, tid, D)
    rows = 2 if G > 8 else 1  # fragment rows holding real heads: g, and g + 8 when GROUP > 8

    for s in dsl.static_range(STAGES - 1):
        if s < n_tiles:
            load_stage(tiles, s, s)
        dsl.cp_async_commit()

    # Q as the A operand (16 heads x 16 of D per k step); rows past GROUP repeat the last head
    # (their results are dropped), rows g + 8 are zero unless GROUP > 8.
    zero = dsl.cast(0.0, bf16)
    top = head0 + dsl.min(g, G - 1)
    low = head0 + dsl.min(g + 8, G - 1)
    qa = []
    for c in dsl.static_range(D // 16):
        a0 = q.vload((b, top, 16 * c + 2 * t), 2)
        a2 = q.vload((b, top, 16 * c + 2 * t + 8), 2)
        if rows == 2:
            a1 = q.vload((b, low, 16 * c + 2 * t), 2)
            a3 = q.vload((b, low, 16 * c + 2 * t + 8), 2)
            qa.append(dsl.vector(a0[0], a0[1], a1[0], a1[1], a2[0], a2[1], a3[0], a3[1]))
        else:
            qa.append(dsl.vector(a0[0], a0[1], zero, zero, a2[0], a2[1], zero, zero))

    m = [M_START] * rows  # running maximum of each of the lane's heads (log2 units)
    total = [0.0] * rows  # this lane's part of each head's sum
    acc = [dsl.zeros(f32, 4) for _ in dsl.static_range(D // 8)]  # O (16 heads x D) as D / 8 fragments
    key0 = warp * 16  # this warp's 16 keys of every tile
    for tile in range(n_tiles):
        dsl.cp_async_wait(STAGES - 2)
        dsl.barrier()  # tile is here, and every warp is done with the stage the next copies refill
        following = tile + STAGES - 1
        if following < n_tiles:  # issued before the MMAs, so STAGES - 1 tiles stay in flight
            load_stage(tiles, following % STAGES, following)
        dsl.cp_async_commit()
        stage = tile % STAGES
        s0 = dsl.zeros(f32, 4)  # S for keys key0 + 0..7 and key0 + 8..15
        s1 = dsl.zeros(f32, 4)
        for c in dsl.static_range(D // 16):
            kb = dsl.ldmatrix(sk, (stage, c // 4, key0 + (lane // 16) * 8 + lane % 8,
                                   (c % 4) * 16 + ((lane // 8) % 2) * 8))
            s0 = dsl.mma_sync(qa[c], kb[0:4], s0)
            s1 = dsl.mma_sync(qa[c], kb[4:8], s1)
        base = first + tile * BN + key0 + 2 * t
        keys = [base, base + 1, base + 8, base + 9]  # of s0[h], s0[h + 1], s1[h], s1[h + 1]
        p = [[0.0] * 4 for _ in dsl.static_range(2)]
        alpha = [1.0] * rows
        for h in dsl.static_range(rows):
            x = [s0[2 * h], s0[2 * h + 1], s1[2 * h], s1[2 * h + 1]]
            x = [x[k] if keys[k] < kv_len else NEG_INF for k in dsl.static_range(4)]
            best = dsl.warp_reduce(dsl.max(dsl.max(x[0], x[1]), dsl.max(x[2], x[3])), "max", width=4)
            m_new = dsl.max(m[h], best * scale)
            alpha[h] = dsl.exp2(m[h] - m_new)
            p[h] = [dsl.exp2(x[k] * scale - m_new) for k in dsl.static_range(4)]
            total[h] = total[h] * alpha[h] + ((p[h][0] + p[h][1]) + (p[h][2] + p[h][3]))
            m[h] = m_new
        pa = dsl.cast(dsl.vector(p[0][0], p[0][1], p[1][0], p[1][1], p[0][2], p[0][3], p[1][2], p[1][3]), bf16)
        if rows == 2:
            scale_rows = dsl.vector(alpha[0], alpha[0], alpha[1], alpha[1])
            acc = [acc[n] * scale_rows for n in dsl.static_range(D // 8)]
        else:
            acc = [acc[n] * alpha[0] for n in dsl.static_range(D // 8)]
        for j in dsl.static_range(D // 16):
            vb = dsl.ldmatrix(sv, (stage, j // 4, key0 + lane % 16, (j % 4) * 16 + (lane // 16) * 8),
                              transpose=True)
            acc[2 * j] = dsl.mma_sync(pa, vb[0:4], acc[2 * j])
            acc[2 * j + 1] = dsl.mma_sync(pa, vb[4:8], acc[2 * j + 1])

    # The warps' partial results, merged in shared memory.
    for h in dsl.static_range(rows):
        head = g + 8 * h
        part = dsl.warp_reduce(total[h], "sum", width=4)
        if head < G:
            for n in dsl.static_range(D // 8):
                part_o.vstore((warp, head, 8 * n + 2 * t), acc[n][2 * h:2 * h + 2])
            if t == 0:
                part_m[warp, head] = m[h]
                part_l[warp, head] = part
    dsl.barrier()
    HQ = q.shape[1]
    for i in dsl.static_range(dsl.cdiv(G * D // 4, THREADS)):
        e = tid + i * THREADS
        if e < G * D // 4:
            r = e // (D // 4)
            d = (e % (D // 4)) * 4
            ms = [part_m[w, r] for w in dsl.static_range(WARPS)]
            top_m = dsl.max(*ms)
            weights = [dsl.exp2(ms[w] - top_m) for w in dsl.static_range(WARPS)]
            out = part_o.vload((0, r, d), 4) * weights[0]
            den = part_l[0, r] * weights[0]
            for w in dsl.static_range(1, WARPS):
                out = out + part_o.vload((w, r, d), 4) * weights[w]
                den = den + part_l[w, r] * weights[w]
            if splits == 1:
                o.vstore((b, head0 + r, d), dsl.cast(out * (1.0 / den), bf16))
            else:
                row = (b * HQ + head0 + r) * splits + split
                ws.vstore((row, d), out)
                if d == 0:
                    ws[row, D] = top_m
                    ws[row, D + 1] = den


@dsl.kernel(known_block_size=[COMBINE_THREADS, 1, 1], minnctapersm=4)  # a few blocks of B * HQ: residency is no concern
def decode_combine_kernel(ws: Tensor[f32, 2], o: Tensor[bf16, 3], splits: Int32, D: Constexpr[int]):
    """Merges the chunks of one (batch, query head) per block: o = sum_s 2^(m_s - M) O_s /
    sum_s 2^(m_s - M) l_s. The maximum M first (a lane per chunk), then groups of D / 4 threads
    take COMBINE_UNROLL chunks at a time, their loads issued together (a chunk's row is in L2:
    what costs is the round trip, not the bytes), and the groups' sums meet in shared memory."""
    per_row = D // 4  # threads per output row, four elements each
    groups = COMBINE_THREADS // per_row
    smem = dsl.SharedAllocator()
    part = smem.array(f32, (groups, D))
    part_den = smem.array(f32, groups)
    tid = dsl.thread_idx.x
    lane = tid % 32
    grp = tid // per_row
    d = (tid % per_row) * 4
    row = dsl.block_idx.x  # b * HQ + h
    first = row * splits
    top = M_START
    for s in range(lane, splits, 32):
        top = dsl.max(top, ws[first + s, D])
    top = dsl.warp_reduce(top, "max")
    out = dsl.zeros(f32, 4)
    den = 0.0
    for s0 in range(grp * COMBINE_UNROLL, splits, groups * COMBINE_UNROLL):
        idx = [dsl.min(splits - 1, s0 + k) for k in dsl.static_range(COMBINE_UNROLL)]
        ms = [ws[first + i, D] for i in idx]
        ls = [ws[first + i, D + 1] for i in idx]
        vs = [ws.vload((first + i, d), 4) for i in idx]
        for k in dsl.static_range(COMBINE_UNROLL):
            w = dsl.exp2(ms[k] - top) if s0 + k < splits else 0.0
            out = out + vs[k] * w
            den = den + ls[k] * w
    part.vstore((grp, d), out)
    if d == 0:
        part_den[grp] = den
    dsl.barrier()
    if grp == 0:
        for g in dsl.static_range(1, groups):
            out = out + part.vload((g, d), 4)
            den = den + part_den[g]
        HQ = o.shape[1]
        o.vstore((row // HQ, row % HQ, d), dsl.cast(out * (1.0 / den), bf16))


@dsl.jit
def attention_decode(q: Tensor[bf16, 3], k_cache: Tensor[bf16, 4], v_cache: Tensor[bf16, 4], o: Tensor[bf16, 3],
                     kv_len: Int32, ws: Tensor[f32, 2], D: Constexpr[int] = 128, GROUP: Constexpr[int] = 4,
                     SPLITS: Constexpr[int] = 0):
    """SPLITS = 0 picks the number of chunks from the shapes and the GPU; another value asks for
    that many (still at most what `ws` holds and one per key)."""
    B, HQ = q.shape[0], q.shape[1]
    HKV, L = k_cache.shape[1], k_cache.shape[2]
    assert D == 64 or D == 128, "head_dim must be 64 or 128"
    assert 1 <= GROUP <= 16, "GROUP (query heads per KV head) must be 1 to 16"
    assert q.shape[2] == D and o.shape[0] == B and o.shape[1] == HQ and o.shape[2] == D, "q and o: (B, HQ, D)"
    assert HQ == HKV * GROUP, "HQ must be GROUP * HKV (pass GROUP=HQ // HKV)"
    assert k_cache.shape[0] == B and k_cache.shape[3] == D, "k_cache: (B, HKV, L_max, D)"
    assert v_cache.shape[0] == B and v_cache.shape[1] == HKV and v_cache.shape[2] == L and v_cache.shape[3] == D, \
        "v_cache must have k_cache's shape"
    assert kv_len >= 1 and kv_len <= L, "kv_len must be in [1, L_max]"
    assert ws.shape[1] == D + 4 and ws.shape[0] >= B * HQ, \
        "ws: f32 (rows, D + 4) with rows >= B * HQ (see workspace_shape)"
    fill = max(1, min(dsl.sm_count() * blocks_per_sm(D, GROUP) // (B * HKV), dsl.cdiv(kv_len, MIN_CHUNK)))
    wanted = fill if SPLITS == 0 else SPLITS
    chunk = dsl.cdiv(dsl.cdiv(kv_len, max(1, min(wanted, ws.shape[0] // (B * HQ)))), BN) * BN
    splits = dsl.cdiv(kv_len, chunk)  # every chunk holds at least one key
    scale = LOG2E / math.sqrt(D)  # softmax scale in log2 units: exp(x) = exp2(x * log2(e))
    decode_split_kernel(q, k_cache, v_cache, o, ws, kv_len, chunk, splits, scale, D, GROUP, stages_for(D)).launch(
        grid=(splits, HKV, B), block=THREADS)
    # one chunk: the split kernel wrote o itself, and an empty grid launches nothing
    decode_combine_kernel(ws, o, splits, D).launch(grid=min(splits - 1, 1) * B * HQ, block=COMBINE_THREADS)


if __name__ == "__main__":
    import torch
    import torch.nn.functional as F

    B, HQ, HKV, L, D, kv_len = 4, 32, 8, 32768, 128, 30001
    q = torch.randn(B, HQ, D, device="cuda").bfloat16()
    k_cache, v_cache = (torch.randn(B, HKV, L, D, device="cuda").bfloat16() for _ in range(2))
    o = torch.empty_like(q)
    ws = torch.empty(workspace_shape(B, HQ, HKV, D), device="cuda", dtype=torch.float32)
    attention_decode(q, k_cache, v_cache, o, kv_len, ws)
    ref = F.scaled_dot_product_attention(q.unsqueeze(2), k_cache[:, :, :kv_len], v_cache[:, :, :kv_len],
                                         enable_gqa=True).squeeze(2)
    print("max error", (o.float() - ref.float()).abs().max().item())
