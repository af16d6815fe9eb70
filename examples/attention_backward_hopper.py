"""FlashAttention-style backward on Hopper: dQ, dK and dV of `o = softmax(q k^T / sqrt(D)) v`,
bf16, head dim 64 or 128, causal or not, from the forward's output `o` and its row
log-sum-exps `lse` (`attention_hopper_lse` in `examples/attention_hopper.py`, log2 units).

Three kernels. `backward_prep` computes each row's `delta = sum(dO * O)` (f32) and zeroes the
f32 dQ accumulator. `backward_kernel` owns 64 key / value rows of one K/V head (one warpgroup): it
loads K_j and V_j once, then for each 64-row query tile (from the diagonal on, causal) loads Q_i
and dO_i with TMA and, with `wgmma`, computes the transposed scores S^T = K Q^T (so P^T is in
the accumulator layout, and is the A operand of the next products as it stands in registers),
P^T = exp2(S^T * scale - lse), dV += P^T dO, dP^T = V dO^T, dS^T = P^T * (dP^T - delta),
dK += dS^T Q; dS goes through shared memory (stored transposed, K-major) for dQ_i += dS K,
which is added to the f32 accumulator with atomics. `backward_dq` rounds dQ to bf16.

With fewer K/V heads than query heads (GQA) a block walks the query tiles of each of its K/V
head's `group` query heads, so dK and dV sum over the group in registers. This first version
overlaps only its loads with its arithmetic (`STAGES=2`: a ring of two Q/dO stages, the next
step's tiles loading while this one computes; `STAGES=1` for comparison) and waits for each
product: the correctness baseline that a version overlapping the products is measured against.

    python examples/attention_backward_hopper.py  # on an H100 / H200: its errors against torch SDPA's backward
"""

import math
from typing import Any

import dsl
from dsl import Constexpr, Float32, Int32, Tensor, bf16, f32

BKV = 64  # key / value rows per block (one warpgroup: wgmma's M)
BQ = 64  # query rows per step
THREADS = 128
LOG2E = 1.4426950408889634


