"""`examples/gemm_small_m.py` in the interpreter: the swapped split-K GEMM at every padded M tile
(8 to 128 rows), with one split (c stored directly) and several (partials, tickets, the last block's
sum), at sizes no tile divides; `matmul`'s choice of kernel; the tickets left at zero for the next
call. Each result is within one bf16 rounding of the float64 product (tensor cores add in f32)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dsl
from dsl.interpreter import bits
from dsl.runtime import ArgumentError
from dsl.runtime.launch import _bf16_bits

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TABLE = [(4096, 4096), (14336, 4096), (4096, 14336), (28672, 8192), (8192, 28672), (128256, 4096)]


@pytest.fixture(scope="module")
def gsm(request) -> Any:
    """The example module, imported with examples/ on sys.path (it imports gemm_hopper by name) and
    registered while it runs (its dataclasses look their module up)."""
    name = "kdsl_example_gemm_small_m"
    sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / "gemm_small_m.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module

    def forget() -> None:
        sys.path.remove(str(EXAMPLES))
        sys.modules.pop(name, None)
        sys.modules.pop("gemm_hopper", None)

    request.addfinalizer(forget)
    spec.loader.exec_module(module)
    return module


def bf16_matrix(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    values = rng.standard_normal((rows, cols), dtype=np.float32)
    return np.array([_bf16_bits(float(v)) for v in values.reshape(-1)], dtype=np.uint16).reshape(rows, cols)


def as_float(raw: np.ndarray) -> np.ndarray:
    return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def run(gsm: Any, M: int, N: int, K: int, plan: Any = None, workspace: Any = None, seed: int = 11
        ) -> tuple[np.ndarray, Any]:
    """c = a @ b_t.T through `matmul`, c starting as NaN (so a missed element shows), checked."""
    rng = np.random.default_rng(seed)
    a, b_t = bf16_matrix(rng, M, K), bf16_matrix(rng, N, K)
    c = np.full((M, N), 0x7FC0, dtype=np.uint16)
    with dsl.interpret():
        ran = gsm.matmul(bits(a, dsl.bf16), bits(b_t, dsl.bf16), bits(c, dsl.bf16), plan=plan, workspace=workspace)
    expected = as_float(a) @ as_float(b_t).T
    got = as_float(c)
    excess = np.abs(got - expected) - (np.abs(expected) * 2.0**-8 + 1e-6)
    assert excess.max() <= 0, f"off by {np.abs(got - expected).max()} at {np.unravel_index(excess.argmax(), c.shape)}"
    return c, ran


@pytest.mark.parametrize(("M", "N", "K", "consumers", "splits"), [
    (1, 256, 256, 2, 1),  # MP = 8, one split: c stored from the accumulators
    (5, 200, 520, 2, 3),  # N and K past the tiles (TMA zeros), the last split shorter
    (16, 384, 1024, 2, 4),  # MP = 16, three N tiles of 128
    (24, 192, 256, 1, 2),  # MP = 32, one consumer: three N tiles of 64
    (40, 256, 320, 2, 5),  # MP = 64, one K tile per split
])
def test_the_swapped_kernel_at_each_padded_m(gsm, M, N, K, consumers, splits):
    plan = gsm.small_m_plan(M, N, K, sm_count=132, consumers=consumers, splits=splits)
    _, ran = run(gsm, M, N, K, plan)
    assert (ran.CONSUMERS, ran.splits) == (consumers, splits)


def test_four_consumers_and_two_m_tiles(gsm):
    """MP = 128 with 256-row B tiles; M = 150 takes two M tiles, the second mostly padding."""
    plan = gsm.small_m_plan(150, 256, 256, sm_count=132, mp=128, consumers=4, splits=2)
    _, ran = run(gsm, 150, 256, 256, plan)
    assert (ran.MP, ran.CONSUMERS, ran.splits) == (128, 4, 2)


def test_the_tickets_are_back_to_zero_and_a_second_call_gives_the_same_bits(gsm):
    M, N, K = 16, 256, 512
    plan = gsm.small_m_plan(M, N, K, sm_count=132, splits=4)
    ws = gsm.make_workspace(np.zeros(1), *plan.workspace_size(M, N, K))
    first, _ = run(gsm, M, N, K, plan, ws, seed=3)
    assert not ws.tickets.any()
    second, _ = run(gsm, M, N, K, plan, ws, seed=3)  # the sum runs in split order, whichever block is last
    assert np.array_equal(first, second)


def test_matmul_picks_the_persistent_kernel_where_its_tiles_fill_the_gpu(gsm):
    plan = gsm.plan_for(192, 256, 128, 2)  # 2 x 1 tiles of 128 x 256 fill a 2-SM GPU
    assert plan.variant == "hopper" and plan.BN == 256
    run(gsm, 192, 256, 128, plan)


def test_matmul_chooses_by_itself(gsm):
    _, ran = run(gsm, 3, 320, 384)
    assert ran.variant == "small_m" and ran.MP == 8


@pytest.mark.parametrize("M", [1, 16, 64, 128])
def test_the_decode_table_is_split_to_cover_an_h200(gsm, M):
    """Every (N, K) of the issue's table at decode M: the swapped kernel, with enough blocks for
    at least 80% of the H200's resident-block slots (132 SMs), or one split when the N tiles do."""
    for N, K in TABLE:
        plan = gsm.plan_for(M, N, K, 132)
        per, used = plan.k_split(K)
        tiles = -(-N // (64 * plan.CONSUMERS))
        assert plan.variant == "small_m" and used == plan.splits and per >= 4
        assert tiles * used >= 0.8 * 132 * plan.blocks_per_sm or used == 1
        assert max(8, M) == plan.MP


def test_large_m_keeps_the_persistent_kernel(gsm):
    assert {gsm.plan_for(8192, N, K, 132) for N, K in TABLE} == {gsm.Plan("hopper", BN=256)}


def test_a_workspace_too_small_for_the_split_is_refused(gsm):
    a, b_t, c = (np.zeros(shape, dtype=np.uint16) for shape in ((4, 256), (256, 256), (4, 256)))
    ws = gsm.make_workspace(c, 16, 1)
    with pytest.raises(ArgumentError, match="partials is too small"), dsl.interpret():
        gsm.gemm_small_m(bits(a, dsl.bf16), bits(b_t, dsl.bf16), bits(c, dsl.bf16), ws.partials, ws.tickets, 2,
                         MP=8)
