"""FlashAttention-style backward on Hopper: dQ, dK and dV of `o = softmax(q k^T / sqrt(D)) v`,
bf16, head dim 64 or 128, causal or not, from the forward's output `o` and its row
log-sum-exps `lse` (`attention_hopper_lse` in `examples/attention_hopper.py`, log2 units).

`backward_prep` computes each row's `delta = sum(dO * O)` (f32) and zeroes the f32 dQ
accumulator; a main kernel owns a block of keys of one K/V head, loads its K and V once, then
for each 64-row query tile (from the diagonal on, causal) takes Q_i and dO_i from a TMA ring and,
with `wgmma`, computes the transposed scores S^T = K Q^T (so P^T is in the accumulator layout,
and is the A operand of the next products as it stands in registers), P^T = exp2(S^T * scale -
lse), dV += P^T dO, dP^T = V dO^T, dS^T = P^T * (dP^T - delta), dK += dS^T Q; dS goes through
shared memory (stored transposed, K-major) for dQ_i = dS K, whose f32 tile is added into the
accumulator by TMA reductions (`dsl.tma_reduce`). `backward_dq` rounds dQ to bf16.

Two main kernels (`CONSUMERS`; the default picks the faster measured per head dim):
- `backward_kernel_ws` (head dim 128): 128 keys a block, a producer warpgroup (TMA of K, V,
  and the ring of Q, dO, lse and delta) and two consumer warpgroups of 64 keys, which split dQ's
  columns between them, with 240 registers each (`setmaxnreg`);
- `backward_kernel` (head dim 64): 64 keys a block, one warpgroup that loads its own tiles; two
  blocks share an SM.
Neither overlaps one product with the next yet (each waits for the one before): the measured
gap to SDPA's backward, and where its time goes, is in benchmarks/RESULTS.md.

With fewer K/V heads than query heads (GQA) a block walks the query tiles of each of its K/V
head's `group` query heads, so dK and dV sum over the group in registers.

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


def shared_columns(t: Any, stage: Any, q: Any) -> list[Any]:
    """`column_values` of a step's row statistics that the producer loaded into shared memory."""
    return [t[stage, 8 * (k // 2) + 2 * q + k % 2] for k in dsl.static_range(BQ // 4)]


def column_values(t: Any, head: Any, q0: Any, q: Any) -> list[Any]:
    """`t[head, q0 + c]` for each column c this thread holds in a 64-column accumulator:
    lane k is column 8 * (k // 4) + 2 * q + k % 2."""
    return [t[head, q0 + 8 * (k // 2) + 2 * q + k % 2] for k in dsl.static_range(BQ // 4)]


def softmax_gradient(st: Any, dpt: Any, rows_lse: list[Any], rows_delta: list[Any], q0: Any, q: Any, kv_row: Any,
                     scale: Any, causal: bool) -> Any:
    """P^T = exp2(S^T * scale - lse) and dS^T = P^T * (dP^T - delta), as the bf16 A operands of
    dV += P^T dO and dK += dS^T Q: this thread's keys are kv_row and kv_row + 8 (causal: a key
    after the query column gets P = 0); `rows_lse` and `rows_delta` are its columns' values
    (`column_values`)."""
    p = []
    for k in dsl.static_range(BQ // 2):
        value = dsl.exp2(st[k] * scale - rows_lse[k // 4 * 2 + k % 2])
        if causal:
            key = kv_row + 8 * (k % 4 // 2)
            value = value if key <= q0 + 8 * (k // 4) + 2 * q + k % 2 else 0.0
        p.append(value)
    ds = [p[k] * (dpt[k] - rows_delta[k // 4 * 2 + k % 2]) for k in dsl.static_range(BQ // 2)]
    return dsl.cast(dsl.vector(*p), dsl.bf16), dsl.cast(dsl.vector(*ds), dsl.bf16)


@dsl.kernel(target="sm_90a", known_block_size=[THREADS, 1, 1], minnctapersm=2)  # two blocks per SM
def backward_kernel(tq: dsl.TensorMap, tk: dsl.TensorMap, tv: dsl.TensorMap, tdo: dsl.TensorMap,
                    tdq: dsl.TensorMap, lse: Tensor[f32, 2], delta: Tensor[f32, 2], dk: Tensor[bf16, 3],
                    dv: Tensor[bf16, 3], S: Int32, group: Int32, scale: Float32, D: Constexpr[int],
                    CAUSAL: Constexpr[bool], STAGES: Constexpr[int]):
    """64 keys per block, one warpgroup that loads its own tiles (thread 0) and waits for each
    product; two blocks share an SM. The faster choice at head dim 64."""
    smem = dsl.SharedAllocator(dynamic=True)
    sk = smem.array(dsl.bf16, (D // 64, BKV, 64), swizzle=128)
    sv = smem.array(dsl.bf16, (D // 64, BKV, 64), swizzle=128)
    sq = smem.array(dsl.bf16, (STAGES, D // 64, BQ, 64), swizzle=128)  # a ring of Q and dO tiles
    sdo = smem.array(dsl.bf16, (STAGES, D // 64, BQ, 64), swizzle=128)
    sds = smem.array(dsl.bf16, (1, BQ, BKV), swizzle=128)  # dS of this step, K-major: the A of dS K
    sdq = smem.array(dsl.f32, (D // 32, BQ, 32), swizzle=128)  # dQ_i, reduced into dq_acc by TMA
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
        pt, dst = softmax_gradient(st, dpt, column_values(lse, head, q0, q), column_values(delta, head, q0, q), q0,
                                   q, kv_row, scale, CAUSAL)
        dv_acc = dsl.wgmma(dv_acc, pt, None, sdo, (stage,), b_major="n")  # dV += P^T dO
        dk_acc = dsl.wgmma(dk_acc, dst, None, sq, (stage,), b_major="n")  # dK += dS^T Q
        for k in dsl.static_range(BQ // 2):  # dS, transposed: row = query, column = key
            sds[0, 8 * (k // 4) + 2 * q + k % 2, warp * 16 + g + 8 * (k % 4 // 2)] = dst[k]
        if tid == 0:
            dsl.tma_store_wait(0)  # the last step's dQ reduction has read sdq
        dsl.fence_proxy_async()
        dsl.barrier()
        dq = dsl.wgmma(dsl.zeros(dsl.f32, D // 2), sds, (0, 0), sk, (), b_major="n")  # dS K
        dv_acc, dk_acc, dq = dsl.wgmma_wait((dv_acc, dk_acc, dq))
        for k in dsl.static_range(0, D // 2, 2):  # into shared memory (column pairs), then one TMA reduction per 32
            col = 8 * (k // 4) + 2 * q
            pair = dsl.vector(dq[k] * scale_nat(scale), dq[k + 1] * scale_nat(scale))
            sdq.vstore((col // 32, warp * 16 + g + 8 * (k % 4 // 2), col % 32), pair)
        dsl.fence_proxy_async()
        dsl.barrier()  # every wgmma has read this stage and sds, and sdq is written
        if tid == 0:
            for c in dsl.static_range(D // 32):
                dsl.tma_reduce(tdq, (head, q0, 32 * c), sdq, (c,))
            dsl.tma_store_commit()
            if n + STAGES < total:  # the stage just read takes the tile STAGES steps on
                load_step(sq, sdo, q_full, tq, tdo, n + STAGES, kv_head, group, first, steps, D, STAGES)
    if tid == 0:
        dsl.tma_store_wait(0)  # shared memory stays until the last reduction has read it
    for k in dsl.static_range(D // 2):
        r = kv_row + 8 * (k % 4 // 2)
        col = 8 * (k // 4) + 2 * q + k % 2
        dk[kv_head, r, col] = dsl.cast(dk_acc[k] * scale_nat(scale), dsl.bf16)
        dv[kv_head, r, col] = dsl.cast(dv_acc[k], dsl.bf16)


BKV2 = 128  # key / value rows per block of the two-consumer kernel: 64 per consumer warpgroup


@dsl.kernel(target="sm_90a", known_block_size=[3 * THREADS, 1, 1], minnctapersm=1)
def backward_kernel_ws(tq: dsl.TensorMap, tk: dsl.TensorMap, tv: dsl.TensorMap, tdo: dsl.TensorMap,
                       tdq: dsl.TensorMap, tlse: dsl.TensorMap, tdelta: dsl.TensorMap, dk: Tensor[bf16, 3],
                       dv: Tensor[bf16, 3], S: Int32, group: Int32, scale: Float32, D: Constexpr[int],
                       CAUSAL: Constexpr[bool], STAGES: Constexpr[int]):
    """128 keys per block, three warpgroups: a producer (K and V once, then the Q / dO ring by
    TMA, 24 registers) and two consumers of 64 keys each (240 registers), so that dK, dV, S^T,
    dP^T and this consumer's share of dQ fit in registers. At head dim 128 consumer w computes
    dQ's columns 64w.. from both consumers' dS (K = 128 keys); at 64 its own keys' part of all
    of dQ (K = 64). Each reduces its dQ tile into the f32 accumulator by TMA."""
    smem = dsl.SharedAllocator(dynamic=True)
    # K as [consumer][64-column chunk][1][64 keys][64]: the A of S^T, and each (keys, chunk) an N-major B of dS K
    sk = smem.array(dsl.bf16, (2, D // 64, 1, 64, 64), swizzle=128)
    sv = smem.array(dsl.bf16, (2, D // 64, 64, 64), swizzle=128)
    sq = smem.array(dsl.bf16, (STAGES, D // 64, BQ, 64), swizzle=128)
    sdo = smem.array(dsl.bf16, (STAGES, D // 64, BQ, 64), swizzle=128)
    sds = smem.array(dsl.bf16, (2, 2, BQ, 64), swizzle=128)  # [step parity][consumer][query][key]: A of dS K
    sdq = smem.array(dsl.f32, (2, 2, BQ, 32), swizzle=128)  # [consumer][32 columns][query][32]
    slse = smem.array(dsl.f32, (STAGES, BQ), align=128)  # the step's row statistics, loaded with its Q and dO
    sdelta = smem.array(dsl.f32, (STAGES, BQ), align=128)
    kv_full = smem.array(dsl.u64, (1,))
    q_full = smem.array(dsl.u64, (STAGES,))
    empty = smem.array(dsl.u64, (STAGES,))
    tid = dsl.thread_idx.x
    kv_head = dsl.block_idx.y
    kv0 = dsl.block_idx.x * BKV2
    if tid == 0:
        dsl.mbarrier_init(kv_full, 0, 1)
        for s in dsl.static_range(STAGES):
            dsl.mbarrier_init(q_full, s, 1)
            dsl.mbarrier_init(empty, s, 8)  # one arrival per consumer warp
        dsl.fence_mbarrier_init()
    dsl.barrier()
    first = kv0 // BQ if CAUSAL else 0  # causal: query tiles before the block's first key see none of it
    steps = S // BQ - first
    total = group * steps
    if tid // THREADS == 0:  # the producer
        dsl.setmaxnreg(24, increase=False)
        if tid == 0:
            dsl.mbarrier_expect_tx(kv_full, 0, 2 * BKV2 * D * 2)
            for w in dsl.static_range(2):
                for c in dsl.static_range(D // 64):
                    dsl.tma_load(sk, (w, c, 0), tk, (kv_head, kv0 + 64 * w, 64 * c), kv_full, 0)
                    dsl.tma_load(sv, (w, c), tv, (kv_head, kv0 + 64 * w, 64 * c), kv_full, 0)
            for n in range(total):
                stage = n % STAGES
                dsl.mbarrier_wait(empty, stage, ((n // STAGES) % 2) ^ 1)
                load_step(sq, sdo, q_full, tq, tdo, n, kv_head, group, first, steps, D, STAGES, 2 * BQ * 4)
                head = kv_head * group + n // steps  # and the rows' lse and delta, counted in load_step's bytes
                q0 = (first + n % steps) * BQ
                dsl.tma_load(slse, (stage,), tlse, (head, q0), q_full, stage)
                dsl.tma_load(sdelta, (stage,), tdelta, (head, q0), q_full, stage)
    else:
        dsl.setmaxnreg(240, increase=True)
        w = tid // THREADS - 1  # this consumer's keys: kv0 + 64 w ..
        ctid = tid % THREADS
        warp = ctid // 32
        lane = tid % 32
        g = lane // 4
        q = lane % 4
        kv_row = kv0 + 64 * w + warp * 16 + g  # this thread's key rows: kv_row and kv_row + 8
        dk_acc = dsl.zeros(dsl.f32, D // 2)
        dv_acc = dsl.zeros(dsl.f32, D // 2)
        dsl.mbarrier_wait(kv_full, 0, 0)
        for n in range(total):
            head = kv_head * group + n // steps
            q0 = (first + n % steps) * BQ
            stage = n % STAGES
            parity = n % 2
            dsl.mbarrier_wait(q_full, stage, (n // STAGES) % 2)
            st = dsl.zeros(dsl.f32, BQ // 2)
            dpt = dsl.zeros(dsl.f32, BQ // 2)
            for c in dsl.static_range(D // 64):
                st = dsl.wgmma(st, sk, (w, c, 0, 0), sq, (stage, c, 0))  # S^T = K Q^T
            for c in dsl.static_range(D // 64):
                dpt = dsl.wgmma(dpt, sv, (w, c, 0), sdo, (stage, c, 0))  # dP^T = V dO^T
            st, dpt = dsl.wgmma_wait((st, dpt))
            pt, dst = softmax_gradient(st, dpt, shared_columns(slse, stage, q), shared_columns(sdelta, stage, q), q0,
                                       q, kv_row, scale, CAUSAL)
            dv_acc = dsl.wgmma(dv_acc, pt, None, sdo, (stage,), b_major="n")  # dV += P^T dO
            dk_acc = dsl.wgmma(dk_acc, dst, None, sq, (stage,), b_major="n")  # dK += dS^T Q
            for k in dsl.static_range(BQ // 2):  # dS, transposed: row = query, column = key
                sds[parity, w, 8 * (k // 4) + 2 * q + k % 2, warp * 16 + g + 8 * (k % 4 // 2)] = dst[k]
            if ctid == 0:
                dsl.tma_store_wait(0)  # this consumer's last dQ reduction has read its sdq
            dsl.fence_proxy_async()
            dq = dsl.zeros(dsl.f32, 32)
            if D == 128:  # both consumers' dS: the 64 columns 64 w.. of dQ, over all 128 keys
                dsl.named_barrier(1, 2 * THREADS)
                for h in dsl.static_range(2):
                    dq = dsl.wgmma(dq, sds, (parity, h, 0), sk, (h, w), b_major="n")
            else:  # this consumer's 64 keys: its part of the 64 columns of dQ
                dsl.named_barrier(2 + w, THREADS)
                dq = dsl.wgmma(dq, sds, (parity, w, 0), sk, (w, 0), b_major="n")
            dv_acc, dk_acc, dq = dsl.wgmma_wait((dv_acc, dk_acc, dq))
            if lane == 0:
                dsl.mbarrier_arrive(empty, stage)  # this warp has done with the stage's Q and dO
            for k in dsl.static_range(0, 32, 2):  # column pairs: 8-byte stores
                col = 8 * (k // 4) + 2 * q
                pair = dsl.vector(dq[k] * scale_nat(scale), dq[k + 1] * scale_nat(scale))
                sdq.vstore((w, col // 32, warp * 16 + g + 8 * (k % 4 // 2), col % 32), pair)
            dsl.fence_proxy_async()
            dsl.named_barrier(4 + w, THREADS)
            if ctid == 0:
                for j in dsl.static_range(2):
                    dsl.tma_reduce(tdq, (head, q0, (64 * w if D == 128 else 0) + 32 * j), sdq, (w, j))
                dsl.tma_store_commit()
        if ctid == 0:
            dsl.tma_store_wait(0)  # shared memory stays until the last reduction has read it
        for k in dsl.static_range(0, D // 2, 2):  # bf16 pairs of adjacent columns
            where = (kv_head, kv_row + 8 * (k % 4 // 2), 8 * (k // 4) + 2 * q)
            nat = scale_nat(scale)
            dk.vstore(where, dsl.vector(dsl.cast(dk_acc[k] * nat, dsl.bf16), dsl.cast(dk_acc[k + 1] * nat, dsl.bf16)))
            dv.vstore(where, dsl.vector(dsl.cast(dv_acc[k], dsl.bf16), dsl.cast(dv_acc[k + 1], dsl.bf16)))


def load_step(sq: Any, sdo: Any, q_full: Any, tq: Any, tdo: Any, n: Any, kv_head: Any, group: Any, first: Any,
              steps: Any, D: int, STAGES: int, more_bytes: int = 0) -> None:
    """TMA loads of step `n`'s Q and dO tiles into ring stage `n % STAGES` (issued by one thread);
    the stage's one arrival expects them and `more_bytes` the caller loads besides."""
    head = kv_head * group + n // steps
    q0 = (first + n % steps) * BQ
    stage = n % STAGES
    dsl.mbarrier_expect_tx(q_full, stage, 2 * BQ * D * 2 + more_bytes)
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


@dsl.jit(examples=[{"D": 128}, {"D": 64}])  # each head dim's default kernel (the editor and `kdsl lint` compile both)
def attention_backward(q: Tensor[bf16, 3], k: Tensor[bf16, 3], v: Tensor[bf16, 3], o: Tensor[bf16, 3],
                       do: Tensor[bf16, 3], lse: Tensor[f32, 2], dq: Tensor[bf16, 3], dk: Tensor[bf16, 3],
                       dv: Tensor[bf16, 3], delta: Tensor[f32, 2], dq_acc: Tensor[f32, 3], D: Constexpr[int] = 128,
                       CAUSAL: Constexpr[bool] = False, CONSUMERS: Constexpr[int] = 0, STAGES: Constexpr[int] = 0):
    """dq, dk, dv of the forward that gave `o` and `lse`; `delta` [BH, S] and `dq_acc` [BH, S, D]
    (f32) are workspace. k, v, dk and dv may have fewer heads than q (grouped-query attention, as
    in `attention_hopper`): each K/V head's gradients sum over its group of query heads.
    CONSUMERS: 2 (`backward_kernel_ws`, 128 keys a block), 1 (`backward_kernel`, 64), 0 the
    faster one measured (2 at head dim 128, 1 at 64). STAGES, the Q/dO ring: 0 picks 2, or 1 for
    one consumer at head dim 128 (two blocks must fit an SM's shared memory)."""
    heads, S, kv_heads = q.shape[0], q.shape[1], k.shape[0]
    assert D == 64 or D == 128, "head_dim must be 64 or 128"
    consumers = CONSUMERS if CONSUMERS else (2 if D == 128 else 1)
    assert consumers in (1, 2), "CONSUMERS: 1, 2 or 0 (the faster for the head dim)"
    assert STAGES in (0, 1, 2), "STAGES: 1 (one Q/dO buffer), 2 (the next step's tiles load during this one) or 0"
    assert S % (BKV2 if consumers == 2 else BKV) == 0, "seq_len must be a multiple of 128 (of 64 with CONSUMERS=1)"
    for t in (q, o, do, dq, dq_acc):
        assert t.shape[0] == heads and t.shape[1] == S and t.shape[2] == D, "q, o, do, dq, dq_acc: [BH, S, D]"
    for t in (k, v, dk, dv):
        assert t.shape[0] == kv_heads and t.shape[1] == S and t.shape[2] == D, "k, v, dk, dv: [BH_kv, S, D]"
    assert kv_heads > 0 and heads % kv_heads == 0, "q's heads must be a multiple of k's and v's (GQA)"
    assert lse.shape[0] == heads and lse.shape[1] == S and delta.shape[0] == heads and delta.shape[1] == S
    rows = (S // (THREADS // 32), heads)
    backward_prep(o, do, delta, dq_acc, D).launch(grid=rows, block=THREADS)
    scale = LOG2E / math.sqrt(D)  # the forward's scale, in log2 units
    tq = dsl.tensor_map(q, box=(1, BQ, 64), swizzle=128)
    tdo = dsl.tensor_map(do, box=(1, BQ, 64), swizzle=128)
    tdq = dsl.tensor_map(dq_acc, box=(1, BQ, 32), swizzle=128)
    if consumers == 2:
        tk = dsl.tensor_map(k, box=(1, 64, 64), swizzle=128)
        tv = dsl.tensor_map(v, box=(1, 64, 64), swizzle=128)
        tlse = dsl.tensor_map(lse, box=(1, BQ))
        tdelta = dsl.tensor_map(delta, box=(1, BQ))
        backward_kernel_ws(tq, tk, tv, tdo, tdq, tlse, tdelta, dk, dv, S, heads // kv_heads, scale, D, CAUSAL,
                           STAGES if STAGES else 2).launch(grid=(S // BKV2, kv_heads), block=3 * THREADS)
    else:
        tk = dsl.tensor_map(k, box=(1, BKV, 64), swizzle=128)
        tv = dsl.tensor_map(v, box=(1, BKV, 64), swizzle=128)
        stages = STAGES if STAGES else (1 if D == 128 else 2)
        backward_kernel(tq, tk, tv, tdo, tdq, lse, delta, dk, dv, S, heads // kv_heads, scale, D, CAUSAL,
                        stages).launch(grid=(S // BKV, kv_heads), block=THREADS)
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
