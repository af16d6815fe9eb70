"""FlashAttention-style forward on Hopper: `o = softmax(q k^T * scale) v`, bf16, head dim 64
or 128, causal or not, with f32 softmax statistics and accumulation.

q and o are [batch * heads, seq_len, head_dim], k and v [batch * kv_heads, seq_len, head_dim],
the heads of one batch entry next to one another. With fewer K/V heads than query heads
(grouped-query attention: heads % kv_heads == 0) each run of `group = heads // kv_heads`
query heads shares a K/V head: query head h reads K/V head h // group, which is head
(h % heads_per_entry) // group of the same batch entry, as heads_per_entry is a multiple of
group. Only the TMA coordinates of K and V change; group 1 is multi-head attention. q, k and
v are read through TMA maps (contiguous); o is written through its strides, so it may be a
view with unit inner stride, such as `o_sh.permute(1, 0, 2)` of an [S, heads, D] buffer:
the [S, heads * D] rows an output projection reads.

Each block computes 128 query rows of one head with three warpgroups. The producer loads the
block's Q tile once and streams 128-row K and V tiles through a ring of shared-memory stages
with TMA. Each of the two consumer warpgroups owns 64 query rows and is pipelined by one
tile, as FlashAttention-3 does: in one turn it issues S_j = Q K_j^T and O += P_{j-1} V_{j-1} with
`wgmma` (A and B from shared memory for S; P from registers and V N-major for P V), then
computes the online softmax of S_j (running row maximum and sum in registers; quads of
lanes share a row, so row statistics take two shuffles) while P_{j-1} V_{j-1} still runs,
rescales O and frees the stage. The two consumers take turns at the tensor cores through
two named barriers (ping-pong: each waits for its turn before issuing its MMAs and hands
the turn over right after), so one's softmax runs while the other's MMAs do. Causal blocks
stop at the diagonal tile, mask it, and run heaviest first.

    python examples/attention_hopper.py    # on an H100 / H200: checks against torch SDPA, prints TFLOP/s
"""

import math
from typing import Any

import dsl
from dsl import Constexpr, Float32, Int32, Tensor, bf16, f32

BM = 128  # query rows per block: two consumer warpgroups of 64
BKV = 128  # key / value rows per stage
THREADS = 384
NEG_INF = -math.inf


def stages_for(head_dim: int) -> int:
    """K/V stages in flight: three (at head dim 128, 3 x 64 KiB and the 32 KiB Q tile fill
    shared memory; measured faster than two, and than four at head dim 64)."""
    return 3


