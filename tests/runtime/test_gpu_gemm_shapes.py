"""`examples/gemm_small_m.py`'s `matmul` on the GPU (marked gpu, Hopper only) against torch: rows of
the decode shape table with the kernel it picks, every swapped variant forced, sizes no tile divides,
and a workspace that stays usable from call to call (eagerly and replayed in a CUDA graph)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu


@pytest.fixture
def hopper(torch):
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs a Hopper GPU (sm_90a)")
    return torch


def operands(torch, M: int, N: int, K: int):
    a = torch.randn(M, K, device="cuda").bfloat16()
    b_t = torch.randn(N, K, device="cuda").bfloat16()
    c = torch.full((M, N), 7.0, device="cuda", dtype=torch.bfloat16)  # nothing may be left at 7
    return a, b_t, c


def check(torch, a, b_t, c) -> None:
    torch.testing.assert_close(c.float(), a.float() @ b_t.float().T, rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize(("M", "N", "K"), [
    (1, 4096, 4096), (16, 14336, 4096), (64, 4096, 14336), (128, 8192, 28672), (16, 128256, 4096),
    (1, 28672, 8192), (8192, 4096, 4096)])
def test_table_rows_match_torch(hopper, M, N, K):
    from gemm_small_m import matmul

    a, b_t, c = operands(hopper, M, N, K)
    plan = matmul(a, b_t, c)
    assert plan.variant == ("hopper" if M > 128 else "small_m")
    check(hopper, a, b_t, c)


@pytest.mark.parametrize(("M", "N", "K", "mp", "consumers", "splits"), [
    (1, 1000, 776, 8, 2, 3), (13, 4096, 4096, 16, 2, 8), (31, 2048, 1024, 32, 1, 4), (64, 640, 8192, 64, 2, 16),
    (100, 4096, 2048, 128, 4, 2), (128, 2048, 4096, 128, 2, 1)])
def test_every_variant_matches_torch(hopper, M, N, K, mp, consumers, splits):
    from gemm_small_m import matmul, small_m_plan

    a, b_t, c = operands(hopper, M, N, K)
    plan = small_m_plan(M, N, K, 132, mp=mp, consumers=consumers, splits=splits)
    matmul(a, b_t, c, plan=plan)
    check(hopper, a, b_t, c)


def test_m_past_one_tile_with_ragged_n_and_k(hopper):
    """200 rows are two M tiles of the swapped kernel (too few 128 x BN tiles for the persistent
    one); N and K are no multiples of the tiles."""
    from gemm_small_m import matmul

    a, b_t, c = operands(hopper, 200, 4000, 1032)
    assert matmul(a, b_t, c).variant == "small_m"
    check(hopper, a, b_t, c)


def test_repeated_calls_give_the_same_bits_and_leave_the_tickets_at_zero(hopper):
    import gemm_small_m as g

    a, b_t, c = operands(hopper, 16, 4096, 4096)
    plan = g.plan_for(16, 4096, 4096, g.sm_count_of(a))
    assert plan.splits > 1
    ws = g.make_workspace(c, *plan.workspace_size(16, 4096, 4096))
    g.matmul(a, b_t, c, workspace=ws)
    first = c.clone()
    for _ in range(5):
        g.matmul(a, b_t, c, workspace=ws)
        assert hopper.equal(c, first)
    assert not ws.tickets.any()
    check(hopper, a, b_t, c)


def test_a_cuda_graph_replays_the_split(hopper):
    from gemm_small_m import matmul

    a, b_t, c = operands(hopper, 1, 8192, 8192)
    matmul(a, b_t, c)  # compiled and the workspace made before capture
    graph = hopper.cuda.CUDAGraph()
    with hopper.cuda.graph(graph):
        matmul(a, b_t, c)
    for _ in range(3):
        c.fill_(7.0)
        a.copy_(hopper.randn_like(a, dtype=hopper.float32).bfloat16())
        graph.replay()
        hopper.cuda.synchronize()
        check(hopper, a, b_t, c)
