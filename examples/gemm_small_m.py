"""bf16 `c = a @ b_t.T` for the small M of decode (M = 1..128), and `matmul`, the one entry point
that picks a kernel for any M, N, K: this one below M = 129 (or where M x N has too few tiles to
fill the GPU), `gemm_hopper` above.

Below M of about 128 the product is memory-bound: its time is that of streaming the N x K weight
`b_t` once from HBM (N * K * 2 bytes at about 4 TB/s on an H200), so what matters is how many bytes
are in flight on every SM, not the tensor cores. `gemm_hopper` at 16 x 8192 x 8192 has 128 blocks
each streaming one whole K = 8192 column panel of B behind a 128-row A box that is 7/8 zeros. This
kernel changes three things:

- **Swapped roles.** It computes c^T = b_t @ a^T: 64-row tiles of `b_t` (the big N) are wgmma's
  M = 64 operand, and the few rows of `a`, zero-padded to MP = 8, 16, 32, 64 or 128, are wgmma's N.
  A stage is then almost all B (a 128 x 64 tile of B beside a 16 x 64 tile of A at M = 16), so a
  deep ring fits in a block's share of shared memory, and no tensor-core work is spent on padding.
  This is what production libraries do for decode. wgmma reads both tiles K-major, as they come.
- **Split-K.** The grid is (N tiles, K splits, M tiles). `plan_for` picks the split count from the
  SM count so that the blocks cover the GPU (at 16 x 4096 x 4096: 32 tiles x 8 splits = 256 blocks,
  two per SM) while each split keeps enough K to amortise its pipeline's fill.
- **One launch, no zeroing.** Each split writes its f32 partial tile into a workspace, in register
  order, so every thread moves 16-byte vectors; then one thread takes a ticket for the tile
  (`atomic_add`, acq_rel: the release publishes the block's partial, the acquire shows the last
  block every other's). The block that draws the last ticket sums the partials in split order
  (so the result does not depend on which block finished last), converts to bf16, stores c, and
  puts the ticket back to 0 for the next call. With one split it stores c directly.

Each block is CONSUMERS warpgroups (64 rows of `b_t` each) and one producer warp, which streams B
and A tiles with TMA into a ring of STAGES buffers guarded by `full` / `empty` mbarriers, as in
`gemm_hopper`. Up to MP = 64 a block has two consumers and about 100 KiB of ring, so two blocks
share an SM and one's epilogue hides behind the other's stream; at MP = 128 a block has four
(256-row B tiles: A, as wide as B there, is read from L2 half as often) and one block fills an SM.
TMA reads zeros past the ends of every operand, so M, N and K need not be multiples of any tile (K
must be a multiple of 8: TMA rows are 16-byte aligned); c is stored element by element under
bounds checks (at small M it is a small fraction of the bytes). The producer's and the consumers'
loops and the split-K hand-off are helpers (`stream_split`, `multiply_split`, `last_split`,
`sum_splits`) that `gemm_fp8.py` runs on fp8 tiles.

A `@dsl.jit` function cannot allocate memory, nor branch on run-time shapes, so `matmul` is plain
Python: it reads the shapes, asks `plan_for` for a `Plan` (cached per shape and SM count) and
calls one of the two jit functions, with a workspace it keeps per device (pass `workspace=` to own
it, e.g. one per stream: two calls running at once must not share one).

    python examples/gemm_small_m.py     # on an H100 / H200: checks against torch, prints TB/s
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from gemm_hopper import BM, gemm_hopper, init_ring

import dsl
from dsl import Constexpr, Int32, Tensor, bf16, f32, i32

BK = 64  # K per stage: one 128-byte swizzled row of bf16
ROWS = 64  # rows of b_t per consumer warpgroup (wgmma's M)
SMEM_PER_SM = 228 * 1024  # an H100 / H200 SM; each resident block also reserves 1 KiB
MAX_STAGES = 12
MAX_SPLITS = 16
MIN_PER = 4  # K tiles per split at least
FILL = 0.8  # of the resident-block slots that split-K aims to fill


def threads(consumers: int) -> int:
    """Consumer warpgroups first (wgmma wants whole, aligned warpgroups), the producer warp last."""
    return 128 * consumers + 32


def stages_for(mp: int, consumers: int, blocks_per_sm: int) -> int:
    """As many stages as fit in one block's share of the SM's shared memory."""
    budget = SMEM_PER_SM // blocks_per_sm - 2048  # the reserved KiB, the barriers
    return max(2, min(MAX_STAGES, budget // ((ROWS * consumers + mp) * BK * 2)))


def store_c(c: Any, acc: Any, M: Any, N: Any, n_row: Any, m0: Any, q: Any, MP: int) -> None:
    """The c^T tile of one thread into c: lane 4j + 2h + e is row n_row + 8h of c^T (column of c),
    column m0 + 8j + 2q + e (row of c), as the wgmma accumulator lays them out."""
    n_ok = [n_row < N, n_row + 8 < N]
    for j in dsl.static_range(MP // 8):
        for e in dsl.static_range(2):
            m = m0 + 8 * j + 2 * q + e
            if m < M:
                for h in dsl.static_range(2):
                    if n_ok[h]:
                        c[m, n_row + 8 * h] = dsl.cast(acc[4 * j + 2 * h + e], bf16)


def stream_split(sb: Any, sa: Any, tb: Any, ta: Any, full: Any, empty: Any, count: Any, first_kt: Any, n0: Any,
                 m0: Any, stage_bytes: int, BK: int, STAGES: int) -> None:
    """The producer thread: this split's `count` K tiles of b_t (rows from n0) and a (rows from m0)
    into the ring by TMA, each stage once its consumers have freed it."""
    for i in range(count):
        s = i % STAGES
        dsl.mbarrier_wait(empty, s, ((i // STAGES) % 2) ^ 1)
        dsl.mbarrier_expect_tx(full, s, stage_bytes)
        dsl.tma_load(sb, (s,), tb, (n0, (first_kt + i) * BK), full, s)
        dsl.tma_load(sa, (s,), ta, (m0, (first_kt + i) * BK), full, s)


def multiply_split(sb: Any, sa: Any, full: Any, empty: Any, count: Any, warpgroup: Any, tid: Any, MP: int,
                   STAGES: int) -> Any:
    """One consumer's c^T tile over this split's K tiles: its 64 rows of b_t times the MP rows of a,
    each stage released once the next wgmma is issued. Returns the waited accumulator."""
    acc = dsl.zeros(dsl.f32, MP // 2)
    for i in range(count):
        s = i % STAGES
        dsl.mbarrier_wait(full, s, (i // STAGES) % 2)
        acc = dsl.wgmma(acc, sb, (s, ROWS * warpgroup), sa, (s, 0))
        acc = dsl.wgmma_wait(acc, pending=1)  # the previous step's wgmma is done ...
        if i > 0 and tid % 32 == 0:
            dsl.mbarrier_arrive(empty, (i + STAGES - 1) % STAGES)  # ... so its buffer is free
    return dsl.wgmma_wait(acc, pending=0)


def last_split(acc: Any, partials: Any, tickets: Any, ticket: Any, tile: Any, split: Any, splits: Any, tid: Any,
               consumer_threads: int, MP: int) -> Any:
    """Writes this split's f32 partial tile (in register order: 16-byte vectors), then takes the tile's
    ticket: true in the block that drew the last one, which then sums every split."""
    chunks = MP // 8  # 16-byte vectors per thread
    for j in dsl.static_range(chunks):
        at = (((tile * splits + split) * chunks + j) * consumer_threads + tid) * 4
        partials.vstore(at, acc[4 * j:4 * j + 4])
    dsl.named_barrier(1, consumer_threads)  # every partial is written ...
    if tid == 0:  # ... before the ticket releases them
        ticket[0] = dsl.atomic_add(tickets, tile, 1, order="acq_rel")
    dsl.named_barrier(1, consumer_threads)
    return ticket[0] == splits - 1


def sum_splits(partials: Any, tile: Any, splits: Any, tid: Any, consumer_threads: int, MP: int) -> Any:
    """Every split's partial of this thread's accumulator, summed in split order (reproducible bits)."""
    chunks = MP // 8
    total = dsl.zeros(dsl.f32, MP // 2)
    for other in range(splits):
        lanes = []
        for j in dsl.static_range(chunks):
            at = (((tile * splits + other) * chunks + j) * consumer_threads + tid) * 4
            lanes += list(partials.vload(at, 4))
        total = total + dsl.vector(*lanes)
    return total


@dsl.kernel(target="sm_90a", minnctapersm=1)
def gemm_small_m_kernel(ta: dsl.TensorMap, tb: dsl.TensorMap, c: Tensor[bf16, 2], partials: Tensor[f32, 1],
                        tickets: Tensor[i32, 1], M: Int32, N: Int32, per_split: Int32, k_tiles: Int32,
                        MP: Constexpr[int], CONSUMERS: Constexpr[int], STAGES: Constexpr[int]):
    smem = dsl.SharedAllocator(dynamic=True)
    sb = smem.array(dsl.bf16, (STAGES, ROWS * CONSUMERS, BK), swizzle=128)
    sa = smem.array(dsl.bf16, (STAGES, MP, BK), swizzle=128)
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
    count = dsl.min(per_split, k_tiles - first_kt)  # every split has at least one (plan_for sees to it)
    init_ring(full, empty, tid, STAGES, CONSUMERS)

    if tid == consumer_threads:  # the producer: one thread of the last warp
        stream_split(sb, sa, tb, ta, full, empty, count, first_kt, n0, m0, (ROWS * CONSUMERS + MP) * BK * 2, BK,
                     STAGES)
    elif tid < consumer_threads:
        warpgroup, t = tid // 128, tid % 128
        acc = multiply_split(sb, sa, full, empty, count, warpgroup, tid, MP, STAGES)
        n_row = n0 + ROWS * warpgroup + 16 * (t // 32) + (t % 32) // 4
        q = t % 4
        if splits == 1:
            store_c(c, acc, M, N, n_row, m0, q, MP)
        else:
            tile = dsl.block_idx.z * dsl.grid_dim.x + dsl.block_idx.x
            if last_split(acc, partials, tickets, ticket, tile, split, splits, tid, consumer_threads, MP):
                store_c(c, sum_splits(partials, tile, splits, tid, consumer_threads, MP), M, N, n_row, m0, q, MP)
                if tid == 0:
                    tickets[tile] = 0  # ready for the next call


@dsl.jit
def gemm_small_m(a: Tensor[bf16, 2], b_t: Tensor[bf16, 2], c: Tensor[bf16, 2], partials: Tensor[f32, 1],
                 tickets: Tensor[i32, 1], splits: Int32, MP: Constexpr[int] = 16, CONSUMERS: Constexpr[int] = 2,
                 STAGES: Constexpr[int] = 6):
    M, K = a.shape[0], a.shape[1]
    N = b_t.shape[0]
    assert b_t.shape[1] == K and c.shape[0] == M and c.shape[1] == N, "shapes: a (M, K), b_t (N, K), c (M, N)"
    assert K % 8 == 0 and K > 0, "K must be a positive multiple of 8 (TMA rows are 16-byte aligned)"
    assert splits >= 1, "splits must be at least 1"
    k_tiles = dsl.cdiv(K, BK)
    per_split = dsl.cdiv(k_tiles, splits)
    used = dsl.cdiv(k_tiles, per_split)  # no split is left without K
    tiles_n = dsl.cdiv(N, ROWS * CONSUMERS)
    tiles_m = dsl.cdiv(M, MP)
    split_k = dsl.min(used - 1, 1)  # 1 when the partials and tickets are used, else 0
    assert partials.shape[0] >= split_k * tiles_m * tiles_n * used * MP * ROWS * CONSUMERS, \
        "partials is too small for this split: see workspace_size()"
    assert tickets.shape[0] >= split_k * tiles_m * tiles_n, "tickets is too small: see workspace_size()"
    ta = dsl.tensor_map(a, box=(MP, BK), swizzle=128)
    tb = dsl.tensor_map(b_t, box=(ROWS * CONSUMERS, BK), swizzle=128)
    gemm_small_m_kernel(ta, tb, c, partials, tickets, M, N, per_split, k_tiles, MP, CONSUMERS, STAGES).launch(
        grid=(tiles_n, used, tiles_m), block=threads(CONSUMERS))


# ----- choosing a kernel ------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What `matmul` launches: `gemm_hopper` with BN, or `gemm_small_m` with MP, CONSUMERS, STAGES
    and `splits` (blocks_per_sm is what STAGES was sized for)."""

    variant: str  # "hopper" or "small_m"
    BN: int = 256
    MP: int = 16
    CONSUMERS: int = 2
    STAGES: int = 6
    splits: int = 1
    blocks_per_sm: int = 2

    def describe(self) -> str:
        """One line for tables (the fields the variant ignores left out)."""
        if self.variant == "hopper":
            return f"gemm_hopper BN={self.BN}"
        return (f"gemm_small_m MP={self.MP} CONSUMERS={self.CONSUMERS} STAGES={self.STAGES} splits={self.splits} "
                f"({self.blocks_per_sm} per SM)")

    def k_split(self, K: int) -> tuple[int, int]:
        """(K tiles per split, splits used): as `gemm_small_m` computes them."""
        k_tiles = -(-K // BK)
        per = -(-k_tiles // self.splits)
        return per, -(-k_tiles // per)

    def workspace_size(self, M: int, N: int, K: int) -> tuple[int, int]:
        """(f32 partials, i32 tickets) this plan needs; (0, 0) without split-K."""
        used = self.k_split(K)[1]
        if self.variant != "small_m" or used == 1:
            return 0, 0
        tiles = -(-M // self.MP) * -(-N // (ROWS * self.CONSUMERS))
        return tiles * used * self.MP * ROWS * self.CONSUMERS, tiles


def small_m_plan(M: int, N: int, K: int, sm_count: int, mp: int | None = None, consumers: int | None = None,
                 blocks_per_sm: int | None = None, splits: int | None = None) -> Plan:
    """The swapped split-K kernel's configuration; any argument given overrides the heuristic
    (the shape benchmark's sweep uses that)."""
    if mp is None:
        mp = 8
        while mp < min(M, 128):
            mp *= 2
    if consumers is None:
        consumers = 2 if mp <= 64 else 4  # wider B tiles halve the A traffic where A is 128 rows
    if blocks_per_sm is None:
        blocks_per_sm = 2 if consumers <= 2 else 1
    stages = stages_for(mp, consumers, blocks_per_sm)
    tiles = -(-M // mp) * -(-N // (ROWS * consumers))
    k_tiles = -(-K // BK)
    if splits is None:
        splits = _best_split(tiles, k_tiles, sm_count * blocks_per_sm)
    return Plan("small_m", MP=mp, CONSUMERS=consumers, STAGES=stages, splits=splits, blocks_per_sm=blocks_per_sm)


def _best_split(tiles: int, k_tiles: int, slots: int) -> int:
    """The fewest K splits that give the GPU's resident-block slots FILL of their blocks, each split
    keeping at least MIN_PER K tiles (its pipeline's fill is paid once per block), and among up to
    twice that many the one that divides K most evenly. Memory-bound work wants every SM streaming
    with a deep ring, not more blocks: each split adds a partial tile's write and read."""
    most = min(MAX_SPLITS, max(1, k_tiles // MIN_PER))
    if tiles >= FILL * slots or most == 1:
        return 1
    fewest = min(most, -(-int(FILL * slots) // tiles))
    best, best_waste = 1, None
    for splits in range(fewest, min(most, 2 * fewest) + 1):
        per = -(-k_tiles // splits)
        used = -(-k_tiles // per)
        waste = used * per - k_tiles  # K tiles the last split lacks
        if best_waste is None or waste < best_waste:
            best, best_waste = used, waste
    return best


@functools.lru_cache(maxsize=1024)
def plan_for(M: int, N: int, K: int, sm_count: int) -> Plan:
    """`gemm_hopper` where its 128 x BN tiles fill the GPU and its shape rules hold (N a multiple
    of 64, K of 64), the swapped split-K kernel everywhere else, small M first of all."""
    if M > 128 and K % BK == 0:
        for bn in (256, 128, 64):
            if N % bn == 0 and -(-M // BM) * (N // bn) >= sm_count:
                return Plan("hopper", BN=bn)
    return small_m_plan(M, N, K, sm_count)


# ----- the entry point ---------------------------------------------------------------------------


@dataclass
class Workspace:
    """Split-K's scratch: f32 partial tiles and one i32 ticket per tile (zero between calls: the
    kernel puts back each ticket it takes)."""

    partials: Any
    tickets: Any


_WORKSPACES: dict[Any, Workspace] = {}


def _device_key(x: Any) -> Any:
    device = getattr(x, "device", None)
    return ("torch", device.index) if device is not None and getattr(device, "type", "") == "cuda" else None


def make_workspace(like: Any, partials: int, tickets: int) -> Workspace:
    """Zeroed buffers where `like` lives: torch on its GPU, else NumPy (the interpreter)."""
    if _device_key(like) is not None:
        import torch

        return Workspace(torch.zeros(max(partials, 4), dtype=torch.float32, device=like.device),
                         torch.zeros(max(tickets, 1), dtype=torch.int32, device=like.device))
    import numpy as np

    return Workspace(np.zeros(max(partials, 4), dtype=np.float32), np.zeros(max(tickets, 1), dtype=np.int32))


def workspace_for(like: Any, partials: int, tickets: int) -> Workspace:
    """The device's cached workspace, grown when a call needs more (host arrays get a fresh one)."""
    key = _device_key(like)
    ws = _WORKSPACES.get(key) if key is not None else None
    if ws is None or ws.partials.shape[0] < partials or ws.tickets.shape[0] < tickets:
        old = (ws.partials.shape[0], ws.tickets.shape[0]) if ws is not None else (0, 0)
        ws = make_workspace(like, max(partials, old[0]), max(tickets, old[1]))
        if key is not None:
            _WORKSPACES[key] = ws
    return ws


@functools.lru_cache(maxsize=16)
def _torch_sm_count(index: int | None) -> int:
    import torch

    return torch.cuda.get_device_properties(index if index is not None else torch.cuda.current_device()
                                            ).multi_processor_count


def sm_count_of(x: Any) -> int:
    """The SM count of the GPU `x` is on (the default target's for host arrays)."""
    key = _device_key(x)
    return _torch_sm_count(key[1]) if key is not None else int(dsl.sm_count())


def matmul(a: Any, b_t: Any, c: Any, plan: Plan | None = None, workspace: Workspace | None = None) -> Plan:
    """c = a @ b_t.T for bf16 a (M, K), b_t (N, K) (an nn.Linear weight), c (M, N): picks the kernel
    for the shape (or runs `plan`) and returns the plan it ran."""
    M, K = int(a.shape[0]), int(a.shape[1])
    N = int(b_t.shape[0])
    if plan is None:
        plan = plan_for(M, N, K, sm_count_of(a))
    if plan.variant == "hopper":
        gemm_hopper(a, b_t, c, BN=plan.BN)
        return plan
    partials, tickets = plan.workspace_size(M, N, K)
    ws = workspace if workspace is not None else workspace_for(c, partials, tickets)
    gemm_small_m(a, b_t, c, ws.partials, ws.tickets, plan.splits, MP=plan.MP, CONSUMERS=plan.CONSUMERS,
                 STAGES=plan.STAGES)
    return plan


if __name__ == "__main__":
    import torch

    for M, N, K in [(1, 4096, 4096), (16, 8192, 8192), (64, 14336, 4096), (128, 4096, 14336)]:
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b_t = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        chosen = matmul(a, b_t, c)
        error = (c.float() - (a @ b_t.T).float()).abs().max().item()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(20):
            matmul(a, b_t, c)
        end.record()
        torch.cuda.synchronize()
        ms = start.elapsed_time(end) / 20
        print(f"{M} x {N} x {K}: {chosen.describe()}, max error {error:.3f}, {N * K * 2 / ms / 1e9:.2f} TB/s of B")
