"""`examples/gemm_fp8.py`'s `scaled_mm` on the GPU (marked gpu, Hopper only) against the exact product and
`torch._scaled_mm` (cuBLASLt), at 8192^3, at decode's M = 16 and 1 (the swapped split-K kernel) and at
sizes no tile divides, per-tensor and per-row / per-column scales, e4m3 and e5m2, bf16 and f32 results.

Two kinds of operands:
- Elements -1, 0 and 1: every partial sum is an integer below 2^14, exact in the tensor cores'
  accumulator however it rounds, so the result must be the epilogue's f32 arithmetic rounded once:
  bf16((f32(acc) * scale_a) * scale_b) (per tensor: acc * (scale_a * scale_b)), bit for bit; and
  torch._scaled_mm within one bf16 ulp (its epilogue may multiply in another order).
- Normal values quantized to fp8: Hopper's fp8 wgmma keeps about 13 bits of mantissa in its
  additions (truncating), which is what cuBLASLt's `use_fast_accum=True` runs too; a float64 model
  of that gives 0.4% (K = 4096) and 0.7% (K = 8192) relative Frobenius error, far beyond bf16's
  rounding. So the error against the exact product is held to torch's own fast-accumulation error
  (at most twice it, plus 1% for bf16 rounding and another order of the sums), and under 5% in any
  case: a K tile dropped from 8192 alone is 12%, a wrong scale or tile 100% or more.
d starts as NaN, so an element left unwritten fails every comparison."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu


@pytest.fixture
def hopper(torch):
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs a Hopper GPU (sm_90a)")
    return torch


def fp8(torch, name: str):
    return {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}[name]


def operands(torch, M: int, N: int, K: int, kinds: tuple[str, str], rowwise: bool, out: str, unit: bool):
    """a, b_t, scale_a, scale_b and a NaN-filled d."""
    def values(rows: int, cols: int, kind: str):
        if unit:
            return torch.randint(-1, 2, (rows, cols), device="cuda").float().to(fp8(torch, kind))
        return torch.randn(rows, cols, device="cuda").to(fp8(torch, kind))

    a, b_t = values(M, K, kinds[0]), values(N, K, kinds[1])
    if rowwise:
        scale_a = torch.rand(M, device="cuda") + 0.5
        scale_b = (torch.rand(N, device="cuda") + 0.5) / 64
    else:
        scale_a, scale_b = torch.tensor([0.3712], device="cuda"), torch.tensor([0.01953], device="cuda")
    d = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16 if out == "bf16" else torch.float32)
    return a, b_t, scale_a, scale_b, d


def exact(torch, a, b_t, scale_a, scale_b):
    """The scaled product in float64 from the fp8 values (every product and sum exact at these sizes)."""
    product = a.float().double() @ b_t.float().double().T
    return product * scale_a.double().view(-1, 1) * scale_b.double().view(1, -1)


def epilogue(torch, a, b_t, scale_a, scale_b, rowwise: bool, dtype):
    """What the kernel's epilogue makes of an exact accumulator, in its order of f32 products."""
    acc = (a.float().double() @ b_t.float().double().T).float()
    if rowwise:
        return ((acc * scale_a.view(-1, 1)) * scale_b.view(1, -1)).to(dtype)
    return (acc * (scale_a * scale_b)).to(dtype)


def torch_scaled_mm(torch, a, b_t, scale_a, scale_b, rowwise: bool, fast: bool = True):
    """torch._scaled_mm with B column-major (b_t.t() of the row-major N x K) and bf16 out."""
    if rowwise:
        scale_a, scale_b = scale_a.view(-1, 1), scale_b.view(1, -1)
    return torch._scaled_mm(a, b_t.t(), scale_a, scale_b, out_dtype=torch.bfloat16, use_fast_accum=fast)


def relative(torch, got, ref) -> float:
    g, r = got.double(), ref.double()
    return float((g - r).norm() / r.norm())


UNIT_CASES = [
    # M, N, K, kinds, rowwise, out, variant, also against torch._scaled_mm (8192^3 and decode's M = 16)
    (8192, 8192, 8192, ("e4m3", "e4m3"), False, "bf16", "hopper", True),
    (4096, 4096, 4096, ("e5m2", "e4m3"), True, "f32", "hopper", False),
    (16, 4096, 4096, ("e4m3", "e4m3"), True, "bf16", "small_m", True),
    (1, 14336, 4096, ("e4m3", "e5m2"), False, "bf16", "small_m", False),
    (200, 4000, 1040, ("e4m3", "e4m3"), True, "bf16", "small_m", False),
]


