"""`examples/gemm_batched.py` on the GPU (marked gpu, Hopper only) against torch.bmm: the benchmark's
shapes with the width `batched_matmul` picks, each width forced, an M with a partial last tile per
batch entry (its rows must not reach the next entry), and a c whose every element is written.
`examples/gemm_int8_hopper.py` against torch._int_mm, exactly, at the benchmark's shapes."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu


@pytest.fixture
def hopper(torch):
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs a Hopper GPU (sm_90a)")
    return torch


def operands(torch, B: int, M: int, N: int, K: int):
    a = torch.randn(B, M, K, device="cuda").bfloat16()
    b_t = torch.randn(B, N, K, device="cuda").bfloat16()
    c = torch.full((B, M, N), 7.0, device="cuda", dtype=torch.bfloat16)  # nothing may be left at 7
    return a, b_t, c


def check(torch, a, b_t, c) -> None:
    expected = torch.bmm(a.float(), b_t.float().transpose(1, 2))
    torch.testing.assert_close(c.float(), expected, rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize(("B", "M", "N", "K"), [(16, 1024, 1024, 1024), (32, 512, 512, 4096), (8, 2048, 2048, 2048)])
def test_benchmark_shapes_match_torch_bmm(hopper, B, M, N, K):
    from gemm_batched import batched_matmul

    a, b_t, c = operands(hopper, B, M, N, K)
    batched_matmul(a, b_t, c)
    check(hopper, a, b_t, c)


@pytest.mark.parametrize("BN", [64, 128, 256])
def test_every_width_matches_torch_bmm(hopper, BN):
    from gemm_batched import batched_matmul

    a, b_t, c = operands(hopper, 5, 384, 512, 640)
    assert batched_matmul(a, b_t, c, BN=BN) == BN
    check(hopper, a, b_t, c)


def test_partial_m_tiles_stay_in_their_batch_entry(hopper):
    """M = 200: each entry's second tile row has 72 rows; the stores past them are clipped at the
    entry's bound, so the next entry's first rows keep their own products."""
    from gemm_batched import batched_matmul

    a, b_t, c = operands(hopper, 7, 200, 256, 192)
    batched_matmul(a, b_t, c)
    check(hopper, a, b_t, c)


def test_many_tiles_per_block(hopper):
    """64 entries of 4 x 2 tiles: every persistent block takes about four, across entries."""
    from gemm_batched import batched_matmul

    a, b_t, c = operands(hopper, 64, 512, 512, 256)
    batched_matmul(a, b_t, c, BN=256)
    check(hopper, a, b_t, c)


@pytest.mark.parametrize(("M", "N", "K"), [(4096, 4096, 4096), (16, 4096, 4096), (200, 512, 384)])
def test_int8_matches_torch_int_mm(hopper, M, N, K):
    from gemm_int8_hopper import gemm_int8_hopper

    a = hopper.randint(-128, 128, (M, K), device="cuda", dtype=hopper.int8)
    b_t = hopper.randint(-128, 128, (N, K), device="cuda", dtype=hopper.int8)
    c = hopper.full((M, N), 12345, device="cuda", dtype=hopper.int32)
    gemm_int8_hopper(a, b_t, c)
    expected = (a.double() @ b_t.T.double()).to(hopper.int32)  # exact: every sum is below 2**53
    assert hopper.equal(c, expected)
    if M > 16:  # torch._int_mm refuses M <= 16 on some versions
        assert hopper.equal(c, hopper._int_mm(a, b_t.T))
