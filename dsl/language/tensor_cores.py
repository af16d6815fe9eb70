"""Tensor cores and the memory movers that feed them, as kernel authors see them.

Like `intrinsics.py`, these objects only exist to be named inside `@kernel` / `@jit`
functions (the frontend emits their PTX, see `dsl/frontend/tensor_core_ops.py`); their
docstrings are what the editor shows.

**Fragments are vectors.** A warp's MMA operands are per-thread vectors whose lanes follow
the PTX ISA's fragment layouts. With `lane = dsl.lane_id()`, `g = lane // 4` and
`t = lane % 4`, for `mma_sync` m16n8k16 (16-bit inputs):

- A (16x16, row-major), `vector<8>`: lanes 0,1 = A[g, 2t..2t+1]; 2,3 = A[g+8, 2t..2t+1];
  4,5 = A[g, 2t+8..2t+9]; 6,7 = A[g+8, 2t+8..2t+9]. `ldmatrix(count=4)` of the four 8x8
  quarters (rows 0-7 / 8-15 by columns 0-7, then columns 8-15) yields exactly this.
- B (16x8, "col": stored as B^T, n-major), `vector<4>`: lanes 0,1 = B[2t..2t+1, g];
  2,3 = B[2t+8..2t+9, g]. `ldmatrix(count=2)` of B^T's two 8x8 halves yields it, or
  `ldmatrix(count=2, transpose=True)` of a row-major (k-major) B.
- C and D (16x8), `vector<4>` of f32 (or f16 / i32): lanes 0,1 = C[g, 2t..2t+1];
  2,3 = C[g+8, 2t..2t+1].

For 8-bit inputs (m16n8k32: i8, u8 and fp8) each 16-bit pair above is four bytes:
A is `vector<16>` (A[g, 4t..4t+3], A[g+8, 4t..4t+3], A[g, 4t+16..], A[g+8, 4t+16..]),
B is `vector<8>` (B[4t..4t+3, g], B[4t+16..4t+19, g]).

**Hopper warpgroup MMA** (`wgmma`, sm_90a): four warps (128 threads, a warpgroup) multiply
a 64xK tile of A by an NxK tile of B (both in shared memory, K-major, 128-byte swizzled)
into a 64xN f32 accumulator held in registers: `vector<N/2 x f32>` per thread. Thread
`t` of the warpgroup (warp `w = t // 32`, lane `l`, `g = l // 4`, `q = l % 4`) holds, for
each 8-column block `j`: lanes 4j, 4j+1 = D[16w + g, 8j + 2q..2q+1] and 4j+2, 4j+3 =
D[16w + g + 8, 8j + 2q..2q+1].

**Swizzled shared memory.** `SharedAllocator.array(dtype, shape, swizzle=128)` stores
each row's 16-byte chunks at `chunk ^ (row % 8)` (the layout TMA writes and wgmma reads
with a 128-byte swizzle); indexing it (`buf[r, c]`, `vload`, `ldmatrix`, `cp_async`)
applies the swizzle, so kernels index it as the plain array it stands for. Its rows must
be exactly `swizzle` bytes, and it is aligned to 8 rows (1024 bytes for 128).
"""

from __future__ import annotations

from typing import Any


def _outside(name: str) -> RuntimeError:
    return RuntimeError(f"dsl.{name} can only be used inside @dsl.kernel or @dsl.jit functions")


# ----- warp-level MMA (sm_80+) -------------------------------------------------------------

def mma_sync(a: Any, b: Any, c: Any) -> Any:
    """One warp-wide `mma.sync`: D = A x B + C, returned as a new accumulator fragment.

    The shape follows the inputs: f16 / bf16 fragments (`vector<8>`, `vector<4>`) are
    m16n8k16 with an f32 (or, for f16, f16) accumulator `vector<4>`; i8 / u8 (`vector<16>`,
    `vector<8>`) are m16n8k32 into i32; fp8 e4m3 / e5m2 (sm_89+) are m16n8k32 into f32.
    Every lane of the warp must call it. The layouts are in this module's documentation.
    """
    raise _outside("mma_sync")


