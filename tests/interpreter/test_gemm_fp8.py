"""`examples/gemm_fp8.py` in the interpreter: d = (a @ b_t.T) * scale_a * scale_b on fp8 e4m3 / e5m2
operands, per-tensor and per-row / per-column scales, bf16 and f32 results, through both kernels:
the persistent 128 x BN one (a partial last tile in M, N and K; a grid smaller than the tiles, so a
block carries its ring from tile to tile) and the swapped split-K one (one split, several, and the
tickets left at zero). `scaled_mm`'s choices are pinned for the benchmark's shapes.

The example's kernels size their shared tiles by the tensor maps they are given (`ta.dtype`,
`ta.box`: compile-time facts of a map in a kernel); `tile_of` checks those facts on their own.

The reference decodes the fp8 bytes from the formats' definitions (e4m3: bias 7, no infinities;
e5m2: bias 15) and multiplies in float64. The kernels add the exact fp8 products in f32 (the
interpreter rounds each k32 step's sum to f32, as a wgmma's accumulator holds it; each split's
partial is another f32 rounding), scale in f32 and round once to the output type, so each element
is within one rounding of the output type of the exact value, plus the f32 roundings of a sum
bounded by sum |a_k b_k| times the scales. Operands drawn from every finite fp8 code make the
products span the whole range, so a misplaced or dropped product shows. Where every sum is an
integer of a few bits (elements -1, 0, 1) accumulation is exact, and the result must equal the
epilogue's own f32 arithmetic, (acc * scale_a) * scale_b, rounded to bf16: bit for bit.
"""

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

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
KINDS = {"e4m3": dsl.f8e4m3, "e5m2": dsl.f8e5m2}


@dsl.kernel(target="sm_90a")
def tile_of(ta: dsl.TensorMap, out: dsl.Tensor[dsl.f32, 1]):
    """One TMA box into a shared tile shaped and typed by the map; element (2, 3) of it, and the facts."""
    smem = dsl.SharedAllocator(dynamic=True)
    tile = smem.array(ta.dtype, ta.box, swizzle=128)
    bar = smem.array(dsl.u64, (1,))
    if dsl.thread_idx.x == 0:
        dsl.mbarrier_init(bar, 0, 1)
        dsl.fence_mbarrier_init()
        dsl.mbarrier_expect_tx(bar, 0, ta.box[0] * ta.box[1])  # one byte per fp8 element
        dsl.tma_load(tile, (), ta, (1, 0), bar, 0)
        dsl.mbarrier_wait(bar, 0, 0)
        out[0] = dsl.cast(tile[2, 3], dsl.f32)
        out[1] = 1000.0 * ta.box[0] + ta.box[1] + (0.5 if ta.dtype == dsl.f8e5m2 else 0.0)


@dsl.jit
def run_tile_of(x: dsl.Tensor, out: dsl.Tensor[dsl.f32, 1]):
    tile_of(dsl.tensor_map(x, box=(16, 128), swizzle=128), out).launch(grid=1, block=32)


@pytest.fixture(scope="module")
def g8(request) -> Any:
    """The example module, imported with examples/ on sys.path (it imports gemm_hopper, gemm_int8_hopper and
    gemm_small_m by name) and registered while the tests run (its dataclasses look their module up)."""
    name = "kdsl_example_gemm_fp8"
    sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / "gemm_fp8.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module

    def forget() -> None:
        sys.path.remove(str(EXAMPLES))
        for stem in (name, "gemm_hopper", "gemm_int8_hopper", "gemm_small_m"):
            sys.modules.pop(stem, None)

    request.addfinalizer(forget)
    spec.loader.exec_module(module)
    return module


def decode(raw: np.ndarray, kind: str) -> np.ndarray:
    """fp8 bytes as float64, from the format's definition (subnormals at exponent 0)."""
    exp_bits, bias = (4, 7) if kind == "e4m3" else (5, 15)
    man_bits = 7 - exp_bits
    raw = raw.astype(np.int64)
    sign = np.where(raw >> 7, -1.0, 1.0)
    exponent = (raw >> man_bits) & ((1 << exp_bits) - 1)
    mantissa = (raw & ((1 << man_bits) - 1)) / (1 << man_bits)
    return sign * np.where(exponent == 0, np.ldexp(mantissa, 1 - bias), np.ldexp(1.0 + mantissa, exponent - bias))


def any_finite(rng: np.random.Generator, kind: str, shape: tuple[int, int]) -> np.ndarray:
    """Random bytes over every finite code (NaNs and infinities moved to a smaller exponent)."""
    raw = rng.integers(0, 256, shape).astype(np.uint8)
    bad = (raw & 0x7F) == 0x7F if kind == "e4m3" else (raw & 0x7C) == 0x7C
    raw[bad] &= 0xF0
    return raw


def unit_values(rng: np.random.Generator, kind: str, shape: tuple[int, int]) -> np.ndarray:
    """Elements -1, 0 and 1 (the same codes' meaning differs by format: encoded per kind)."""
    one = 0x38 if kind == "e4m3" else 0x3C
    codes = np.array([0xFF & (one | 0x80), 0, one], dtype=np.uint8)
    return codes[rng.integers(0, 3, shape)]


