"""Launch-side features on the GPU (marked gpu): FMA contraction and its opt-out in a tiled
matmul, register caps, shared memory sized by run-time values, `assert` in jit functions
and persistent grids from `dsl.sm_count()`."""

from __future__ import annotations

import pytest

import dsl
from dsl.runtime import ArgumentError, LaunchError
from dsl.runtime.driver import current_context
from tests.runtime.test_gpu import module_from

pytestmark = pytest.mark.gpu


MATMUL = """
import dsl
from dsl import Tensor, f32

TILE = 16


def tiled(a, b, c):
    smem = dsl.SharedAllocator()
    ta = smem.array(f32, (TILE, TILE))
    tb = smem.array(f32, (TILE, TILE))
    tx = dsl.thread_idx.x
    ty = dsl.thread_idx.y
    row = dsl.block_idx.y * TILE + ty
    col = dsl.block_idx.x * TILE + tx
    acc = f32(0.0)
    for t in range(0, a.shape[1], TILE):
        ta[ty, tx] = a[row, t + tx]
        tb[ty, tx] = b[t + ty, col]
        dsl.barrier()
        for kk in dsl.static_range(TILE):
            acc = ta[ty, kk] * tb[kk, tx] + acc
        dsl.barrier()
    c[row, col] = acc


@dsl.kernel(known_block_size=[TILE, TILE, 1])
def fused(a: Tensor[f32, 2], b: Tensor[f32, 2], c: Tensor[f32, 2]):
    tiled(a, b, c)


@dsl.kernel(known_block_size=[TILE, TILE, 1], contract=False)
def strict(a: Tensor[f32, 2], b: Tensor[f32, 2], c: Tensor[f32, 2]):
    tiled(a, b, c)


@dsl.kernel(known_block_size=[TILE, TILE, 1], maxnreg=24, minnctapersm=4)
def capped(a: Tensor[f32, 2], b: Tensor[f32, 2], c: Tensor[f32, 2]):
    tiled(a, b, c)


@dsl.jit
def run_fused(a: Tensor[f32, 2], b: Tensor[f32, 2], c: Tensor[f32, 2]):
    fused(a, b, c).launch(grid=(b.shape[1] // TILE, a.shape[0] // TILE), block=(TILE, TILE, 1))


@dsl.jit
def run_strict(a: Tensor[f32, 2], b: Tensor[f32, 2], c: Tensor[f32, 2]):
    strict(a, b, c).launch(grid=(b.shape[1] // TILE, a.shape[0] // TILE), block=(TILE, TILE, 1))


@dsl.jit
def run_capped(a: Tensor[f32, 2], b: Tensor[f32, 2], c: Tensor[f32, 2]):
    capped(a, b, c).launch(grid=(b.shape[1] // TILE, a.shape[0] // TILE), block=(TILE, TILE, 1))
"""


def _matmul_inputs(torch, m=256, k=256, n=192):
    a = torch.randn(m, k, device="cuda")
    b = torch.randn(k, n, device="cuda")
    return a, b, [torch.full((m, n), float("nan"), device="cuda") for _ in range(3)]


def test_fused_and_strict_matmul(torch, tmp_path):
    mod = module_from(tmp_path, "mm_launch_side", MATMUL)
    a, b, (c_fused, c_strict, _) = _matmul_inputs(torch)
    mod.run_fused(a, b, c_fused)
    mod.run_strict(a, b, c_strict)
    torch.cuda.synchronize()
    # The strict kernel rounds each product and each sum, in k order: exactly this.
    acc = torch.zeros_like(c_strict)
    for k in range(a.shape[1]):
        acc = a[:, k:k + 1] * b[k:k + 1, :] + acc
    assert torch.equal(c_strict, acc)
    ref = a.double() @ b.double()
    rel = float((c_fused.double() - ref).norm() / ref.norm())
    assert rel < 1e-5
    assert not torch.equal(c_fused, c_strict)  # one rounding per step, not two: other bits
    fused, strict = mod.run_fused.compile(a, b, c_fused), mod.run_strict.compile(a, b, c_strict)
    assert "fma.rn.f32" in fused.ptx and "fma.rn.f32" not in strict.ptx
    if fused.sass is not None:  # where nvdisasm is installed
        assert "FFMA" in fused.sass and "FFMA" not in strict.sass


def test_register_cap_keeps_the_results(torch, tmp_path):
    mod = module_from(tmp_path, "mm_capped", MATMUL)
    a, b, (c_fused, _, c_capped) = _matmul_inputs(torch)
    mod.run_fused(a, b, c_fused)
    mod.run_capped(a, b, c_capped)
    torch.cuda.synchronize()
    assert torch.equal(c_capped, c_fused)  # the same FMA chain, in fewer registers
    compiled = mod.run_capped.compile(a, b, c_capped)
    assert compiled.kernels[0].resources.registers <= 24
    assert ".maxnreg 24" in compiled.ptx and ".minnctapersm 4" in compiled.ptx