def ldmatrix(smem: Any, index: Any, count: int = 4, transpose: bool = False) -> Any:
    """Loads `count` (1, 2 or 4) 8x8 matrices of 16-bit elements from shared memory into
    the warp's registers (`ldmatrix.sync.aligned`): a `vector<2 * count>` per lane.

    Each lane passes the index of one 16-byte row: lanes 0-7 the rows of the first matrix,
    8-15 of the second, and so on. Lane `l` receives elements (row l // 4, columns
    2 (l % 4), +1) of each matrix; `transpose=True` delivers the transposed matrices (a
    k-major B operand for `mma_sync`). Rows must start on 16-byte boundaries.

    On an 8-bit array (i8, u8, fp8) a row is 16 elements and each lane receives 4 of each
    matrix, bytes 4 (l % 4) .. +3 of row l // 4 (a `vector<4 * count>`): the m16n8k32 A
    fragment with `count=4`, and the B fragment of a B stored N x K with `count=2`. 8-bit
    data cannot be transposed (`.trans` moves 16-bit elements). Any other type can be moved
    as 16-bit elements through a view: `dsl.ldmatrix(smem.view(dsl.u16), ...)`.
    """
    raise _outside("ldmatrix")


def cp_async(dst: Any, dst_index: Any, src: Any, src_index: Any, size: int = 16, mask: Any = True) -> None:
    """Starts an asynchronous copy of `size` bytes (4, 8 or 16) from global tensor `src`
    at `src_index` to shared array `dst` at `dst_index` (`cp.async`; 16 bytes bypass L1).

    Where `mask` is false nothing is read and the destination is zero-filled (a bounds
    guard). Copies join a group at `cp_async_commit()`; `cp_async_wait(n)` waits until at
    most `n` groups are still in flight. Both addresses must be `size`-aligned.
    """
    raise _outside("cp_async")


def cp_async_commit() -> None:
    """Closes the current group of `cp_async` copies (`cp.async.commit_group`)."""
    raise _outside("cp_async_commit")


def cp_async_wait(pending: int = 0) -> None:
    """Waits until at most `pending` committed `cp_async` groups are in flight
    (`cp.async.wait_group`); follow it with `dsl.barrier()` before other threads read."""
    raise _outside("cp_async_wait")


def zeros(dtype: Any, width: int) -> Any:
    """A `vector<width x dtype>` of zeros (any width): a fresh MMA accumulator."""
    raise _outside("zeros")


# ----- mbarriers and proxy fences (sm_90) --------------------------------------------------

def mbarrier_init(bar: Any, index: Any, count: Any) -> None:
    """Initialises the mbarrier `bar[index]` (a shared `u64` array) to expect `count`
    arrivals per phase. Follow the initialisation with `fence_mbarrier_init()` and a barrier."""
    raise _outside("mbarrier_init")


def mbarrier_arrive(bar: Any, index: Any, cta: Any = None) -> None:
    """Arrives on `bar[index]` (`mbarrier.arrive`); with `cta`, on that barrier in the block of
    rank `cta` of the cluster (`mapa` + `mbarrier.arrive.shared::cluster`)."""
    raise _outside("mbarrier_arrive")


def named_barrier(barrier_id: Any, threads: int) -> None:
    """Waits until `threads` threads (a multiple of 32) reach barrier `barrier_id` (1 to 15;
    0 is `dsl.barrier()`; a run-time id must be the same across each warp): `bar.sync`, to
    synchronise one warpgroup without the others."""
    raise _outside("named_barrier")


def named_barrier_arrive(barrier_id: Any, threads: int) -> None:
    """Arrives at named barrier `barrier_id` without waiting (`bar.arrive`): with `named_barrier`
    on the same id and count, one warpgroup lets another go on (producer/consumer hand-offs,
    two consumers taking turns at the tensor cores)."""
    raise _outside("named_barrier_arrive")


