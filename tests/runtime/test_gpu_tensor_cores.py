"""Tensor cores on the GPU (marked gpu): warp MMA of every input type with the documented
fragment layouts, ldmatrix, cp.async, TMA boxes (2-D and 3-D, swizzled) and the two GEMM
examples, each against torch."""

from __future__ import annotations

import pytest

from tests.runtime import tensor_core_kernels as K

pytestmark = pytest.mark.gpu


def _hopper(torch):
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs a Hopper GPU (sm_90a)")


def test_mma_bf16_into_f32_follows_the_fragment_layout(torch):
    a = torch.randn(16, 16, device="cuda").bfloat16()
    b = torch.randn(16, 8, device="cuda").bfloat16()
    c = torch.randn(16, 8, device="cuda")
    d = torch.empty(16, 8, device="cuda")
    K.run_mma_bf16(a, b, c, d)
    torch.testing.assert_close(d, a.float() @ b.float() + c, rtol=1e-5, atol=1e-5)


def test_mma_f16_into_f16(torch):
    a = torch.randn(16, 16, device="cuda").half()
    b = torch.randn(16, 8, device="cuda").half()
    d = torch.empty(16, 8, device="cuda", dtype=torch.float16)
    K.run_mma_f16(a, b, d)
    torch.testing.assert_close(d.float(), a.float() @ b.float(), rtol=2e-3, atol=2e-2)


def test_mma_int8_is_exact(torch):
    a = torch.randint(-128, 128, (16, 32), device="cuda", dtype=torch.int8)
    b = torch.randint(-128, 128, (32, 8), device="cuda", dtype=torch.int8)
    d = torch.empty(16, 8, device="cuda", dtype=torch.int32)
    K.run_mma_i8(a, b, d)
    assert torch.equal(d.cpu().long(), a.cpu().long() @ b.cpu().long())  # CUDA has no integer matmul


def test_mma_fp8_into_f32(torch):
    a = (torch.randn(16, 32, device="cuda") * 4).to(torch.float8_e4m3fn)
    b = (torch.randn(32, 8, device="cuda") * 4).to(torch.float8_e4m3fn)
    d = torch.empty(16, 8, device="cuda")
    K.run_mma_fp8(a, b, d)
    torch.testing.assert_close(d, a.float() @ b.float(), rtol=1e-5, atol=1e-4)


def test_ldmatrix_delivers_the_documented_lanes(torch):
    x = torch.arange(256, device="cuda", dtype=torch.float32).reshape(16, 16).bfloat16()
    out = torch.empty(32, 8, device="cuda", dtype=torch.bfloat16)
    out_t = torch.empty(32, 8, device="cuda", dtype=torch.bfloat16)
    K.run_ldmatrix(x, out, out_t)
    host = x.float().cpu()
    # lanes 0-15 address rows 0-15 at column 0, lanes 16-31 at column 8: matrices are the
    # quarters (rows 0-7 | 8-15) x (columns 0-7 | 8-15), in that order
    quarters = [host[0:8, 0:8], host[8:16, 0:8], host[0:8, 8:16], host[8:16, 8:16]]
    for lane in range(32):
        r, col = lane // 4, 2 * (lane % 4)
        want = [v for m in quarters for v in (m[r, col], m[r, col + 1])]
        want_t = [v for m in quarters for v in (m[col, r], m[col + 1, r])]
        assert out[lane].float().cpu().tolist() == [float(v) for v in want], lane
        assert out_t[lane].float().cpu().tolist() == [float(v) for v in want_t], lane


def test_cp_async_copies_and_zero_fills_past_the_mask(torch):
    x = torch.randn(256, device="cuda")
    out = torch.full((256,), 7.0, device="cuda")
    K.run_cp_async(x, out, 40)
    assert torch.equal(out[:160], x[:160])
    assert torch.equal(out[160:], torch.zeros(96, device="cuda"))


def test_tma_3d_box_round_trip_and_the_swizzle_reads_as_the_plain_array(torch):
    _hopper(torch)
    x = torch.randn(4, 16, 64, device="cuda").bfloat16()
    y = torch.zeros_like(x)
    seen = torch.zeros(2, 8, 64, device="cuda", dtype=torch.bfloat16)
    K.run_tma_round_trip(x, y, seen, 2, 8)
    box = x[2:4, 8:16, :]
    assert torch.equal(seen, box)  # plain indexing of the 128-byte swizzled tile
    assert torch.equal(y[2:4, 8:16, :], box)  # TMA store of it
    y[2:4, 8:16, :] = 0
    assert not y.any()  # and nothing else