def bf16_round(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to bf16 (to nearest, ties to even), as float64."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


class Case:
    """One product: operands, scales and a d full of NaN (so an element left unwritten shows)."""

    def __init__(self, M: int, N: int, K: int, kinds: tuple[str, str], rowwise: bool, out: str, seed: int,
                 values: Any = any_finite):
        rng = np.random.default_rng(seed)
        self.M, self.N, self.K, self.kinds, self.rowwise, self.out = M, N, K, kinds, rowwise, out
        self.a, self.b_t = values(rng, kinds[0], (M, K)), values(rng, kinds[1], (N, K))
        # scales of a few binades: small enough that e5m2's 57344^2 * K stays finite in f32
        self.scale_a = np.exp2(rng.uniform(-6, 0, M if rowwise else 1)).astype(np.float32)
        self.scale_b = np.exp2(rng.uniform(-12, -6, N if rowwise else 1)).astype(np.float32)
        self.d = np.full((M, N), 0x7FC0, np.uint16) if out == "bf16" else np.full((M, N), np.nan, np.float32)

    def args(self) -> tuple[Any, ...]:
        d = bits(self.d, dsl.bf16) if self.out == "bf16" else self.d
        return (bits(self.a, KINDS[self.kinds[0]]), bits(self.b_t, KINDS[self.kinds[1]]), self.scale_a, self.scale_b,
                d)

    def got(self) -> np.ndarray:
        if self.out == "bf16":
            return (self.d.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        return self.d.astype(np.float64)

    def scales(self) -> np.ndarray:
        return self.scale_a.astype(np.float64).reshape(-1, 1) * self.scale_b.astype(np.float64).reshape(1, -1)

    def check(self, splits: int = 1) -> None:
        """Each element within one output rounding of the exact value plus the f32 accumulation bound."""
        a, b = decode(self.a, self.kinds[0]), decode(self.b_t, self.kinds[1])
        exact = (a @ b.T) * self.scales()
        magnitude = (np.abs(a) @ np.abs(b).T) * self.scales()
        roundings = self.K // 32 + 1 + splits + 2  # k32 steps, the partial step, split sums, two scale products
        bound = roundings * 2.0**-24 * magnitude
        got = self.got()
        assert not np.isnan(got).any(), f"unwritten or NaN elements at {np.argwhere(np.isnan(got))[:4].tolist()}"
        unit = 2.0**-8 if self.out == "bf16" else 2.0**-24  # half an ulp, relative
        excess = np.abs(got - exact) - (unit * (np.abs(exact) + bound) + bound)
        where = np.unravel_index(excess.argmax(), got.shape)
        assert excess.max() <= 0, f"off by {np.abs(got - exact)[where]} at {where} (exact {exact[where]})"

    def check_bits(self) -> None:
        """Exact sums: d is bf16((f32(acc) * scale_a) * scale_b), bit for bit (per tensor: acc * (sa * sb))."""
        acc = (decode(self.a, self.kinds[0]) @ decode(self.b_t, self.kinds[1]).T).astype(np.float32)
        if self.rowwise:
            expected = (acc * self.scale_a.reshape(-1, 1)) * self.scale_b.reshape(1, -1)
        else:
            expected = acc * (self.scale_a[0] * self.scale_b[0])
        assert np.array_equal(self.got(), bf16_round(expected))


@pytest.mark.parametrize("kind", ["e4m3", "e5m2"])
def test_a_kernel_shapes_and_types_its_tiles_by_the_tensor_map(kind):
    x = any_finite(np.random.default_rng(2), kind, (32, 128))
    out = np.zeros(2, np.float32)
    dsl.interpret(run_tile_of, bits(x, KINDS[kind]), out)
    assert out[0] == decode(x[3, 3:4], kind)[0]  # box row 2 is tensor row 3: the box starts at row 1
    assert out[1] == 16128.0 + (0.5 if kind == "e5m2" else 0.0)


def hopper_plan(g8: Any, BN: int) -> Any:
    return g8.Fp8Plan("hopper", BN=BN)


@pytest.mark.parametrize(("M", "N", "K", "kinds", "rowwise", "out", "BN"), [
    (192, 256, 256, ("e4m3", "e4m3"), False, "bf16", 256),  # the second tile row half outside a and d; two K tiles
    (100, 176, 208, ("e4m3", "e5m2"), True, "f32", 128),  # N past one 128 tile, K past one 128 K tile
])
def test_persistent_kernel_matches_the_exact_product(g8, M, N, K, kinds, rowwise, out, BN):
    case = Case(M, N, K, kinds, rowwise, out, seed=M + N)
    with dsl.interpret():
        g8.scaled_mm(*case.args(), plan=hopper_plan(g8, BN))
    case.check()


def test_persistent_blocks_carry_the_ring_across_tiles_and_sums_are_bit_exact(g8):
    """Two blocks for 2 x 2 tiles of BN = 128 (two K tiles each through the 7-stage ring, so its phases
    wrap from tile to tile), e5m2 x e4m3, per-row scales; unit elements make every sum exact."""

    @dsl.jit
    def two_blocks(a: dsl.Tensor, b_t: dsl.Tensor, scale_a: dsl.Tensor[dsl.f32, 1], scale_b: dsl.Tensor[dsl.f32, 1],
                   d: dsl.Tensor):
        M, K = a.shape[0], a.shape[1]
        N = b_t.shape[0]
        ta = dsl.tensor_map(a, box=(g8.BM, g8.BK), swizzle=128)
        tb = dsl.tensor_map(b_t, box=(128, g8.BK), swizzle=128)
        g8.gemm_fp8_kernel(ta, tb, d, scale_a, scale_b, M, N, K, 128, g8.stages_for(128), True).launch(
            grid=2, block=g8.THREADS)

    case = Case(256, 256, 256, ("e5m2", "e4m3"), True, "bf16", seed=3, values=unit_values)
    dsl.interpret(two_blocks, *case.args())
    case.check_bits()


@pytest.mark.parametrize(("M", "N", "K", "kinds", "rowwise", "out", "splits"), [
    (5, 200, 400, ("e4m3", "e5m2"), True, "bf16", 1),  # MP = 8, one split: d stored from the accumulators
    (40, 300, 1040, ("e4m3", "e4m3"), False, "f32", 3),  # MP = 64: partials, tickets, the last split shorter
])
def test_swapped_split_k_kernel_matches_the_exact_product(g8, M, N, K, kinds, rowwise, out, splits):
    case = Case(M, N, K, kinds, rowwise, out, seed=M * 3 + splits)
    plan = g8.small_m_plan(M, N, K, sm_count=132, splits=splits)
    ws = g8.Workspace(*(np.zeros(max(n, 4), dtype=t) for n, t in zip(plan.workspace_size(M, N, K),
                                                                        (np.float32, np.int32))))
    with dsl.interpret():
        ran = g8.scaled_mm(*case.args(), plan=plan, workspace=ws)
    assert (ran.variant, ran.splits, plan.k_split(K)[1]) == ("small_m", splits, splits)
    case.check(splits)
    assert not ws.tickets.any()  # each ticket put back for the next call


def test_swapped_kernel_sums_are_bit_exact(g8):
    """Per-row scales on the swapped kernel (d^T's lanes: scale_b by lane row, scale_a by lane column)."""
    case = Case(24, 192, 256, ("e4m3", "e4m3"), True, "bf16", seed=9, values=unit_values)
    with dsl.interpret():
        assert g8.scaled_mm(*case.args()).variant == "small_m"
    case.check_bits()


@pytest.mark.parametrize(("M", "N", "K", "sms", "describe"), [
    (8192, 8192, 8192, 132, "gemm_fp8 BN=256"),
    (8192, 4096, 4096, 132, "gemm_fp8 BN=256"),
    (8192, 128256, 4096, 132, "gemm_fp8 BN=256"),
    (1000, 256, 4096, 16, "gemm_fp8 BN=128"),  # 8 tiles of 256 leave half of 16 SMs idle, 16 of 128 fill them
    (1000, 256, 4096, 132, "gemm_fp8_small_m MP=128 CONSUMERS=4 STAGES=4 splits=8 (1 per SM)"),
    (128, 4096, 4096, 132, "gemm_fp8_small_m MP=128 CONSUMERS=4 STAGES=4 splits=8 (1 per SM)"),
    (16, 4096, 4096, 132, "gemm_fp8_small_m MP=16 CONSUMERS=2 STAGES=6 splits=8 (2 per SM)"),
    (1, 28672, 8192, 132, "gemm_fp8_small_m MP=8 CONSUMERS=2 STAGES=6 splits=1 (2 per SM)"),
])
def test_the_kernel_each_shape_gets(g8, M, N, K, sms, describe):
    assert g8.plan_for(M, N, K, sms).describe() == describe


def test_what_the_entry_points_refuse(g8):
    case = Case(64, 128, 128, ("e4m3", "e4m3"), False, "bf16", seed=1)
    a, b_t, sa, sb, d = case.args()
    with pytest.raises(ValueError, match="one element each"):
        g8.scaled_mm(a, b_t, np.ones(64, np.float32), sb, d)
    with pytest.raises(ArgumentError, match="ROWWISE: scale_a has M elements"):
        dsl.interpret(g8.gemm_fp8, a, b_t, sa, sb, d, ROWWISE=True)
    with pytest.raises(ArgumentError, match="multiple of 16"):
        dsl.interpret(g8.gemm_fp8, bits(case.a[:, :120], dsl.f8e4m3), bits(case.b_t[:, :120], dsl.f8e4m3), sa, sb, d)
    with pytest.raises(dsl.CompileError, match="a and b_t must be float8"):
        dsl.interpret(g8.gemm_fp8, bits(case.a, dsl.i8), b_t, sa, sb, d)
    with pytest.raises(dsl.CompileError, match="d must be bf16 or f32"):
        dsl.interpret(g8.gemm_fp8, a, b_t, sa, sb, np.zeros((64, 128), np.float16))
