"""int8 tensor cores and reinterpreting views on the GPU (marked gpu), against torch: the int8
GEMM example (cp.async, ldmatrix of 8-bit tiles, mma.sync m16n8k32), views of tensors and
shared arrays moving the same bytes, and ldmatrix of 8-bit rows giving the m16n8k32 A fragment."""

from __future__ import annotations

import pytest

import dsl
from dsl import Tensor, i8, i16

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("shape", [(128, 128, 64), (256, 384, 320), (512, 256, 1024)])
def test_int8_gemm_example_is_exact(torch, shape):
    from matmul_int8_mma import matmul_int8_mma

    M, N, K = shape
    a = torch.randint(-128, 128, (M, K), device="cuda", dtype=torch.int8)
    b_t = torch.randint(-128, 128, (N, K), device="cuda", dtype=torch.int8)
    c = torch.full((M, N), 7, device="cuda", dtype=torch.int32)
    matmul_int8_mma(a, b_t, c)
    assert torch.equal(c.cpu().long(), a.cpu().long() @ b_t.cpu().long().T)  # CUDA has no integer matmul


@dsl.kernel
def copy_through_views(x: Tensor[i8, 2], y: Tensor[i8, 2]):
    """Row r of `x` read as i32 words, written as i16 halves of `y`, through a shared i8 row
    written as i32 and read as i16."""
    smem = dsl.SharedAllocator()
    row = smem.array(i8, (1, 256))
    r = dsl.block_idx.x
    t = dsl.thread_idx.x
    words = x.view(dsl.i32)
    row.view(dsl.i32)[0, t] = words[r, t]
    dsl.barrier()
    halves = row.view(i16)
    out = y.view(i16)
    out[r, 2 * t] = halves[0, 2 * t]
    out[r, 2 * t + 1] = halves[0, 2 * t + 1]


@dsl.jit
def run_copy_through_views(x: Tensor[i8, 2], y: Tensor[i8, 2]):
    copy_through_views(x, y).launch(grid=x.shape[0], block=64)


def test_views_move_the_same_bytes(torch):
    x = torch.randint(-128, 128, (5, 320), device="cuda", dtype=torch.int8)[:, :256]  # rows 320 bytes apart
    y = torch.zeros(5, 256, device="cuda", dtype=torch.int8)
    run_copy_through_views(x, y)
    assert torch.equal(y, x)


@dsl.kernel
def load_i8_fragment(x: Tensor[i8, 2], out: Tensor[i8, 2]):
    tile = dsl.SharedAllocator().array(i8, (16, 32))
    lane = dsl.thread_idx.x
    dsl.cp_async(tile, (lane // 2, (lane % 2) * 16), x, (lane // 2, (lane % 2) * 16))
    dsl.cp_async_commit()
    dsl.cp_async_wait(0)
    dsl.barrier()
    out.vstore((lane, 0), dsl.ldmatrix(tile, (lane % 16, (lane // 16) * 16)))


@dsl.jit
def run_load_i8_fragment(x: Tensor[i8, 2], out: Tensor[i8, 2]):
    load_i8_fragment(x, out).launch(grid=1, block=32)


def test_ldmatrix_of_8_bit_rows_is_the_m16n8k32_a_fragment(torch):
    """Lane (g, q) holds A[g + 8 ((j // 4) % 2), 4 q + 16 (j // 8) + j % 4] in lane j."""
    x = torch.randint(-128, 128, (16, 32), device="cuda", dtype=torch.int8)
    out = torch.zeros(32, 16, device="cuda", dtype=torch.int8)
    run_load_i8_fragment(x, out)
    lane = torch.arange(32)[:, None]
    j = torch.arange(16)[None, :]
    rows, cols = lane // 4 + 8 * ((j // 4) % 2), 4 * (lane % 4) + 16 * (j // 8) + j % 4
    assert torch.equal(out.cpu(), x.cpu()[rows, cols])