REVERSE = """
import dsl
from dsl import Int32, Tensor, f32


@dsl.kernel
def reverse_rows(x: Tensor[f32, 2], y: Tensor[f32, 2], n: Int32):
    smem = dsl.SharedAllocator(dynamic=True)
    header = smem.array(dsl.i32, 4)
    row = smem.array(f32, n)
    if dsl.thread_idx.x == 0:
        header[0] = n
    r = dsl.block_idx.x
    i = dsl.thread_idx.x
    while i < n:
        row[i] = x[r, i]
        i = i + dsl.block_dim.x
    dsl.barrier()
    m = header[0]
    j = dsl.thread_idx.x
    while j < m:
        y[r, j] = row[m - 1 - j]
        j = j + dsl.block_dim.x


@dsl.jit
def run(x: Tensor[f32, 2], y: Tensor[f32, 2]):
    assert x.shape[0] == y.shape[0] and x.shape[1] == y.shape[1], "x and y must have one shape"
    reverse_rows(x, y, x.shape[1]).launch(grid=x.shape[0], block=128)


@dsl.jit
def run_with(x: Tensor[f32, 2], y: Tensor[f32, 2], smem: Int32):
    reverse_rows(x, y, x.shape[1]).launch(grid=x.shape[0], block=128, smem=smem)
"""


@pytest.mark.parametrize("n", [1, 1000, 16000])  # 16000 floats: 64 KiB, above the 48 KiB default
def test_shared_row_sized_by_the_argument(torch, tmp_path, n):
    mod = module_from(tmp_path, f"reverse_{n}", REVERSE)
    x = torch.randn(5, n, device="cuda")
    y = torch.full_like(x, float("nan"))
    mod.run(x, y)
    torch.cuda.synchronize()
    assert torch.equal(y, x.flip(1))


def test_one_specialization_serves_every_row_length(torch, tmp_path):
    mod = module_from(tmp_path, "reverse_many", REVERSE)
    for n in (300, 12000, 7):
        x = torch.randn(3, n, device="cuda")
        y = torch.full_like(x, float("nan"))
        mod.run(x, y)
        torch.cuda.synchronize()
        assert torch.equal(y, x.flip(1)), n
    assert len(mod.run._kdsl_state.specs) == 1


def test_run_time_smem_below_the_row_is_refused(torch, tmp_path):
    mod = module_from(tmp_path, "reverse_smem", REVERSE)
    x = torch.randn(2, 1000, device="cuda")
    y = torch.full_like(x, float("nan"))
    with pytest.raises(LaunchError) as info:
        mod.run_with(x, y, 4000)  # the row needs 16 + 4 * 1000 bytes
    assert info.value.diagnostic.code == "DSL205"
    assert info.value.diagnostic.range.line == REVERSE.count("\n", 0, REVERSE.index("smem=smem)")) + 1
    torch.cuda.synchronize()
    assert bool(torch.isnan(y).all())
    mod.run_with(x, y, 4016)
    torch.cuda.synchronize()
    assert torch.equal(y, x.flip(1))


def test_jit_assert_raises_before_anything_launches(torch, tmp_path):
    mod = module_from(tmp_path, "reverse_assert", REVERSE)
    x = torch.randn(4, 64, device="cuda")
    y = torch.full_like(x, float("nan"))
    mod.run(x, y)  # the good call first: later calls take the fast path straight to its launcher
    torch.cuda.synchronize()
    bad = torch.full((4, 32), float("nan"), device="cuda")
    for _ in range(2):
        with pytest.raises(ArgumentError, match="^x and y must have one shape$"):
            mod.run(x, bad)
    torch.cuda.synchronize()
    assert bool(torch.isnan(bad).all())


PERSISTENT = """
import dsl
from dsl import Tensor, f32, i32


@dsl.kernel
def bump(x: Tensor[f32], g: Tensor[i32]):
    if dsl.block_idx.x == 0 and dsl.thread_idx.x == 0:
        g[0] = dsl.grid_dim.x
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    while i < x.shape[0]:
        x[i] = x[i] + 1.0
        i = i + dsl.grid_dim.x * dsl.block_dim.x


@dsl.jit
def run(x: Tensor[f32], g: Tensor[i32]):
    bump(x, g).launch(grid=min(dsl.sm_count(), dsl.cdiv(x.shape[0], 256)), block=256)
"""


def test_persistent_grid_from_the_sm_count(torch, tmp_path):
    mod = module_from(tmp_path, "persistent_mod", PERSISTENT)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert dsl.sm_count() == sms
    assert dsl.device_attribute("max_shared_memory_per_block_optin") == current_context().smem_optin
    for n, grid in [(1 << 22, sms), (1000, 4)]:
        x = torch.zeros(n, device="cuda")
        g = torch.zeros(1, device="cuda", dtype=torch.int32)
        mod.run(x, g)
        torch.cuda.synchronize()
        assert int(g[0]) == grid
        assert bool((x == 1.0).all())


SQRT = """
import dsl
from dsl import Tensor, f32

@dsl.kernel
def root(x: Tensor[f32], y: Tensor[f32], n: dsl.Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    if i < n:
        y[i] = dsl.sqrt(x[i])

@dsl.jit
def run(x: Tensor[f32], y: Tensor[f32]):
    n = x.shape[0]
    root(x, y, n).launch(grid=dsl.cdiv(n, 256), block=256)
"""


def test_sqrt_is_correctly_rounded_as_torch(torch, tmp_path):
    """IEEE sqrt.rn: every result bit-identical to torch.sqrt (sqrt.approx differs in some)."""
    mod = module_from(tmp_path, "sqrt_mod", SQRT)
    x = torch.rand(1 << 20, device="cuda") * 1000
    y = torch.empty_like(x)
    mod.run(x, y)
    torch.cuda.synchronize()
    assert torch.equal(y, torch.sqrt(x))