def cluster_rank() -> Any:
    """This block's rank within its cluster (`%cluster_ctarank`, i32; 0 without a cluster)."""
    raise _outside("cluster_rank")


def cluster_barrier() -> None:
    """Waits until every thread of every block of the cluster arrives (`barrier.cluster`):
    before blocks use each other's shared memory, and before one exits while others may."""
    raise _outside("cluster_barrier")


def mbarrier_expect_tx(bar: Any, index: Any, nbytes: Any) -> None:
    """Arrives on `bar[index]` and adds `nbytes` to the transaction bytes its phase waits for
    (`mbarrier.arrive.expect_tx`): the bytes the TMA loads signalling it will deliver."""
    raise _outside("mbarrier_expect_tx")


def mbarrier_wait(bar: Any, index: Any, parity: Any) -> None:
    """Waits until the phase of `bar[index]` with parity `parity` (0 or 1) has completed
    (`mbarrier.try_wait.parity` in a loop)."""
    raise _outside("mbarrier_wait")


def fence_mbarrier_init() -> None:
    """Makes mbarrier initialisations visible to the asynchronous proxy and the cluster."""
    raise _outside("fence_mbarrier_init")


def fence_proxy_async() -> None:
    """Orders this thread's shared-memory writes before later TMA stores and wgmma reads
    (`fence.proxy.async.shared::cta`)."""
    raise _outside("fence_proxy_async")


# ----- TMA (sm_90) -------------------------------------------------------------------------

class TensorMap:
    """A kernel parameter annotation: a TMA tensor map (`CUtensorMap`) of a global tensor.

    The host side makes it with `dsl.tensor_map(tensor, box=(rows, cols), swizzle=128)` in a
    `@jit` function; the generated launcher encodes it (`cuTensorMapEncodeTiled`) for each
    call and passes it as a 128-byte `__grid_constant__` parameter. In the kernel, `tmap.dtype`
    (the tensor's element type) and `tmap.box` (a tuple) are compile-time values, so one kernel
    can allocate the shared tiles of whatever types it is launched with
    (`smem.array(ta.dtype, (STAGES, BM, BK), swizzle=128)`).
    """

    def __init__(self) -> None:
        raise TypeError("dsl.TensorMap is an annotation; make one with dsl.tensor_map(tensor, box=...)")


class TensorMapSpec:
    """An abstract tensor map argument for compiling a kernel without data (like `TensorSpec`):
    `dsl.TensorMapSpec(dsl.bf16, box=(128, 64), swizzle=128)`."""

    def __init__(self, dtype: Any, box: tuple[int, ...], swizzle: int = 0):
        self.dtype = dtype
        self.box = tuple(box)
        self.swizzle = swizzle

    def __repr__(self) -> str:
        return f"TensorMapSpec({self.dtype!r}, box={self.box}, swizzle={self.swizzle})"


def tensor_map(tensor: Any, box: Any, swizzle: int = 0) -> Any:
    """In a `@jit` function: the TMA tensor map of a 2- to 5-D `tensor`, moving tiles of
    `box` elements (outer to inner, each at most 256; the inner extent a multiple of 16
    bytes, at most `swizzle` bytes when swizzled). `swizzle` is 0, 32, 64 or 128 (bytes)."""
    raise _outside("tensor_map")


def tma_load(dst: Any, dst_index: Any, tmap: Any, coords: Any, bar: Any, bar_index: Any,
             multicast: Any = None) -> None:
    """Starts a TMA load of the box at element `coords` (outer to inner) of `tmap` into
    shared array `dst` from `dst_index` on (the indices of the dimensions before the box's;
    outer box dimensions of extent 1 need none); its bytes complete the transaction of mbarrier
    `bar[bar_index]`. Out-of-bounds elements read as zero. `multicast` (a u16 mask of the
    cluster's blocks) writes the tile into each of those blocks' `dst` and barriers."""
    raise _outside("tma_load")


