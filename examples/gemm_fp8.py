"""An FP8 GEMM on Hopper: `d = (a @ b_t.T) * scale_a * scale_b`, the work of `torch._scaled_mm`.

`a` is M x K and `b_t` N x K (both K contiguous, like an activation and an `nn.Linear` weight), each
float8 e4m3 or e5m2 (wgmma's fp8 forms take any pair); `d` is M x N, bf16 or f32. The scales are f32,
applied to the f32 accumulator in the epilogue: per tensor (`scale_a`, `scale_b` of one element each),
or per row of `a` (M elements) and per column of `d` (N elements) with `ROWWISE=True`.

`scaled_mm(a, b_t, scale_a, scale_b, d)` is the one entry point: it tells the scalings apart by the
scales' sizes (any shape of M or N elements, as torch's (M, 1) and (1, N)) and picks one of two
kernels, as `gemm_small_m.matmul` does for bf16:

- **`gemm_fp8`** (M above 128, where 128 x BN tiles fill the GPU) is `gemm_int8_hopper.py`'s pipeline
  with fp8 tiles, sharing its helpers: a producer warpgroup (`setmaxnreg` down to 40) streams 128 x 128
  tiles of `a` and BN x 128 tiles of `b_t` (128 bytes of K per 128-byte swizzled row) by TMA into a ring
  of STAGES buffers (4 at BN = 256), and two consumer warpgroups (232 registers) each multiply 64 rows
  with wgmma m64n256k32 into a 64 x 256 f32 accumulator, releasing each stage once the next wgmma is
  issued. Blocks are persistent, one per SM, walking tiles in gemm_hopper's grouped order. The
  epilogue multiplies each accumulator pair by its scales and stores it (4 bytes bf16, 8 bytes f32)
  straight to global memory, skipping rows past M and columns past N: no C tile in shared memory, so
  the ring keeps a fourth stage, and a tile's stores drain while the next tile's first wgmmas run.
- **`gemm_fp8_small_m`** (M up to 128, or too few tiles) is `gemm_small_m.py`'s swapped, split-K
  kernel on fp8 tiles, with its helpers: 64-row tiles of `b_t` are wgmma's M, the rows of `a` padded
  to 8..128 its N, K split across blocks so that every SM streams the weight, f32 partials summed by
  the block that draws a tile's last ticket, then scaled and stored.

Accumulation is wgmma's own (what cuBLASLt calls fast accumulation: fp8 products summed in the
tensor cores into the f32 accumulator, whose adds keep about 13 bits of mantissa on Hopper): compare
with `torch._scaled_mm(..., use_fast_accum=True)` for the same arithmetic. TMA reads zeros past
every edge, so M, N and K need no tile multiples: K must be a multiple of 16 (TMA rows are 16-byte
aligned) and N even (scales and bf16 results move in pairs).

    python examples/gemm_fp8.py     # on an H100 / H200: checks against torch._scaled_mm, prints TFLOP/s
"""

from __future__ import annotations

import functools
from typing import Any

from gemm_hopper import BM, CONSUMERS, THREADS, init_ring, tile_coordinates
from gemm_int8_hopper import BK, SMEM, load_stages, multiply_tile
from gemm_small_m import (
    ROWS,
    Plan,
    Workspace,
    _best_split,
    last_split,
    multiply_split,
    sm_count_of,
    stream_split,
    sum_splits,
    threads,
    workspace_for,
)
from gemm_small_m import stages_for as small_m_stages

import dsl
from dsl import Constexpr, Int32, Tensor, TensorSpec, bf16, f8e4m3, f8e5m2, f32, i32

FP8 = (f8e4m3, f8e5m2)
A2, B2 = TensorSpec(f8e4m3, rank=2), TensorSpec(f8e5m2, rank=2)
S1, BF2, F2 = TensorSpec(f32, rank=1), TensorSpec(bf16, rank=2), TensorSpec(f32, rank=2)
COLUMN_BATCH = 16  # per-column scale pairs loaded ahead of their stores (32 registers)
ROW_BATCH = 4  # the swapped kernel's per-row scales loaded ahead of their stores (as many registers as bf16's)


def stages_for(bn: int) -> int:
    """As many stages as shared memory holds: 4 with BN = 256, 7 with 128 (no C tile beside them)."""
    return SMEM // ((BM + bn) * BK)