def column_values(t: Any, head: Any, q0: Any, q: Any) -> list[Any]:
    """`t[head, q0 + c]` for each column c this thread holds in a 64-column accumulator:
    lane k is column 8 * (k // 4) + 2 * q + k % 2."""
    return [t[head, q0 + 8 * (k // 2) + 2 * q + k % 2] for k in dsl.static_range(BQ // 4)]


@dsl.kernel(target="sm_90a", known_block_size=[THREADS, 1, 1], minnctapersm=2)  # two blocks per SM
def backward_kernel(tq: dsl.TensorMap, tk: dsl.TensorMap, tv: dsl.TensorMap, tdo: dsl.TensorMap,
                    tdq: dsl.TensorMap, lse: Tensor[f32, 2], delta: Tensor[f32, 2], dq_acc: Tensor[f32, 3],
                    dk: Tensor[bf16, 3], dv: Tensor[bf16, 3], S: Int32, group: Int32, scale: Float32,
                    D: Constexpr[int], CAUSAL: Constexpr[bool], STAGES: Constexpr[int], DQ_TMA: Constexpr[bool]):
    smem = dsl.SharedAllocator(dynamic=True)
    sk = smem.array(dsl.bf16, (D // 64, BKV, 64), swizzle=128)
    sv = smem.array(dsl.bf16, (D // 64, BKV, 64), swizzle=128)
    sq = smem.array(dsl.bf16, (STAGES, D // 64, BQ, 64), swizzle=128)  # a ring of Q and dO tiles
    sdo = smem.array(dsl.bf16, (STAGES, D // 64, BQ, 64), swizzle=128)
    sds = smem.array(dsl.bf16, (1, BQ, BKV), swizzle=128)  # dS of this step, K-major: the A of dS K
    sdq = smem.array(dsl.f32, (D // 32 if DQ_TMA else 1, BQ, 32), swizzle=128)  # dQ_i, reduced into dq_acc by TMA
    kv_full = smem.array(dsl.u64, (1,))
    q_full = smem.array(dsl.u64, (STAGES,))
    tid = dsl.thread_idx.x
    kv_head = dsl.block_idx.y  # its `group` query heads, one after another: their dK and dV add up here
    kv0 = dsl.block_idx.x * BKV
    if tid == 0:
        dsl.mbarrier_init(kv_full, 0, 1)
        for s in dsl.static_range(STAGES):
            dsl.mbarrier_init(q_full, s, 1)
        dsl.fence_mbarrier_init()
    dsl.barrier()
    if tid == 0:
        dsl.mbarrier_expect_tx(kv_full, 0, 2 * BKV * D * 2)
        for c in dsl.static_range(D // 64):
            dsl.tma_load(sk, (c,), tk, (kv_head, kv0, 64 * c), kv_full, 0)
            dsl.tma_load(sv, (c,), tv, (kv_head, kv0, 64 * c), kv_full, 0)
    warp = tid // 32
    lane = tid % 32
    g = lane // 4
    q = lane % 4
    kv_row = kv0 + warp * 16 + g  # this thread's key rows: kv_row and kv_row + 8
    dk_acc = dsl.zeros(dsl.f32, D // 2)
    dv_acc = dsl.zeros(dsl.f32, D // 2)
    first = kv0 // BQ if CAUSAL else 0  # causal: query tiles before the block's first key see none of it
    steps = S // BQ - first  # query tiles per query head
    total = group * steps
    if tid == 0:
        for n in dsl.static_range(STAGES):  # the first tiles of the ring
            if n < total:
                load_step(sq, sdo, q_full, tq, tdo, n, kv_head, group, first, steps, D, STAGES)
    dsl.mbarrier_wait(kv_full, 0, 0)
    for n in range(total):
        head = kv_head * group + n // steps  # GQA: query head h reads K/V head h // group
        q0 = (first + n % steps) * BQ
        stage = n % STAGES
        dsl.mbarrier_wait(q_full, stage, (n // STAGES) % 2)
        st = dsl.zeros(dsl.f32, BQ // 2)
        dpt = dsl.zeros(dsl.f32, BQ // 2)
        for c in dsl.static_range(D // 64):
            st = dsl.wgmma(st, sk, (c, 0), sq, (stage, c, 0))  # S^T = K Q^T
        for c in dsl.static_range(D // 64):
            dpt = dsl.wgmma(dpt, sv, (c, 0), sdo, (stage, c, 0))  # dP^T = V dO^T
        st, dpt = dsl.wgmma_wait((st, dpt))
        rows_lse = column_values(lse, head, q0, q)
        rows_delta = column_values(delta, head, q0, q)
        p = []
        for k in dsl.static_range(BQ // 2):
            value = dsl.exp2(st[k] * scale - rows_lse[k // 4 * 2 + k % 2])
            if CAUSAL:  # key kv_row (+ 8) after query column: masked
                key = kv_row + 8 * (k % 4 // 2)
                value = value if key <= q0 + 8 * (k // 4) + 2 * q + k % 2 else 0.0
            p.append(value)
        ds = [p[k] * (dpt[k] - rows_delta[k // 4 * 2 + k % 2]) for k in dsl.static_range(BQ // 2)]
        pt = dsl.cast(dsl.vector(*p), dsl.bf16)
        dst = dsl.cast(dsl.vector(*ds), dsl.bf16)
        dv_acc = dsl.wgmma(dv_acc, pt, None, sdo, (stage,), b_major="n")  # dV += P^T dO
        dk_acc = dsl.wgmma(dk_acc, dst, None, sq, (stage,), b_major="n")  # dK += dS^T Q
        for k in dsl.static_range(BQ // 2):  # dS, transposed: row = query, column = key
            sds[0, 8 * (k // 4) + 2 * q + k % 2, warp * 16 + g + 8 * (k % 4 // 2)] = dst[k]
        if DQ_TMA and tid == 0:
            dsl.tma_store_wait(0)  # the last step's dQ reduction has read sdq
        dsl.fence_proxy_async()
        dsl.barrier()
        dq = dsl.wgmma(dsl.zeros(dsl.f32, D // 2), sds, (0, 0), sk, (), b_major="n")  # dS K
        dv_acc, dk_acc, dq = dsl.wgmma_wait((dv_acc, dk_acc, dq))
        if DQ_TMA:  # into shared memory, then one TMA reduction per 32 columns
            for k in dsl.static_range(D // 2):
                col = 8 * (k // 4) + 2 * q + k % 2
                sdq[col // 32, warp * 16 + g + 8 * (k % 4 // 2), col % 32] = dq[k] * scale_nat(scale)
            dsl.fence_proxy_async()
        else:  # one f32 atomic per element
            q_row = q0 + warp * 16 + g
            for k in dsl.static_range(D // 2):
                where = (head, q_row + 8 * (k % 4 // 2), 8 * (k // 4) + 2 * q + k % 2)
                dsl.atomic_add(dq_acc, where, dq[k] * scale_nat(scale))
        dsl.barrier()  # every wgmma has read this stage and sds before they are written again
        if tid == 0:
            if DQ_TMA:
                for c in dsl.static_range(D // 32):
                    dsl.tma_reduce(tdq, (head, q0, 32 * c), sdq, (c,))
                dsl.tma_store_commit()
            if n + STAGES < total:  # the stage just read takes the tile STAGES steps on
                load_step(sq, sdo, q_full, tq, tdo, n + STAGES, kv_head, group, first, steps, D, STAGES)
    if DQ_TMA and tid == 0:
        dsl.tma_store_wait(0)  # shared memory stays until the last reduction has read it
    for k in dsl.static_range(D // 2):
        r = kv_row + 8 * (k % 4 // 2)
        col = 8 * (k // 4) + 2 * q + k % 2
        dk[kv_head, r, col] = dsl.cast(dk_acc[k] * scale_nat(scale), dsl.bf16)
        dv[kv_head, r, col] = dsl.cast(dv_acc[k], dsl.bf16)


def load_step(sq: Any, sdo: Any, q_full: Any, tq: Any, tdo: Any, n: Any, kv_head: Any, group: Any, first: Any,
              steps: Any, D: int, STAGES: int) -> None:
    """TMA loads of step `n`'s Q and dO tiles into ring stage `n % STAGES` (issued by one thread)."""
    head = kv_head * group + n // steps
    q0 = (first + n % steps) * BQ
    stage = n % STAGES
    dsl.mbarrier_expect_tx(q_full, stage, 2 * BQ * D * 2)
    for c in dsl.static_range(D // 64):
        dsl.tma_load(sq, (stage, c), tq, (head, q0, 64 * c), q_full, stage)
        dsl.tma_load(sdo, (stage, c), tdo, (head, q0, 64 * c), q_full, stage)


def scale_nat(scale: Any) -> Any:
    """1 / sqrt(D) from the log2-unit softmax scale: what dS carries into dQ and dK."""
    return scale * (1.0 / LOG2E)


@dsl.kernel(known_block_size=[THREADS, 1, 1])
def backward_prep(o: Tensor[bf16, 3], do: Tensor[bf16, 3], delta: Tensor[f32, 2], dq_acc: Tensor[f32, 3],
                  D: Constexpr[int]):
    """delta[h, i] = sum_d dO * O over row i (a warp per row); the row's dQ accumulator zeroed."""
    head = dsl.block_idx.y
    row = dsl.block_idx.x * (THREADS // 32) + dsl.thread_idx.x // 32
    lane = dsl.thread_idx.x % 32
    part = 0.0
    for c in dsl.static_range(D // 32):
        col = 32 * c + lane
        part += dsl.cast(o[head, row, col], dsl.f32) * dsl.cast(do[head, row, col], dsl.f32)
        dq_acc[head, row, col] = 0.0
    total = dsl.warp_reduce(part, "sum")
    if lane == 0:
        delta[head, row] = total


@dsl.kernel(known_block_size=[THREADS, 1, 1])
def backward_dq(dq_acc: Tensor[f32, 3], dq: Tensor[bf16, 3], D: Constexpr[int]):
    head = dsl.block_idx.y
    row = dsl.block_idx.x * (THREADS // 32) + dsl.thread_idx.x // 32
    lane = dsl.thread_idx.x % 32
    for c in dsl.static_range(D // 32):
        dq[head, row, 32 * c + lane] = dsl.cast(dq_acc[head, row, 32 * c + lane], dsl.bf16)


@dsl.jit
def attention_backward(q: Tensor[bf16, 3], k: Tensor[bf16, 3], v: Tensor[bf16, 3], o: Tensor[bf16, 3],
                       do: Tensor[bf16, 3], lse: Tensor[f32, 2], dq: Tensor[bf16, 3], dk: Tensor[bf16, 3],
                       dv: Tensor[bf16, 3], delta: Tensor[f32, 2], dq_acc: Tensor[f32, 3], D: Constexpr[int] = 128,
                       CAUSAL: Constexpr[bool] = False, STAGES: Constexpr[int] = 0, DQ_TMA: Constexpr[bool] = True):
    """dq, dk, dv of the forward that gave `o` and `lse`; `delta` [BH, S] and `dq_acc` [BH, S, D]
    (f32) are workspace. k, v, dk and dv may have fewer heads than q (grouped-query attention, as
    in `attention_hopper`): each K/V head's gradients sum over its group of query heads.
    STAGES (the Q/dO ring) 0: the most that leaves two blocks an SM's shared memory (1 at head
    dim 128 with DQ_TMA, whose f32 dQ tile takes 32 KB, else 2). DQ_TMA False: dQ by atomics."""
    heads, S, kv_heads = q.shape[0], q.shape[1], k.shape[0]
    assert D == 64 or D == 128, "head_dim must be 64 or 128"
    assert S % BQ == 0 and S % BKV == 0, "seq_len must be a multiple of 64"
    for t in (q, o, do, dq, dq_acc):
        assert t.shape[0] == heads and t.shape[1] == S and t.shape[2] == D, "q, o, do, dq, dq_acc: [BH, S, D]"
    for t in (k, v, dk, dv):
        assert t.shape[0] == kv_heads and t.shape[1] == S and t.shape[2] == D, "k, v, dk, dv: [BH_kv, S, D]"
    assert kv_heads > 0 and heads % kv_heads == 0, "q's heads must be a multiple of k's and v's (GQA)"
    assert lse.shape[0] == heads and lse.shape[1] == S and delta.shape[0] == heads and delta.shape[1] == S
    rows = (S // (THREADS // 32), heads)
    backward_prep(o, do, delta, dq_acc, D).launch(grid=rows, block=THREADS)
    tq = dsl.tensor_map(q, box=(1, BQ, 64), swizzle=128)
    tk = dsl.tensor_map(k, box=(1, BKV, 64), swizzle=128)
    tv = dsl.tensor_map(v, box=(1, BKV, 64), swizzle=128)
    tdo = dsl.tensor_map(do, box=(1, BQ, 64), swizzle=128)
    tdq = dsl.tensor_map(dq_acc, box=(1, BQ, 32), swizzle=128)
    scale = LOG2E / math.sqrt(D)  # the forward's scale, in log2 units
    assert STAGES in (0, 1, 2), "STAGES: 1 (one Q/dO buffer), 2 (the next step's tiles load during this one) or 0"
    stages = STAGES if STAGES else (1 if D == 128 and DQ_TMA else 2)
    backward_kernel(tq, tk, tv, tdo, tdq, lse, delta, dq_acc, dk, dv, S, heads // kv_heads, scale, D, CAUSAL,
                    stages, DQ_TMA).launch(
        grid=(S // BKV, kv_heads), block=THREADS)
    backward_dq(dq_acc, dq, D).launch(grid=rows, block=THREADS)


if __name__ == "__main__":
    import torch
    import torch.nn.functional as F
    from attention_hopper import attention_hopper_lse

    B, H, S, D = 4, 16, 4096, 128
    for causal in (False, True):
        q, k, v = (torch.randn(B * H, S, D, device="cuda").bfloat16().requires_grad_() for _ in range(3))
        o = torch.empty_like(q)
        lse = torch.empty(B * H, S, device="cuda")
        do = torch.randn_like(q)
        attention_hopper_lse(q.detach(), k.detach(), v.detach(), o, lse, D, causal)
        dq, dk, dv = (torch.empty_like(q) for _ in range(3))
        delta, dq_acc = torch.empty_like(lse), torch.empty(B * H, S, D, device="cuda")
        attention_backward(q.detach(), k.detach(), v.detach(), o, do, lse, dq, dk, dv, delta, dq_acc, D, causal)
        F.scaled_dot_product_attention(q, k, v, is_causal=causal).backward(do)
        for name, got, leaf in (("dq", dq, q), ("dk", dk, k), ("dv", dv, v)):
            assert leaf.grad is not None
            error = (got.float() - leaf.grad.float()).abs().max().item()
            print("causal" if causal else "full", name, "max error", error)