def test_tma_reductions_from_many_blocks_into_a_box_over_the_edge(torch):
    _hopper(torch)
    xf = torch.randint(-50, 50, (64, 32, 32), device="cuda").float()  # integers: exact in any order
    xi = torch.randint(-1000, 1000, (64, 32, 32), device="cuda", dtype=torch.int32)
    yf = torch.randint(-50, 50, (48, 40), device="cuda").float()
    yi = torch.randint(-1000, 1000, (48, 40), device="cuda", dtype=torch.int32)
    want_f, want_i = yf.clone(), yi.clone()
    want_f[24:, 16:] += xf.sum(0)[:24, :24]
    want_i[24:, 16:] = torch.maximum(yi[24:, 16:], xi.amax(0)[:24, :24])
    K.run_tma_reductions(xf, yf, xi, yi, 24, 16)
    assert torch.equal(yf, want_f)
    assert torch.equal(yi, want_i)


@pytest.mark.parametrize("shape", [(256, 256, 128), (512, 384, 96)])
def test_mma_sync_gemm_example_matches_torch(torch, shape):
    from matmul_mma import matmul_mma

    M, N, Kd = shape
    a = torch.randn(M, Kd, device="cuda").bfloat16()
    b_t = torch.randn(N, Kd, device="cuda").bfloat16()
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    matmul_mma(a, b_t, c)
    torch.testing.assert_close(c.float(), (a.float() @ b_t.float().T), rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize(("shape", "bn", "cluster"), [
    ((256, 512, 192), 256, 1), ((2048, 4096, 128), 256, 1), ((16, 512, 640), 64, 1), ((200, 256, 64), 256, 1),
    ((128, 192, 1024), 64, 1), ((2048, 4096, 128), 256, 2), ((384, 512, 256), 256, 2), ((16, 512, 640), 128, 2)])
def test_hopper_gemm_example_matches_torch(torch, shape, bn, cluster):
    _hopper(torch)
    from gemm_hopper import gemm_hopper

    # 2048 x 4096: 256 tiles, more than one per block; 16, 200 and 384 rows: partial tiles and
    # (with clusters of 2) a block whose tile row is past the end
    M, N, Kd = shape
    a = torch.randn(M, Kd, device="cuda").bfloat16()
    b_t = torch.randn(N, Kd, device="cuda").bfloat16()
    c = torch.full((M, N), 3.0, device="cuda", dtype=torch.bfloat16)
    gemm_hopper(a, b_t, c, bn, cluster)
    torch.testing.assert_close(c.float(), (a.float() @ b_t.float().T), rtol=1e-2, atol=5e-2)


def test_wgmma_with_a_in_registers_and_an_n_major_b(torch):
    _hopper(torch)
    a = torch.randn(64, 64, device="cuda").bfloat16()
    b = torch.randn(64, 128, device="cuda").bfloat16()
    d = torch.empty(64, 128, device="cuda")
    K.run_wgmma_registers_n_major(a, b, d)
    torch.testing.assert_close(d, a.float() @ b.float(), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_example_matches_sdpa(torch, head_dim, causal):
    _hopper(torch)
    import torch.nn.functional as F
    from attention_hopper import attention_hopper

    q, k, v = (torch.randn(6, 384, head_dim, device="cuda").bfloat16() for _ in range(3))
    o = torch.full_like(q, 5.0)
    attention_hopper(q, k, v, o, head_dim, causal)
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    torch.testing.assert_close(o.float(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize(("causal", "kv_heads", "consumers"), [(False, 6, 0), (True, 6, 1), (True, 2, 2)])
def test_attention_backward_example_matches_sdpa_backward(torch, head_dim, causal, kv_heads, consumers):
    """dq, dk, dv of `attention_backward` (from `attention_hopper_lse`'s o and lse) against the
    float32 SDPA backward of the same bf16 tensors; with 2 K/V heads for 6 query heads, GQA;
    both kernels (one warpgroup, two consumers) at both head dims, and the default choice."""
    _hopper(torch)
    import torch.nn.functional as F
    from attention_backward_hopper import attention_backward
    from attention_hopper import attention_hopper_lse

    q, do = (torch.randn(6, 384, head_dim, device="cuda").bfloat16() for _ in range(2))
    k, v = (torch.randn(kv_heads, 384, head_dim, device="cuda").bfloat16() for _ in range(2))
    o, lse = torch.empty_like(q), torch.empty(6, 384, device="cuda")
    attention_hopper_lse(q, k, v, o, lse, head_dim, causal)
    grads = [torch.full_like(t, 5.0) for t in (q, k, v)]
    delta, dq_acc = torch.empty_like(lse), torch.empty(6, 384, head_dim, device="cuda")
    attention_backward(q, k, v, o, do, lse, *grads, delta, dq_acc, head_dim, causal, consumers)
    leaves = [t.float()[None].requires_grad_() for t in (q, k, v)]
    F.scaled_dot_product_attention(*leaves, is_causal=causal, enable_gqa=True).backward(do.float()[None])
    for got, leaf in zip(grads, leaves):
        assert leaf.grad is not None
        torch.testing.assert_close(got.float(), leaf.grad[0], rtol=2e-2, atol=2e-2)
