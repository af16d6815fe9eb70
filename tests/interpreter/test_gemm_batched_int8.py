"""`examples/gemm_batched.py` in the interpreter: c[b] = a[b] @ b_t[b].T against NumPy, each element
within one bf16 rounding of the float64 product (tensor cores add in f32). Covers both tile widths,
an M that leaves a partial last tile in every batch entry (its rows must neither spill into the
next entry nor be written), and a grid smaller than the work so each persistent block walks
tiles across batch entries with its pipeline ring carried over. `choose_bn`'s picks are pinned
for the benchmark's shapes.

`examples/gemm_int8_hopper.py` (wgmma s8 into i32) is exact against an int64 NumPy product, at an M
with a partial tile and at the M = 16 of decode (rows past M never written)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dsl
from dsl import Constexpr, Tensor, bf16
from dsl.interpreter import bits
from dsl.runtime.launch import _bf16_bits

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load_example(request: Any, stem: str) -> Any:
    """An example module, imported with examples/ on sys.path (it imports gemm_hopper by name) and
    registered while the tests run."""
    name = f"kdsl_example_{stem}"
    sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{stem}.py")
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


@pytest.fixture(scope="module")
def gb(request) -> Any:
    return load_example(request, "gemm_batched")


@pytest.fixture(scope="module")
def gi(request) -> Any:
    return load_example(request, "gemm_int8_hopper")


def bf16_array(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    values = rng.standard_normal(shape, dtype=np.float32)
    return np.array([_bf16_bits(float(v)) for v in values.reshape(-1)], dtype=np.uint16).reshape(shape)


def as_float(raw: np.ndarray) -> np.ndarray:
    return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def check(a: np.ndarray, b_t: np.ndarray, c: np.ndarray) -> None:
    """Every element of c within one bf16 rounding of the float64 batched product (NaN fails)."""
    expected = np.einsum("bmk,bnk->bmn", as_float(a), as_float(b_t))
    got = as_float(c)
    excess = np.abs(got - expected) - (np.abs(expected) * 2.0**-8 + 1e-6)
    assert not np.isnan(got).any(), f"unwritten elements at {np.argwhere(np.isnan(got))[:4].tolist()}"
    assert excess.max() <= 0, f"off by {np.abs(got - expected).max()} at {np.unravel_index(excess.argmax(), c.shape)}"


def operands(B: int, M: int, N: int, K: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """a, b_t and a c full of NaN bits (so a missed element shows)."""
    rng = np.random.default_rng(seed)
    return bf16_array(rng, (B, M, K)), bf16_array(rng, (B, N, K)), np.full((B, M, N), 0x7FC0, dtype=np.uint16)


@pytest.mark.parametrize(("B", "M", "N", "K", "BN"), [
    (2, 128, 256, 128, 256),  # one tile per entry, two K steps
    (3, 200, 256, 64, 128),  # two tile rows per entry, the second 72 rows: TMA clips at the entry's bound
])
def test_batched_matches_numpy(gb, B, M, N, K, BN):
    a, b_t, c = operands(B, M, N, K, seed=B * 7 + BN)
    dsl.interpret(gb.gemm_batched, bits(a, dsl.bf16), bits(b_t, dsl.bf16), bits(c, dsl.bf16), BN=BN)
    check(a, b_t, c)


def test_persistent_blocks_walk_tiles_across_batch_entries(gb):
    """Two blocks for 3 x 2 x 1 tiles (BN=128, K of 3 steps through a 6-stage ring): each block takes
    three tiles in two entries, and the ring's phases carry from tile to tile."""

    @dsl.jit
    def two_blocks(a: Tensor[bf16, 3], b_t: Tensor[bf16, 3], c: Tensor[bf16, 3], BN: Constexpr[int] = 128):
        batches, M, K = a.shape[0], a.shape[1], a.shape[2]
        N = b_t.shape[1]
        ta = dsl.tensor_map(a, box=(1, gb.BM, gb.BK), swizzle=128)
        tb = dsl.tensor_map(b_t, box=(1, BN, gb.BK), swizzle=128)
        tc = dsl.tensor_map(c, box=(1, 64, 64), swizzle=128)
        gb.gemm_batched_kernel(ta, tb, tc, batches, M, N, K, BN, gb.stages_for(BN)).launch(
            grid=2, block=gb.THREADS)

    a, b_t, c = operands(3, 256, 128, 192, seed=5)
    dsl.interpret(two_blocks, bits(a, dsl.bf16), bits(b_t, dsl.bf16), bits(c, dsl.bf16))
    check(a, b_t, c)


def test_batched_matmul_picks_the_width_and_refuses_bad_shapes(gb):
    a, b_t, c = operands(1, 64, 192, 64, seed=3)  # N = 192: only 64-wide tiles divide it
    with dsl.interpret():
        assert gb.batched_matmul(bits(a, dsl.bf16), bits(b_t, dsl.bf16), bits(c, dsl.bf16)) == 64
    check(a, b_t, c)
    with pytest.raises(dsl.runtime.ArgumentError, match="multiple of BN"):
        dsl.interpret(gb.gemm_batched, bits(a, dsl.bf16), bits(b_t, dsl.bf16), bits(c, dsl.bf16), BN=128)


@pytest.mark.parametrize(("B", "M", "N", "sms", "bn"), [
    (16, 1024, 1024, 132, 256),  # 512 tiles of 256: 97% of 4 waves
    (32, 512, 512, 132, 256),  # 256 tiles: 97% of 2 waves
    (8, 2048, 2048, 132, 256),
    (1, 256, 512, 132, 128),  # 4 tiles of 256 leave 128 SMs idle; 8 of 128 fewer
    (2, 128, 384, 132, 128),
])
def test_choose_bn(gb, B, M, N, sms, bn):
    assert gb.choose_bn(B, M, N, sms) == bn


def test_choose_bn_needs_n_in_64s(gb):
    with pytest.raises(ValueError, match="multiple of 64"):
        gb.choose_bn(1, 128, 100, 132)


@pytest.mark.parametrize(("M", "N", "K"), [
    (200, 256, 256),  # two tile rows, the second 72 rows; two K tiles of 128
    (16, 512, 128),  # decode's M: one tile row of zeros below row 16, two N tiles
])
def test_int8_wgmma_is_exact(gi, M, N, K):
    rng = np.random.default_rng(M + N)
    a = rng.integers(-128, 128, (M, K), dtype=np.int8)
    b_t = rng.integers(-128, 128, (N, K), dtype=np.int8)
    c = np.full((M, N), 12345, dtype=np.int32)  # an element left at 12345 shows
    dsl.interpret(gi.gemm_int8_hopper, bits(a, dsl.i8), bits(b_t, dsl.i8), bits(c, dsl.i32))
    expected = a.astype(np.int64) @ b_t.astype(np.int64).T
    assert np.array_equal(c, expected), f"{int((c != expected).sum())} mismatches"