@pytest.mark.parametrize(("M", "N", "K", "kinds", "rowwise", "out", "variant", "compare"), UNIT_CASES)
def test_exact_sums_give_the_epilogues_bits(hopper, M, N, K, kinds, rowwise, out, variant, compare):
    from gemm_fp8 import scaled_mm

    a, b_t, scale_a, scale_b, d = operands(hopper, M, N, K, kinds, rowwise, out, unit=True)
    plan = scaled_mm(a, b_t, scale_a, scale_b, d)
    assert plan.variant == variant
    expected = epilogue(hopper, a, b_t, scale_a, scale_b, rowwise, d.dtype)
    assert hopper.equal(d, expected), f"{int((d != expected).sum())} elements differ"
    if compare:
        ref = torch_scaled_mm(hopper, a, b_t, scale_a, scale_b, rowwise).float()
        unit = 2.0**-7 * float(scale_a.min() * scale_b.min())  # under any sum of 1 x the scales: no wrong sum
        assert ((d.float() - ref).abs() <= ref.abs() * 2.0**-7 + unit).all()  # within one bf16 ulp


def test_ragged_sizes_on_the_persistent_kernel(hopper):
    """M, N and K no multiples of the 128 x 256 x 128 tiles, forced onto the persistent kernel: TMA
    reads zeros past each edge, the stores skip rows past M and columns past N."""
    from gemm_fp8 import Fp8Plan, scaled_mm

    a, b_t, scale_a, scale_b, d = operands(hopper, 1000, 4000, 1040, ("e4m3", "e5m2"), True, "bf16", unit=True)
    scaled_mm(a, b_t, scale_a, scale_b, d, plan=Fp8Plan("hopper", BN=256))
    assert hopper.equal(d, epilogue(hopper, a, b_t, scale_a, scale_b, True, d.dtype))
    scaled_mm(a, b_t, scale_a, scale_b, d, plan=Fp8Plan("hopper", BN=128))
    assert hopper.equal(d, epilogue(hopper, a, b_t, scale_a, scale_b, True, d.dtype))


@pytest.mark.parametrize(("M", "N", "K", "kinds", "rowwise"), [
    (8192, 8192, 8192, ("e4m3", "e4m3"), False),
    (8192, 8192, 8192, ("e4m3", "e4m3"), True),
    (16, 4096, 4096, ("e4m3", "e4m3"), True),
    (128, 4096, 4096, ("e4m3", "e5m2"), False),
])
def test_normal_values_are_as_close_as_cublaslt_fast_accumulation(hopper, M, N, K, kinds, rowwise):
    from gemm_fp8 import scaled_mm

    a, b_t, scale_a, scale_b, d = operands(hopper, M, N, K, kinds, rowwise, "bf16", unit=False)
    scaled_mm(a, b_t, scale_a, scale_b, d)
    assert not d.isnan().any()
    ref = exact(hopper, a, b_t, scale_a, scale_b)
    ours = relative(hopper, d, ref)
    theirs = relative(hopper, torch_scaled_mm(hopper, a, b_t, scale_a, scale_b, rowwise), ref)
    assert ours <= 2 * theirs + 1e-2 and ours < 5e-2, f"kdsl {ours:.2e}, torch._scaled_mm {theirs:.2e}"


def test_f32_results_keep_the_accumulators_precision(hopper):
    """An f32 d holds the f32 accumulator times its scales: closer to the exact product than bf16 can be."""
    from gemm_fp8 import scaled_mm

    a, b_t, scale_a, scale_b, d = operands(hopper, 8192, 4096, 4096, ("e4m3", "e4m3"), True, "f32", unit=False)
    scaled_mm(a, b_t, scale_a, scale_b, d)
    ref = exact(hopper, a, b_t, scale_a, scale_b)
    bf16 = relative(hopper, d.bfloat16(), ref)
    assert relative(hopper, d, ref) < bf16 and bf16 < 5e-2


def test_repeated_calls_and_graph_replays_give_the_same_bits(hopper):
    """The split-K kernel at M = 1: partials summed in split order give the same bits every call, the
    tickets go back to zero, and a CUDA graph of the call replays it on new activations."""
    import gemm_fp8 as g
    from gemm_small_m import make_workspace

    a, b_t, scale_a, scale_b, d = operands(hopper, 1, 8192, 8192, ("e4m3", "e4m3"), True, "bf16", unit=True)
    plan = g.plan_for(1, 8192, 8192, g.sm_count_of(a))
    assert plan.variant == "small_m" and plan.splits > 1
    ws = make_workspace(d, *plan.workspace_size(1, 8192, 8192))
    g.scaled_mm(a, b_t, scale_a, scale_b, d, workspace=ws)
    assert hopper.equal(d, epilogue(hopper, a, b_t, scale_a, scale_b, True, d.dtype))
    first = d.clone()
    for _ in range(3):
        g.scaled_mm(a, b_t, scale_a, scale_b, d, workspace=ws)
        assert hopper.equal(d, first)
    assert not ws.tickets.any()
    graph = hopper.cuda.CUDAGraph()
    with hopper.cuda.graph(graph):
        g.scaled_mm(a, b_t, scale_a, scale_b, d, workspace=ws)
    for _ in range(2):
        d.fill_(float("nan"))
        a.copy_(hopper.randint(-1, 2, a.shape, device="cuda").float().to(hopper.float8_e4m3fn))
        graph.replay()
        hopper.cuda.synchronize()
        assert hopper.equal(d, epilogue(hopper, a, b_t, scale_a, scale_b, True, d.dtype))