def tile_scores(sq: Any, sk: Any, stage: Any, row0: Any, D: int) -> Any:
    """S = Q K^T for this warpgroup's 64 rows and the K tile in `stage` (issued, not waited for)."""
    scores = dsl.zeros(dsl.f32, BKV // 2)
    for c in dsl.static_range(D // 64):
        scores = dsl.wgmma(scores, sq, (c, row0), sk, (stage, c, 0))
    return scores


def tree_max(values: Any) -> Any:
    """The maximum of a list of values, combined pairwise (a tree, not a chain: its depth, not
    its length, is the latency)."""
    half = len(values) // 2
    return values[0] if len(values) == 1 else dsl.max(tree_max(values[:half]), tree_max(values[half:]))


def tree_sum(values: Any) -> Any:
    half = len(values) // 2
    return values[0] if len(values) == 1 else tree_sum(values[:half]) + tree_sum(values[half:])


def online_softmax(scores: Any, m: Any, total: Any, scale: Any, q0: Any, row: Any, q: Any, j: Any,
                   causal: bool) -> Any:
    """P for K tile `j` (bf16, the A operand of P V), the new row maxima and partial row sums,
    and the factor the output accumulated so far must be scaled by. Lane k of the scores is
    row `row + 8 * (k % 4 // 2)`, column `8 * (k // 4) + 2 * q + k % 2` of the tile; maxima
    are in log2 units (`scale` includes log2(e)), so each probability is one FMA and one exp2."""
    x = [scores[k] for k in dsl.static_range(BKV // 2)]
    if causal:
        if (j + 1) * BKV > q0:  # the diagonal tile: a key column after the query row is masked
            x = [x[k] if j * BKV + 8 * (k // 4) + 2 * q + k % 2 <= row + 8 * (k % 4 // 2) else NEG_INF
                 for k in dsl.static_range(BKV // 2)]
    alpha = [0.0, 0.0]
    new_m = [0.0, 0.0]
    for h in dsl.static_range(2):  # the thread's two rows
        top = tree_max([x[k] for k in dsl.static_range(BKV // 2) if k % 4 // 2 == h])
        top = dsl.max(m[h], dsl.warp_reduce(top, "max", width=4) * scale)  # the 4 lanes of a quad share the row
        alpha[h] = dsl.exp2(m[h] - top)
        new_m[h] = top
    p = [dsl.exp2(x[k] * scale - new_m[k % 4 // 2]) for k in dsl.static_range(BKV // 2)]
    new_total = [alpha[h] * total[h] + tree_sum([p[k] for k in dsl.static_range(BKV // 2) if k % 4 // 2 == h])
                 for h in dsl.static_range(2)]
    return dsl.cast(dsl.vector(*p), dsl.bf16), new_m, new_total, alpha


def shared_tiles(D: int, STAGES: int) -> Any:
    """The block's shared memory (Q tile, K and V rings, their barriers), initialised."""
    smem = dsl.SharedAllocator(dynamic=True)
    sq = smem.array(dsl.bf16, (D // 64, BM, 64), swizzle=128)
    sk = smem.array(dsl.bf16, (STAGES, D // 64, BKV, 64), swizzle=128)
    sv = smem.array(dsl.bf16, (STAGES, D // 64, BKV, 64), swizzle=128)
    q_full = smem.array(dsl.u64, (1,))
    k_full = smem.array(dsl.u64, (STAGES,))
    v_full = smem.array(dsl.u64, (STAGES,))
    empty = smem.array(dsl.u64, (STAGES,))
    if dsl.thread_idx.x == 0:
        dsl.mbarrier_init(q_full, 0, 1)
        for s in dsl.static_range(STAGES):
            dsl.mbarrier_init(k_full, s, 1)
            dsl.mbarrier_init(v_full, s, 1)
            dsl.mbarrier_init(empty, s, 8)  # one arrival per consumer warp
        dsl.fence_mbarrier_init()
    dsl.barrier()
    return sq, sk, sv, q_full, k_full, v_full, empty


def produce(tiles: Any, tq: Any, tk: Any, tv: Any, head: Any, q0: Any, kv_tiles: Any, group: Any, D: int,
            STAGES: int) -> None:
    """The producer warpgroup: the Q tile once, then K and V tiles through the ring (TMA)."""
    sq, sk, sv, q_full, k_full, v_full, empty = tiles
    dsl.setmaxnreg(24, increase=False)
    if dsl.thread_idx.x == 0:
        dsl.mbarrier_expect_tx(q_full, 0, BM * D * 2)
        for c in dsl.static_range(D // 64):
            dsl.tma_load(sq, (c,), tq, (head, q0, 64 * c), q_full, 0)
        kv_head = head // group  # GQA: `group` query heads share this K/V head
        for j in range(kv_tiles):
            s = j % STAGES
            dsl.mbarrier_wait(empty, s, ((j // STAGES) % 2) ^ 1)
            dsl.mbarrier_expect_tx(k_full, s, BKV * D * 2)
            for c in dsl.static_range(D // 64):
                dsl.tma_load(sk, (s, c), tk, (kv_head, j * BKV, 64 * c), k_full, s)
            dsl.mbarrier_expect_tx(v_full, s, BKV * D * 2)
            for c in dsl.static_range(D // 64):
                dsl.tma_load(sv, (s, c), tv, (kv_head, j * BKV, 64 * c), v_full, s)


def consume(tiles: Any, q0: Any, kv_tiles: Any, scale: Any, D: int, CAUSAL: bool, STAGES: int) -> Any:
    """A consumer warpgroup's 64 rows: the output accumulator (not yet divided by the row
    sums), the rows' maxima (log2 units) and this thread's parts of the row sums, and where the
    thread's rows are (`row`, `row + 8`) and its lane in the quad."""
    sq, sk, sv, q_full, k_full, v_full, empty = tiles
    tid = dsl.thread_idx.x
    warpgroup = tid // 128
    lane = tid % 32
    dsl.setmaxnreg(240, increase=True)
    row0 = (warpgroup - 1) * 64
    warp = (tid % 128) // 32
    g = lane // 4
    q = lane % 4
    row = q0 + row0 + warp * 16 + g  # this thread's rows: row and row + 8
    m = [NEG_INF, NEG_INF]  # running maximum of each row, scaled to log2 units
    total = [0.0, 0.0]  # this thread's part of each row's sum
    acc = dsl.zeros(dsl.f32, D // 2)
    dsl.mbarrier_wait(q_full, 0, 0)
    me = warpgroup  # named barrier 1 or 2: this consumer's turn at the tensor cores
    if warpgroup == 2:
        dsl.named_barrier_arrive(1, 256)  # the first consumer goes first
    dsl.mbarrier_wait(k_full, 0, 0)
    dsl.named_barrier(me, 256)
    scores = tile_scores(sq, sk, 0, row0, D)
    dsl.named_barrier_arrive(3 - me, 256)
    scores = dsl.wgmma_wait(scores)
    probs, m, total, alpha = online_softmax(scores, m, total, scale, q0, row, q, 0, CAUSAL)
    for j in range(1, kv_tiles):
        s = j % STAGES
        prev = (j - 1) % STAGES
        dsl.mbarrier_wait(k_full, s, (j // STAGES) % 2)
        dsl.mbarrier_wait(v_full, prev, ((j - 1) // STAGES) % 2)
        dsl.named_barrier(me, 256)  # this consumer's turn: S_j, and P_{j-1} V_{j-1} behind it
        scores = tile_scores(sq, sk, s, row0, D)
        acc = dsl.wgmma(acc, probs, None, sv, (prev,), b_major="n")
        dsl.named_barrier_arrive(3 - me, 256)  # the other consumer's turn
        scores = dsl.wgmma_wait(scores, pending=1)  # S_j is ready; P_{j-1} V_{j-1} may still run
        probs, m, total, alpha = online_softmax(scores, m, total, scale, q0, row, q, j, CAUSAL)
        acc = dsl.wgmma_wait(acc, pending=0)
        if lane == 0:
            dsl.mbarrier_arrive(empty, prev)
        acc = acc * dsl.vector(*[alpha[k % 4 // 2] for k in dsl.static_range(D // 2)])
    last = (kv_tiles - 1) % STAGES
    dsl.mbarrier_wait(v_full, last, ((kv_tiles - 1) // STAGES) % 2)
    dsl.named_barrier(me, 256)
    acc = dsl.wgmma(acc, probs, None, sv, (last,), b_major="n")
    dsl.named_barrier_arrive(3 - me, 256)
    acc = dsl.wgmma_wait(acc)
    if lane == 0:
        dsl.mbarrier_arrive(empty, last)
    return acc, m, total, row, q


def store_output(o: Any, acc: Any, total: Any, head: Any, row: Any, q: Any, D: int) -> Any:
    """o = acc / row sum, in bf16 pairs; returns the row sums."""
    sums = [dsl.warp_reduce(total[h], "sum", width=4) for h in dsl.static_range(2)]
    inv = [1.0 / sums[h] for h in dsl.static_range(2)]
    for k in dsl.static_range(D // 8):
        col = 8 * k + 2 * q
        for h in dsl.static_range(2):
            pair = dsl.vector(dsl.cast(acc[4 * k + 2 * h] * inv[h], dsl.bf16),
                              dsl.cast(acc[4 * k + 2 * h + 1] * inv[h], dsl.bf16))
            o.vstore((head, row + 8 * h, col), pair)
    return sums


def block_rows(S: Any, CAUSAL: bool) -> Any:
    """This block's head, first query row and number of K/V tiles (causal: heaviest first)."""
    head = dsl.block_idx.y
    m_tile = dsl.grid_dim.x - 1 - dsl.block_idx.x if CAUSAL else dsl.block_idx.x
    q0 = m_tile * BM
    kv_tiles = dsl.min(S // BKV, (q0 + BM) // BKV) if CAUSAL else S // BKV
    return head, q0, kv_tiles


@dsl.kernel(target="sm_90a", known_block_size=[THREADS, 1, 1], minnctapersm=1)
def attention_kernel(tq: dsl.TensorMap, tk: dsl.TensorMap, tv: dsl.TensorMap, o: Tensor[bf16, 3], S: Int32,
                     group: Int32, scale: Float32, D: Constexpr[int], CAUSAL: Constexpr[bool],
                     STAGES: Constexpr[int]):
    tiles = shared_tiles(D, STAGES)
    head, q0, kv_tiles = block_rows(S, CAUSAL)
    if dsl.thread_idx.x // 128 == 0:
        produce(tiles, tq, tk, tv, head, q0, kv_tiles, group, D, STAGES)
    else:
        acc, m, total, row, q = consume(tiles, q0, kv_tiles, scale, D, CAUSAL, STAGES)
        store_output(o, acc, total, head, row, q, D)


@dsl.kernel(target="sm_90a", known_block_size=[THREADS, 1, 1], minnctapersm=1)
def attention_lse_kernel(tq: dsl.TensorMap, tk: dsl.TensorMap, tv: dsl.TensorMap, o: Tensor[bf16, 3],
                         lse: Tensor[f32, 2], S: Int32, group: Int32, scale: Float32, D: Constexpr[int],
                         CAUSAL: Constexpr[bool], STAGES: Constexpr[int]):
    """`attention_kernel` that also writes each row's log-sum-exp of the scaled scores, in log2
    units (`lse[h, i] = log2(sum_j exp2(s_ij * scale))`): what the backward pass recomputes P from."""
    tiles = shared_tiles(D, STAGES)
    head, q0, kv_tiles = block_rows(S, CAUSAL)
    if dsl.thread_idx.x // 128 == 0:
        produce(tiles, tq, tk, tv, head, q0, kv_tiles, group, D, STAGES)
    else:
        acc, m, total, row, q = consume(tiles, q0, kv_tiles, scale, D, CAUSAL, STAGES)
        sums = store_output(o, acc, total, head, row, q, D)
        if q == 0:
            for h in dsl.static_range(2):
                lse[head, row + 8 * h] = m[h] + dsl.log2(sums[h])


def checked_maps(q: Any, k: Any, v: Any, o: Any, D: int) -> Any:
    """The shapes' checks, the TMA maps of q, k and v, and the softmax scale in log2 units."""
    heads, S, kv_heads = q.shape[0], q.shape[1], k.shape[0]
    assert D == 64 or D == 128, "head_dim must be 64 or 128"
    assert q.shape[2] == D and k.shape[2] == D and v.shape[2] == D and o.shape[2] == D, "q, k, v, o: [BH, S, D]"
    assert S % BM == 0 and k.shape[1] == S and v.shape[1] == S, "seq_len must be a multiple of 128"
    assert v.shape[0] == kv_heads and o.shape[0] == heads and o.shape[1] == S, "k and v: [BH_kv, S, D], o like q"
    assert kv_heads > 0 and heads % kv_heads == 0, "q's heads must be a multiple of k's and v's (GQA)"
    tq = dsl.tensor_map(q, box=(1, BM, 64), swizzle=128)
    tk = dsl.tensor_map(k, box=(1, BKV, 64), swizzle=128)
    tv = dsl.tensor_map(v, box=(1, BKV, 64), swizzle=128)
    scale = 1.4426950408889634 / math.sqrt(D)  # softmax scale in log2 units: exp(x) = exp2(x * log2(e))
    return tq, tk, tv, scale


@dsl.jit
def attention_hopper(q: Tensor[bf16, 3], k: Tensor[bf16, 3], v: Tensor[bf16, 3], o: Tensor[bf16, 3],
                     D: Constexpr[int] = 128, CAUSAL: Constexpr[bool] = False):
    tq, tk, tv, scale = checked_maps(q, k, v, o, D)
    heads, S, kv_heads = q.shape[0], q.shape[1], k.shape[0]
    attention_kernel(tq, tk, tv, o, S, heads // kv_heads, scale, D, CAUSAL, stages_for(D)).launch(
        grid=(S // BM, heads), block=THREADS)


@dsl.jit
def attention_hopper_lse(q: Tensor[bf16, 3], k: Tensor[bf16, 3], v: Tensor[bf16, 3], o: Tensor[bf16, 3],
                         lse: Tensor[f32, 2], D: Constexpr[int] = 128, CAUSAL: Constexpr[bool] = False):
    """`attention_hopper`, also writing `lse` [BH, S]: each row's log2-sum-exp2 of its scaled scores."""
    tq, tk, tv, scale = checked_maps(q, k, v, o, D)
    heads, S, kv_heads = q.shape[0], q.shape[1], k.shape[0]
    assert lse.shape[0] == heads and lse.shape[1] == S, "lse: [BH, S]"
    attention_lse_kernel(tq, tk, tv, o, lse, S, heads // kv_heads, scale, D, CAUSAL, stages_for(D)).launch(
        grid=(S // BM, heads), block=THREADS)


if __name__ == "__main__":
    import torch
    import torch.nn.functional as F

    B, H, S, D = 4, 32, 4096, 128
    q, k, v = (torch.randn(B * H, S, D, device="cuda").bfloat16() for _ in range(3))
    o = torch.empty_like(q)
    for causal in (False, True):
        attention_hopper(q, k, v, o, D, causal)
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        print("causal" if causal else "full", "max error", (o.float() - ref.float()).abs().max().item())
    HKV = 8  # grouped-query attention, as Llama 3: 4 query heads per K/V head
    k, v = (torch.randn(B * HKV, S, D, device="cuda").bfloat16() for _ in range(2))
    attention_hopper(q, k, v, o, D, True)
    ref = F.scaled_dot_product_attention(q.view(B, H, S, D), k.view(B, HKV, S, D), v.view(B, HKV, S, D),
                                         is_causal=True, enable_gqa=True)
    print("causal GQA max error", (o.float() - ref.view(B * H, S, D).float()).abs().max().item())