def tma_store(tmap: Any, coords: Any, src: Any, src_index: Any) -> None:
    """Starts a TMA store of shared array `src` (from `src_index`) to the box at `coords`
    of `tmap`; out-of-bounds elements are not written. Call `fence_proxy_async()` after
    writing `src`, then `tma_store_commit()` and `tma_store_wait()`."""
    raise _outside("tma_store")


def tma_reduce(tmap: Any, coords: Any, src: Any, src_index: Any, op: str = "add") -> None:
    """Starts a TMA reduction of shared array `src` (from `src_index`) into the box at `coords`
    of `tmap`: each element of the tensor there becomes `element <op> src`, atomically per
    element (`op` "add" on f32, i32 or u32 maps; "min" or "max" on i32 or u32 ones). Many
    blocks may reduce into the same box; out-of-bounds elements are not touched. Completes
    like `tma_store`: `fence_proxy_async()` first, then `tma_store_commit()` and `tma_store_wait()`."""
    raise _outside("tma_reduce")


def tma_store_commit() -> None:
    """Closes the current group of TMA stores (`cp.async.bulk.commit_group`)."""
    raise _outside("tma_store_commit")


def tma_store_wait(pending: int = 0) -> None:
    """Waits until at most `pending` TMA store groups still read their shared memory."""
    raise _outside("tma_store_wait")


# ----- Hopper warpgroup MMA (sm_90a) -------------------------------------------------------

def wgmma(acc: Any, a: Any, a_index: Any, b: Any, b_index: Any, b_major: str = "k") -> Any:
    """Issues a warpgroup MMA: `acc += A x B` over the whole K extent of the tiles.

    The accumulator `acc` is `vector<N/2 x f32>` (N a multiple of 8, at most 256), or
    `vector<N/2 x i32>` for 8-bit integers. Operands are shared arrays with `swizzle=128`
    (128-byte rows): 16-bit (f16 or bf16; one type for both, rows of 64 elements, k16 per
    instruction), fp8 (f8e4m3 and f8e5m2, A and B may differ; into f32) or 8-bit integers
    (i8 and u8, may differ; into i32); 8-bit rows hold 128 elements, k32 per instruction,
    and both operands are K-major (8-bit wgmma has no transpose):

    - A is K-major, [rows][K]: the 64 rows starting at `a_index` (the indices of every
      dimension but the last). Or A is in registers: pass `a` as a `vector<8 * K/16>` laid out as a
      64x16 accumulator per step of K (the f32 result of a previous wgmma converted to
      bf16 is such a vector; pass `a_index=None`); 8-bit A is `vector<16 * K/32>`, four
      words per k32 step in mma_sync's m16n8k32 A layout for each warp's 16 rows.
    - B with `b_major="k"` is stored N x K (B^T, K contiguous): the N rows from `b_index`.
      With `b_major="n"` it is stored K x N as (..., N/64, K, 64), 64-column chunks of K rows
      (what a TMA box of 64 columns writes), and `b_index` indexes the dimensions before
      those three.

    It emits `wgmma.fence`, one `wgmma.mma_async` per 32 bytes of K and
    `wgmma.commit_group`. The result is in flight: pass it through `wgmma_wait` before
    reading it (a read before is DSL305; passing it into the next `wgmma` is no read). All
    128 threads of the warpgroup must call it.
    """
    raise _outside("wgmma")


def wgmma_wait(acc: Any, pending: int = 0) -> Any:
    """Waits until at most `pending` wgmma groups are in flight and returns `acc` (one
    accumulator or a tuple of them) (`wgmma.wait_group`). What it returns is safe to read
    when its group is older than the `pending` newest ones (always with pending=0); a value
    not passed through the wait is still in flight after it."""
    raise _outside("wgmma_wait")


def setmaxnreg(count: int, increase: bool) -> None:
    """Raises (`increase=True`) or lowers the registers per thread of this warpgroup to
    `count` (24 to 256, a multiple of 8; `setmaxnreg`, sm_90a): producer warpgroups give
    registers to the consumers that hold accumulators."""
    raise _outside("setmaxnreg")