def check_operands(a: Any, b_t: Any, scale_a: Any, scale_b: Any, d: Any, ROWWISE: bool) -> None:
    """The launcher's checks, shared by both jit functions (dtypes at compile time, shapes per call)."""
    M, K = a.shape[0], a.shape[1]
    N = b_t.shape[0]
    assert a.dtype in FP8 and b_t.dtype in FP8, "a and b_t must be float8 (f8e4m3 or f8e5m2)"
    assert d.dtype == bf16 or d.dtype == f32, "d must be bf16 or f32"
    assert b_t.shape[1] == K and d.shape[0] == M and d.shape[1] == N, "shapes: a (M, K), b_t (N, K), d (M, N)"
    assert K % 16 == 0 and K > 0, "K must be a positive multiple of 16 (TMA rows are 16-byte aligned)"
    assert N % 2 == 0, "N must be even (scales and results are stored in pairs)"
    if ROWWISE:
        assert scale_a.shape[0] == M and scale_b.shape[0] == N, "ROWWISE: scale_a has M elements, scale_b N"
    else:
        assert scale_a.shape[0] == 1 and scale_b.shape[0] == 1, "per-tensor: scale_a and scale_b have one element"


# ----- M above 128: persistent 128 x BN tiles ---------------------------------------------------


def store_scaled(acc: Any, d: Any, scale_a: Any, scale_b: Any, scale: Any, t: Any, row0: Any, col0: Any, M: Any,
                 N: Any, BN: int, ROWWISE: bool) -> None:
    """One consumer's 64 x BN accumulator times its scales into d, pair by pair in the wgmma layout
    (thread t holds rows g and g + 8 of its warp's 16, columns 8j + 2q, +1); rows past M and columns
    past N are not written. Per-column scales are read COLUMN_BATCH pairs at a time, at clamped
    indices, ahead of the stores that use them (each serves both rows): the accumulator leaves no
    registers to hold all of them, and one load per store would wait for each in turn."""
    warp, g, q = t // 32, (t % 32) // 4, t % 4
    rows = [row0 + 16 * warp + g, row0 + 16 * warp + g + 8]
    if ROWWISE:
        row_scales = [scale_a[dsl.min(rows[0], M - 1)], scale_a[dsl.min(rows[1], M - 1)]]
    else:
        row_scales = [scale, scale]
    batch = min(COLUMN_BATCH, BN // 8)
    columns: list[Any] = []
    for first in dsl.static_range(0, BN // 8, batch):
        if ROWWISE:
            columns = [scale_b.vload(dsl.min(col0 + 8 * j + 2 * q, N - 2), 2)
                       for j in dsl.static_range(first, first + batch)]
        for j in dsl.static_range(first, first + batch):
            col = col0 + 8 * j + 2 * q
            for half in dsl.static_range(2):
                pair = acc[4 * j + 2 * half:4 * j + 2 * half + 2] * row_scales[half]
                if ROWWISE:
                    pair = pair * columns[j - first]
                if rows[half] < M:
                    if col < N:
                        d.vstore((rows[half], col), dsl.cast(pair, d.dtype))


@dsl.kernel(target="sm_90a", known_block_size=[THREADS, 1, 1], minnctapersm=1)
def gemm_fp8_kernel(ta: dsl.TensorMap, tb: dsl.TensorMap, d: Tensor, scale_a: Tensor[f32, 1],
                    scale_b: Tensor[f32, 1], M: Int32, N: Int32, K: Int32, BN: Constexpr[int],
                    STAGES: Constexpr[int], ROWWISE: Constexpr[bool]):
    smem = dsl.SharedAllocator(dynamic=True)
    sa = smem.array(ta.dtype, (STAGES, BM, BK), swizzle=128)
    sb = smem.array(tb.dtype, (STAGES, BN, BK), swizzle=128)
    full = smem.array(dsl.u64, (STAGES,))
    empty = smem.array(dsl.u64, (STAGES,))
    tid = dsl.thread_idx.x
    warpgroup = tid // 128
    lane = tid % 32
    init_ring(full, empty, tid, STAGES, CONSUMERS)

    tiles_m = dsl.cdiv(M, BM)
    tiles_n = dsl.cdiv(N, BN)
    units = tiles_m * tiles_n
    k_tiles = dsl.cdiv(K, BK)  # a last, partial K tile reads zeros past K in both operands
    if warpgroup == 0:
        dsl.setmaxnreg(40, increase=False)
        if tid == 0:
            load_stages(sa, sb, ta, tb, full, empty, units, tiles_m, tiles_n, k_tiles, BN, STAGES)
    else:
        dsl.setmaxnreg(232, increase=True)
        row0 = (warpgroup - 1) * 64
        scale = 1.0 if ROWWISE else scale_a[0] * scale_b[0]
        step = 0
        for unit in range(dsl.block_idx.x, units, dsl.grid_dim.x):
            pm, pn = tile_coordinates(unit, tiles_m, tiles_n)
            acc, step = multiply_tile(dsl.zeros(f32, BN // 2), sa, sb, full, empty, step, k_tiles, row0, lane,
                                      STAGES)
            store_scaled(acc, d, scale_a, scale_b, scale, tid % 128, pm * BM + row0, pn * BN, M, N, BN, ROWWISE)


@dsl.jit(examples=[(A2, A2, S1, S1, BF2), {"a": A2, "b_t": B2, "scale_a": S1, "scale_b": S1, "d": F2, "ROWWISE": True}])
def gemm_fp8(a: Tensor, b_t: Tensor, scale_a: Tensor[f32, 1], scale_b: Tensor[f32, 1], d: Tensor,
             ROWWISE: Constexpr[bool] = False, BN: Constexpr[int] = 256):
    check_operands(a, b_t, scale_a, scale_b, d, ROWWISE)
    assert BN == 64 or BN == 128 or BN == 256, "BN must be 64, 128 or 256"
    M, K = a.shape[0], a.shape[1]
    N = b_t.shape[0]
    ta = dsl.tensor_map(a, box=(BM, BK), swizzle=128)
    tb = dsl.tensor_map(b_t, box=(BN, BK), swizzle=128)
    units = dsl.cdiv(M, BM) * dsl.cdiv(N, BN)
    gemm_fp8_kernel(ta, tb, d, scale_a, scale_b, M, N, K, BN, stages_for(BN), ROWWISE).launch(
        grid=dsl.min(units, dsl.sm_count()), block=THREADS)


# ----- M up to 128: swapped operands, split K ---------------------------------------------------


def store_scaled_t(d: Any, acc: Any, scale_a: Any, scale_b: Any, M: Any, N: Any, n_row: Any, m0: Any, q: Any,
                   MP: int, ROWWISE: bool) -> None:
    """The scaled d^T tile of one thread into d: lane 4j + 2h + e is column n_row + 8h of d (a row of
    b_t, scaled by scale_b there), row m0 + 8j + 2q + e (scaled by scale_a there). Row scales are read
    for ROW_BATCH // 2 values of j at a time, at clamped indices, ahead of the stores that use them."""
    n_ok = [n_row < N, n_row + 8 < N]
    if ROWWISE:
        column_scale = [scale_b[dsl.min(n_row, N - 1)], scale_b[dsl.min(n_row + 8, N - 1)]]
    else:
        column_scale = [scale_a[0] * scale_b[0]] * 2
    batch = min(ROW_BATCH // 2, MP // 8)
    row_scale: list[Any] = []
    for first in dsl.static_range(0, MP // 8, batch):
        if ROWWISE:
            row_scale = [scale_a[dsl.min(m0 + 8 * (first + i // 2) + 2 * q + i % 2, M - 1)]
                         for i in dsl.static_range(2 * batch)]
        for j in dsl.static_range(first, first + batch):
            for e in dsl.static_range(2):
                m = m0 + 8 * j + 2 * q + e
                if m < M:
                    for h in dsl.static_range(2):
                        value = acc[4 * j + 2 * h + e]
                        if ROWWISE:
                            value = value * row_scale[2 * (j - first) + e]
                        if n_ok[h]:
                            d[m, n_row + 8 * h] = dsl.cast(value * column_scale[h], d.dtype)


@dsl.kernel(target="sm_90a", minnctapersm=1)
def gemm_fp8_small_m_kernel(ta: dsl.TensorMap, tb: dsl.TensorMap, d: Tensor, scale_a: Tensor[f32, 1],
                            scale_b: Tensor[f32, 1], partials: Tensor[f32, 1], tickets: Tensor[i32, 1], M: Int32,
                            N: Int32, per_split: Int32, k_tiles: Int32, MP: Constexpr[int],
                            CONSUMERS: Constexpr[int], STAGES: Constexpr[int], ROWWISE: Constexpr[bool]):
    smem = dsl.SharedAllocator(dynamic=True)
    sb = smem.array(tb.dtype, (STAGES, ROWS * CONSUMERS, BK), swizzle=128)
    sa = smem.array(ta.dtype, (STAGES, MP, BK), swizzle=128)
    full = smem.array(dsl.u64, (STAGES,))
    empty = smem.array(dsl.u64, (STAGES,))
    ticket = smem.array(dsl.i32, (1,))
    tid = dsl.thread_idx.x
    consumer_threads = 128 * CONSUMERS
    split = dsl.block_idx.y
    splits = dsl.grid_dim.y
    n0 = dsl.block_idx.x * (ROWS * CONSUMERS)
    m0 = dsl.block_idx.z * MP
    first_kt = split * per_split
    count = dsl.min(per_split, k_tiles - first_kt)  # every split has at least one (the plan sees to it)
    init_ring(full, empty, tid, STAGES, CONSUMERS)

    if tid == consumer_threads:  # the producer: one thread of the last warp
        stream_split(sb, sa, tb, ta, full, empty, count, first_kt, n0, m0, (ROWS * CONSUMERS + MP) * BK, BK, STAGES)
    elif tid < consumer_threads:
        warpgroup, t = tid // 128, tid % 128
        acc = multiply_split(sb, sa, full, empty, count, warpgroup, tid, MP, STAGES)
        n_row = n0 + ROWS * warpgroup + 16 * (t // 32) + (t % 32) // 4
        q = t % 4
        if splits == 1:
            store_scaled_t(d, acc, scale_a, scale_b, M, N, n_row, m0, q, MP, ROWWISE)
        else:
            tile = dsl.block_idx.z * dsl.grid_dim.x + dsl.block_idx.x
            if last_split(acc, partials, tickets, ticket, tile, split, splits, tid, consumer_threads, MP):
                total = sum_splits(partials, tile, splits, tid, consumer_threads, MP)
                store_scaled_t(d, total, scale_a, scale_b, M, N, n_row, m0, q, MP, ROWWISE)
                if tid == 0:
                    tickets[tile] = 0  # ready for the next call


@dsl.jit(examples=[(A2, A2, S1, S1, BF2, S1, TensorSpec(i32, rank=1), i32)])
def gemm_fp8_small_m(a: Tensor, b_t: Tensor, scale_a: Tensor[f32, 1], scale_b: Tensor[f32, 1], d: Tensor,
                     partials: Tensor[f32, 1], tickets: Tensor[i32, 1], splits: Int32, ROWWISE: Constexpr[bool] = False,
                     MP: Constexpr[int] = 16, CONSUMERS: Constexpr[int] = 2, STAGES: Constexpr[int] = 6):
    check_operands(a, b_t, scale_a, scale_b, d, ROWWISE)
    M, K = a.shape[0], a.shape[1]
    N = b_t.shape[0]
    assert splits >= 1, "splits must be at least 1"
    k_tiles = dsl.cdiv(K, BK)
    per_split = dsl.cdiv(k_tiles, splits)
    used = dsl.cdiv(k_tiles, per_split)  # no split is left without K
    tiles_n = dsl.cdiv(N, ROWS * CONSUMERS)
    tiles_m = dsl.cdiv(M, MP)
    split_k = dsl.min(used - 1, 1)  # 1 when the partials and tickets are used, else 0
    assert partials.shape[0] >= split_k * tiles_m * tiles_n * used * MP * ROWS * CONSUMERS, \
        "partials is too small for this split: see Fp8Plan.workspace_size()"
    assert tickets.shape[0] >= split_k * tiles_m * tiles_n, "tickets is too small: see Fp8Plan.workspace_size()"
    ta = dsl.tensor_map(a, box=(MP, BK), swizzle=128)
    tb = dsl.tensor_map(b_t, box=(ROWS * CONSUMERS, BK), swizzle=128)
    gemm_fp8_small_m_kernel(ta, tb, d, scale_a, scale_b, partials, tickets, M, N, per_split, k_tiles, MP, CONSUMERS,
                            STAGES, ROWWISE).launch(grid=(tiles_n, used, tiles_m), block=threads(CONSUMERS))


# ----- choosing a kernel --------------------------------------------------------------------------


class Fp8Plan(Plan):
    """What `scaled_mm` launches: `gemm_fp8` with BN ("hopper"), or `gemm_fp8_small_m` with MP,
    CONSUMERS, STAGES and `splits` ("small_m"). gemm_small_m's plan, with fp8's 128-element K tiles."""

    def describe(self) -> str:
        """One line for tables (the fields the variant ignores left out)."""
        if self.variant == "hopper":
            return f"gemm_fp8 BN={self.BN}"
        return (f"gemm_fp8_small_m MP={self.MP} CONSUMERS={self.CONSUMERS} STAGES={self.STAGES} "
                f"splits={self.splits} ({self.blocks_per_sm} per SM)")

    def k_split(self, K: int) -> tuple[int, int]:
        """(K tiles per split, splits used): as `gemm_fp8_small_m` computes them."""
        k_tiles = -(-K // BK)
        per = -(-k_tiles // self.splits)
        return per, -(-k_tiles // per)


def small_m_plan(M: int, N: int, K: int, sm_count: int, mp: int | None = None, consumers: int | None = None,
                 blocks_per_sm: int | None = None, splits: int | None = None) -> Fp8Plan:
    """gemm_small_m's configuration rules on fp8 tiles; any argument given overrides them. A stage is
    as many bytes as there (rows of 128 bytes), so its stage count carries over."""
    if mp is None:
        mp = 8
        while mp < min(M, 128):
            mp *= 2
    if consumers is None:
        consumers = 2 if mp <= 64 else 4
    if blocks_per_sm is None:
        blocks_per_sm = 2 if consumers <= 2 else 1
    tiles = -(-M // mp) * -(-N // (ROWS * consumers))
    if splits is None:
        splits = _best_split(tiles, -(-K // BK), sm_count * blocks_per_sm)
    return Fp8Plan("small_m", MP=mp, CONSUMERS=consumers, STAGES=small_m_stages(mp, consumers, blocks_per_sm),
                   splits=splits, blocks_per_sm=blocks_per_sm)


@functools.lru_cache(maxsize=1024)
def plan_for(M: int, N: int, K: int, sm_count: int) -> Fp8Plan:
    """`gemm_fp8` where its 128 x BN tiles fill the GPU, the swapped split-K kernel everywhere else."""
    if M > 128:
        for bn in (256, 128):
            if -(-M // BM) * -(-N // bn) >= sm_count:
                return Fp8Plan("hopper", BN=bn)
    return small_m_plan(M, N, K, sm_count)


def is_rowwise(M: int, N: int, scale_a: Any, scale_b: Any) -> bool:
    """Per-row / per-column scales, told apart from per-tensor ones by their sizes."""
    na, nb = _numel(scale_a), _numel(scale_b)
    if na == 1 and nb == 1:
        return False
    if (na, nb) != (M, N):
        raise ValueError(f"scales: one element each (per tensor) or M={M} and N={N} elements (per row of a and "
                         f"per column of d); got {na} and {nb}")
    return True


def _numel(x: Any) -> int:
    n = 1
    for extent in x.shape:
        n *= int(extent)
    return n


def scaled_mm(a: Any, b_t: Any, scale_a: Any, scale_b: Any, d: Any, plan: Fp8Plan | None = None,
              workspace: Workspace | None = None) -> Fp8Plan:
    """d = (a @ b_t.T) * scale_a * scale_b for fp8 a (M, K) and b_t (N, K), bf16 or f32 d (M, N), f32
    scales per tensor (one element) or per row of a and column of d (M and N elements, any shape):
    picks the kernel for the shape (or runs `plan`) and returns the plan it ran."""
    M, K = int(a.shape[0]), int(a.shape[1])
    N = int(b_t.shape[0])
    rowwise = is_rowwise(M, N, scale_a, scale_b)
    sa, sb = scale_a.reshape(-1), scale_b.reshape(-1)
    if plan is None:
        plan = plan_for(M, N, K, sm_count_of(a))
    if plan.variant == "hopper":
        gemm_fp8(a, b_t, sa, sb, d, ROWWISE=rowwise, BN=plan.BN)
        return plan
    partials, tickets = plan.workspace_size(M, N, K)
    ws = workspace if workspace is not None else workspace_for(d, partials, tickets)
    gemm_fp8_small_m(a, b_t, sa, sb, d, ws.partials, ws.tickets, plan.splits, ROWWISE=rowwise, MP=plan.MP,
                     CONSUMERS=plan.CONSUMERS, STAGES=plan.STAGES)
    return plan


if __name__ == "__main__":
    import torch

    for M, N, K in [(8192, 8192, 8192), (16, 4096, 4096)]:
        a = (torch.randn(M, K, device="cuda") * 2).to(torch.float8_e4m3fn)
        b_t = (torch.randn(N, K, device="cuda") * 2).to(torch.float8_e4m3fn)
        scale_a, scale_b = torch.tensor([0.5], device="cuda"), torch.tensor([0.25], device="cuda")
        d = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        chosen = scaled_mm(a, b_t, scale_a, scale_b, d)
        ref = torch._scaled_mm(a, b_t.t(), scale_a, scale_b, out_dtype=torch.bfloat16,  # pyright: ignore[reportPrivateImportUsage]
                               use_fast_accum=True)
        error = ((d.float() - ref.float()).norm() / ref.float().norm()).item()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(20):
            scaled_mm(a, b_t, scale_a, scale_b, d, plan=chosen)
        end.record()
        torch.cuda.synchronize()
        ms = start.elapsed_time(end) / 20
        print(f"{M} x {N} x {K}: {chosen.describe()}, relative error against torch._scaled_mm {error:.2e}, "
              f"{2 * M * N * K / ms / 1e9:.0f} TFLOP/s")
