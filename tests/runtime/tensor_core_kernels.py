"""Small kernels that pin down the tensor-core surface on the GPU (see test_gpu_tensor_cores.py):
each reads its operands from global memory by the documented fragment layouts, so a test
that passes checks the documentation as well as the instruction."""

import dsl
from dsl import Int32, Tensor, bf16, f16, f32, i8, i32

# ----- mma_sync with fragments built by the documented layouts ------------------------------


def fragments_16bit(a, b, lane):
    g = lane // 4
    t = lane % 4
    fa = dsl.vector(a[g, 2 * t], a[g, 2 * t + 1], a[g + 8, 2 * t], a[g + 8, 2 * t + 1],
                    a[g, 2 * t + 8], a[g, 2 * t + 9], a[g + 8, 2 * t + 8], a[g + 8, 2 * t + 9])
    fb = dsl.vector(b[2 * t, g], b[2 * t + 1, g], b[2 * t + 8, g], b[2 * t + 9, g])
    return fa, fb


def fragments_8bit(a, b, lane):
    g = lane // 4
    t = lane % 4
    fa = dsl.vector(*[a[g + 8 * (k // 4 % 2), 4 * t + k % 4 + 16 * (k // 8)] for k in dsl.static_range(16)])
    fb = dsl.vector(*[b[4 * t + k % 4 + 16 * (k // 4), g] for k in dsl.static_range(8)])
    return fa, fb


def store_accumulator(d, acc, lane):
    g = lane // 4
    t = lane % 4
    d[g, 2 * t] = acc[0]
    d[g, 2 * t + 1] = acc[1]
    d[g + 8, 2 * t] = acc[2]
    d[g + 8, 2 * t + 1] = acc[3]


@dsl.kernel
def mma_16bit_f32(a: Tensor[bf16, 2], b: Tensor[bf16, 2], c: Tensor[f32, 2], d: Tensor[f32, 2]):
    lane = dsl.lane_id()
    fa, fb = fragments_16bit(a, b, lane)
    g = lane // 4
    t = lane % 4
    fc = dsl.vector(c[g, 2 * t], c[g, 2 * t + 1], c[g + 8, 2 * t], c[g + 8, 2 * t + 1])
    store_accumulator(d, dsl.mma_sync(fa, fb, fc), lane)


@dsl.kernel
def mma_f16_f16(a: Tensor[f16, 2], b: Tensor[f16, 2], d: Tensor[f16, 2]):
    lane = dsl.lane_id()
    fa, fb = fragments_16bit(a, b, lane)
    store_accumulator(d, dsl.mma_sync(fa, fb, dsl.zeros(dsl.f16, 4)), lane)


@dsl.kernel
def mma_8bit(a: Tensor[i8, 2], b: Tensor[i8, 2], d: Tensor[i32, 2]):
    lane = dsl.lane_id()
    fa, fb = fragments_8bit(a, b, lane)
    store_accumulator(d, dsl.mma_sync(fa, fb, dsl.zeros(dsl.i32, 4)), lane)


@dsl.kernel
def mma_fp8(a: Tensor[dsl.f8e4m3, 2], b: Tensor[dsl.f8e4m3, 2], d: Tensor[f32, 2]):
    lane = dsl.lane_id()
    fa, fb = fragments_8bit(a, b, lane)
    store_accumulator(d, dsl.mma_sync(fa, fb, dsl.zeros(dsl.f32, 4)), lane)


@dsl.jit
def run_mma_bf16(a: Tensor[bf16, 2], b: Tensor[bf16, 2], c: Tensor[f32, 2], d: Tensor[f32, 2]):
    mma_16bit_f32(a, b, c, d).launch(grid=1, block=32)


@dsl.jit
def run_mma_f16(a: Tensor[f16, 2], b: Tensor[f16, 2], d: Tensor[f16, 2]):
    mma_f16_f16(a, b, d).launch(grid=1, block=32)


@dsl.jit
def run_mma_i8(a: Tensor[i8, 2], b: Tensor[i8, 2], d: Tensor[i32, 2]):
    mma_8bit(a, b, d).launch(grid=1, block=32)


@dsl.jit
def run_mma_fp8(a: Tensor[dsl.f8e4m3, 2], b: Tensor[dsl.f8e4m3, 2], d: Tensor[f32, 2]):
    mma_fp8(a, b, d).launch(grid=1, block=32)


# ----- ldmatrix and cp.async ---------------------------------------------------------------


@dsl.kernel
def ldmatrix_lanes(x: Tensor[bf16, 2], out: Tensor[bf16, 2], out_t: Tensor[bf16, 2]):
    """Each lane writes the 8 elements `ldmatrix.x4` (and `.trans`) gave it."""
    smem = dsl.SharedAllocator()
    buf = smem.array(dsl.bf16, (16, 16))
    lane = dsl.lane_id()
    for k in dsl.static_range(8):
        e = lane * 8 + k
        buf[e // 16, e % 16] = x[e // 16, e % 16]
    dsl.barrier()
    where = (lane % 16, (lane // 16) * 8)
    plain = dsl.ldmatrix(buf, where)
    transposed = dsl.ldmatrix(buf, where, transpose=True)
    for k in dsl.static_range(8):
        out[lane, k] = plain[k]
        out_t[lane, k] = transposed[k]


@dsl.jit
def run_ldmatrix(x: Tensor[bf16, 2], out: Tensor[bf16, 2], out_t: Tensor[bf16, 2]):
    ldmatrix_lanes(x, out, out_t).launch(grid=1, block=32)


@dsl.kernel
def cp_async_masked(x: Tensor[f32, 1], out: Tensor[f32, 1], valid_chunks: Int32):
    """Thread t copies 16-byte chunk t of x, or zero-fills it past `valid_chunks`."""
    smem = dsl.SharedAllocator()
    buf = smem.array(dsl.f32, (256,))
    t = dsl.thread_idx.x
    dsl.cp_async(buf, 4 * t, x, 4 * t, mask=t < valid_chunks)
    dsl.cp_async_commit()
    dsl.cp_async_wait(0)
    dsl.barrier()
    for k in dsl.static_range(4):
        out[4 * t + k] = buf[4 * t + k]


@dsl.jit
def run_cp_async(x: Tensor[f32, 1], out: Tensor[f32, 1], valid_chunks: Int32):
    cp_async_masked(x, out, valid_chunks).launch(grid=1, block=64)


# ----- TMA: 2-D and 3-D boxes, swizzled reads, stores --------------------------------------


@dsl.kernel
def tma_round_trip(tx: dsl.TensorMap, ty: dsl.TensorMap, swizzled: Tensor[bf16, 3], z0: Int32, z1: Int32):
    """Loads the (2, 8, 64) box at (z0, z1, 0) of x with a 128-byte swizzle, writes what plain
    indexing of the swizzled array reads to `swizzled`, and stores the box to y by TMA."""
    smem = dsl.SharedAllocator(dynamic=True)
    tile = smem.array(dsl.bf16, (1, 2, 8, 64), swizzle=128)
    bar = smem.array(dsl.u64, (1,))
    t = dsl.thread_idx.x
    if t == 0:
        dsl.mbarrier_init(bar, 0, 1)
        dsl.fence_mbarrier_init()
    dsl.barrier()
    if t == 0:
        dsl.mbarrier_expect_tx(bar, 0, 2 * 8 * 64 * 2)
        dsl.tma_load(tile, (0,), tx, (z0, z1, 0), bar, 0)
    dsl.mbarrier_wait(bar, 0, 0)
    for k in dsl.static_range(8):  # 128 threads x 8 elements = the box
        e = t * 8 + k
        swizzled[e // 512, (e // 64) % 8, e % 64] = tile[0, e // 512, (e // 64) % 8, e % 64]
    dsl.fence_proxy_async()
    dsl.barrier()
    if t == 0:
        dsl.tma_store(ty, (z0, z1, 0), tile, (0,))
        dsl.tma_store_commit()
        dsl.tma_store_wait(0)


@dsl.jit
def run_tma_round_trip(x: Tensor[bf16, 3], y: Tensor[bf16, 3], swizzled: Tensor[bf16, 3], z0: Int32, z1: Int32):
    tx = dsl.tensor_map(x, box=(2, 8, 64), swizzle=128)
    ty = dsl.tensor_map(y, box=(2, 8, 64), swizzle=128)
    tma_round_trip(tx, ty, swizzled, z0, z1).launch(grid=1, block=128)


# ----- TMA reductions: every block adds (or takes the max of) its tile into one box -----------


def reduce_tile(tile, x, ty, z0, z1, op):
    """Block b's (32, 32) slice of x into the swizzled `tile`, then one TMA reduction of it into
    the box of `ty` at (z0, z1) (128 threads x 8 elements)."""
    t = dsl.thread_idx.x
    for k in dsl.static_range(8):
        e = t * 8 + k
        tile[e // 32, e % 32] = x[dsl.block_idx.x, e // 32, e % 32]
    dsl.fence_proxy_async()
    dsl.barrier()
    if t == 0:
        dsl.tma_reduce(ty, (z0, z1), tile, (), op)
        dsl.tma_store_commit()
        dsl.tma_store_wait(0)


@dsl.kernel
def tma_add_f32(x: Tensor[f32, 3], ty: dsl.TensorMap, z0: Int32, z1: Int32):
    smem = dsl.SharedAllocator(dynamic=True)
    reduce_tile(smem.array(f32, (32, 32), swizzle=128), x, ty, z0, z1, "add")


@dsl.kernel
def tma_max_i32(x: Tensor[i32, 3], ty: dsl.TensorMap, z0: Int32, z1: Int32):
    smem = dsl.SharedAllocator(dynamic=True)
    reduce_tile(smem.array(i32, (32, 32), swizzle=128), x, ty, z0, z1, "max")


@dsl.jit
def run_tma_reductions(xf: Tensor[f32, 3], yf: Tensor[f32, 2], xi: Tensor[i32, 3], yi: Tensor[i32, 2],
                       z0: Int32, z1: Int32):
    """yf[box] += the sum of xf's blocks and yi[box] = max(yi, xi's blocks), the box at (z0, z1)
    of 32 x 32 elements (what falls outside y untouched)."""
    tma_add_f32(xf, dsl.tensor_map(yf, box=(32, 32), swizzle=128), z0, z1).launch(
        grid=xf.shape[0], block=128, smem=32 * 32 * 4 + 1024)
    tma_max_i32(xi, dsl.tensor_map(yi, box=(32, 32), swizzle=128), z0, z1).launch(
        grid=xi.shape[0], block=128, smem=32 * 32 * 4 + 1024)


# ----- wgmma with A in registers and an N-major B -------------------------------------------


@dsl.kernel(target="sm_90a")
def wgmma_registers_n_major(a: Tensor[bf16, 2], tb: dsl.TensorMap, d: Tensor[f32, 2]):
    """d (64 x 128) = a (64 x 64, from registers) @ b (64 x 128, K x N, N contiguous)."""
    smem = dsl.SharedAllocator(dynamic=True)
    sb = smem.array(dsl.bf16, (2, 64, 64), swizzle=128)  # two 64-column chunks of B's 64 rows
    bar = smem.array(dsl.u64, (1,))
    t = dsl.thread_idx.x
    if t == 0:
        dsl.mbarrier_init(bar, 0, 1)
        dsl.fence_mbarrier_init()
    dsl.barrier()
    if t == 0:
        dsl.mbarrier_expect_tx(bar, 0, 64 * 128 * 2)
        for chunk in dsl.static_range(2):
            dsl.tma_load(sb, (chunk,), tb, (0, 64 * chunk), bar, 0)
    dsl.mbarrier_wait(bar, 0, 0)
    warp = t // 32
    g = (t % 32) // 4
    q = t % 4
    row = 16 * warp + g
    # A by the accumulator layout: per 16 columns k, (row, 16k + 2q..) (row + 8, ..) (row, +8..) (row + 8, +8..)
    fa = dsl.vector(*[a[row + 8 * ((e // 2) % 2), 16 * (e // 8) + 2 * q + 8 * (e // 4 % 2) + e % 2]
                      for e in dsl.static_range(32)])
    acc = dsl.wgmma(dsl.zeros(dsl.f32, 64), fa, None, sb, (), b_major="n")
    acc = dsl.wgmma_wait(acc)
    for j in dsl.static_range(16):
        for e in dsl.static_range(4):
            d[row + 8 * (e // 2), 8 * j + 2 * q + e % 2] = acc[4 * j + e]


@dsl.jit
def run_wgmma_registers_n_major(a: Tensor[bf16, 2], b: Tensor[bf16, 2], d: Tensor[f32, 2]):
    wgmma_registers_n_major(a, dsl.tensor_map(b, box=(64, 64), swizzle=128), d).launch(grid=1, block=128)
