"""The exported C does what the Python launcher does, call for call: the same launches (kernel,
grid, block, shared memory, cluster, every parameter's bytes) or a refusal where the
launcher refuses, with the launcher's message.

Each case exports a jit function, builds it with gcc, calls the entry point in a child
process against the recording driver (`recording.py`) and runs the function's own Python
launcher against kdsl's runtime with the same records, here. Inputs are chosen to reach
every branch the translation has: negative operands of `//`, `%` and `dsl.cdiv`, f-string
assert messages, device attributes, run-time shared memory and its opt-in, run-time
blocks against `known_block_size`, clusters, TMA tensor maps, every scalar type, values
that do not fit a kernel parameter, empty grids.
"""

from __future__ import annotations

import pytest

from tests.export.conftest import example_namespace, have_gcc
from tests.export.recording import Array, c_outcomes, export_and_build, python_outcomes

pytestmark = pytest.mark.skipif(not have_gcc(), reason="needs gcc")


def assert_same(exported, entry: str, calls: list[list], same_message: bool = True) -> list:
    """Every call launches the same or fails in both; the C message holds the Python one."""
    outcomes = c_outcomes(exported, entry, calls)
    for args, got, want in zip(calls, outcomes, python_outcomes(exported.launchers[entry], calls)):
        assert got.log == want.log, (args, got, want)
        assert (got.error is None) == (want.error is None), (args, got.error, want.error)
        if want.error is not None and same_message:
            assert want.error in got.error, (args, got.error, want.error)
    return outcomes


def f32(ptr: int, *shape: int, strides: tuple | None = None) -> Array:
    return Array(ptr, shape, "f32", strides)


def test_saxpy(tmp_path):
    fn = example_namespace("saxpy.py")["run_saxpy"]
    ex = export_and_build(tmp_path, [(fn, [])], "saxpy")
    outcomes = assert_same(ex, "run_saxpy", [
        [f32(0x10000, 1000), f32(0x20000, 1000), 2.5],
        [f32(0x10000, 0), f32(0x20000, 0), 2.5],  # an empty grid launches nothing
        [f32(0x10000, 2**31 - 1), f32(0x20000, 5), -1.0],
        [Array(0x10000, (10,), "f16"), f32(0x20000, 10), 2.5],
        [f32(0x10002, 10), f32(0x20000, 10), 2.5],
        [f32(0x10000, 10, 2), f32(0x20000, 10), 2.5],
        [f32(0x10000, 3_000_000_000), f32(0x20000, 10), 2.5],
        [f32(0, 10), f32(0x20000, 10), 2.5],
        [f32(0x10000, 4, strides=(2,)), f32(0x20000, 4), 2.5],
    ])
    assert [o.error is None for o in outcomes] == [True, True, True, False, False, False, False, False, False]


def test_softmax_rows_with_strides(tmp_path):
    fn = example_namespace("softmax.py")["run_softmax"]
    ex = export_and_build(tmp_path, [(fn, [])], "softmax")
    assert_same(ex, "run_softmax", [
        [f32(0x100000, 8, 1000), f32(0x200000, 8, 1000)],
        [f32(0x100000, 8, 1000, strides=(1024, 1)), f32(0x200000, 8, 1000)],
        [f32(0x100000, 8, 1000, strides=(1001, 1)), f32(0x200000, 8, 1000)],  # rows not 16-byte aligned
        [f32(0x100000, 1, 1000, strides=(1001, 1)), f32(0x200000, 1, 1000)],  # one row: no stride to align
        [f32(0x100004, 8, 1000), f32(0x200000, 8, 1000)],
        [f32(0x100000, 8, 1000, strides=(-1000, 1)), f32(0x200000, 8, 1000)],
    ])


def test_layernorm_and_transpose(tmp_path):
    layernorm = example_namespace("layernorm.py")["run_layernorm"]
    transpose = example_namespace("transpose.py")["run_transpose"]
    ex = export_and_build(tmp_path, [(layernorm, []), (transpose, [])], "rows")
    assert_same(ex, "run_layernorm", [
        [f32(0x100000, 64, 4096), f32(0x200000, 4096), f32(0x300000, 4096), f32(0x400000, 64, 4096), 1e-5]])
    assert_same(ex, "run_transpose", [
        [f32(0x100000, 100, 70), f32(0x200000, 70, 100)], [f32(0x100000, 0, 70), f32(0x200000, 70, 0)]])


def test_matmul_mma_asserts_and_shared_memory_opt_in(tmp_path):
    fn = example_namespace("matmul_mma.py")["matmul_mma"]
    ex = export_and_build(tmp_path, [(fn, [])], "mma")

    def bf16(ptr: int, *shape: int) -> Array:
        return Array(ptr, shape, "bf16")

    outcomes = assert_same(ex, "matmul_mma", [
        [bf16(0x100000, 256, 64), bf16(0x200000, 128, 64), bf16(0x300000, 256, 128)],
        [bf16(0x100000, 256, 64), bf16(0x200000, 128, 64), bf16(0x300000, 256, 128)],  # the opt-in stays made
        [bf16(0x100000, 200, 64), bf16(0x200000, 128, 64), bf16(0x300000, 200, 128)],
        [bf16(0x100000, 256, 64), bf16(0x200000, 128, 32), bf16(0x300000, 256, 128)],
    ])
    assert outcomes[0].log[0] == "attribute matmul_mma_kernel 8 65536" and len(outcomes[1].log) == 1
    assert "M and N must be multiples of 128, K of 32 (assert at matmul_mma.py:" in outcomes[2].error


def test_hopper_gemm_tensor_maps_and_the_sm_count(tmp_path):
    fn = example_namespace("gemm_hopper.py")["gemm_hopper"]
    ex = export_and_build(tmp_path, [(fn, [])], "gemm")

    def bf16(ptr: int, *shape: int, strides: tuple | None = None) -> Array:
        return Array(ptr, shape, "bf16", strides)

    outcomes = assert_same(ex, "gemm_hopper", [
        [bf16(0x1000000, 4096, 512), bf16(0x2000000, 2048, 512), bf16(0x3000000, 4096, 2048)],
        [bf16(0x100000, 128, 64), bf16(0x200000, 256, 64), bf16(0x300000, 128, 256)],
        [bf16(0x100002, 128, 64), bf16(0x200000, 256, 64), bf16(0x300000, 128, 256)],  # TMA needs 16-byte alignment
        [bf16(0x100000, 128, 64, strides=(72, 1)), bf16(0x200000, 256, 64), bf16(0x300000, 128, 256)],
        [bf16(0x100000, 128, 64), bf16(0x200000, 200, 64), bf16(0x300000, 128, 200)],
    ])
    assert " grid 132 1 1 " in outcomes[0].log[-1]  # min(units, sm_count): the device's 132 SMs
    assert "16-byte aligned" in outcomes[2].error and "multiple of BN" in outcomes[4].error


def test_attention_rank_three_tensor_maps(tmp_path):
    fn = example_namespace("attention_hopper.py")["attention_hopper"]
    ex = export_and_build(tmp_path, [(fn, [])], "attention")
    qkv = [Array(0x100000 * (i + 1), (8, 256, 128), "bf16") for i in range(4)]
    assert_same(ex, "attention_hopper", [qkv, [*qkv[:3], Array(0x500000, (8, 256, 64), "bf16")]])


HOST_ARITHMETIC = """
import dsl
from dsl import Float32, Int32, Tensor, f32

@dsl.kernel
def fill(x: Tensor[f32], v: Int32, w: Float32, m: Int32):
    x[dsl.thread_idx.x] = dsl.cast(v, f32) + w + dsl.cast(m, f32)

@dsl.jit
def run(x: Tensor[f32], k: Int32, s: Float32):
    n = x.shape[0]
    assert n % 2 == 0 or k < 0, f"n={n} must be even unless k={k} < 0 (s={s}, {k:05d}, {s:.3f}, {n:x})"
    assert s != 0.5, "s must not be one half"
    fill(x, k // 4 + k % 3 + dsl.cdiv(k, 8) - (k << 2) + (n >> 1), s * 2.5 - s / 4.0 + f32(k),
         max(k, n // 3) - min(k, 7)).launch(grid=dsl.cdiv(n, 128), block=128)
"""


@pytest.mark.parametrize("k", [0, 7, -7, 13, -13, -1, 2**31 - 1, -(2**31)])
def test_host_arithmetic_truncates_as_the_ir_does(tmp_path, jit_module, k):
    fn = jit_module(HOST_ARITHMETIC)["run"]
    ex = export_and_build(tmp_path, [(fn, [])], "host")
    assert_same(ex, "run", [[f32(0x10000, 1000), k, 1.25], [f32(0x10000, 1000), k, -3.0e-7]],
                same_message=abs(k) < 2**20)  # a packed value beyond i32: both refuse, in their words


def test_assert_messages_format_run_time_values_as_python_does(tmp_path, jit_module):
    """(f32 arguments are floats in C: values a float holds exactly reach both alike.)"""
    fn = jit_module(HOST_ARITHMETIC)["run"]
    ex = export_and_build(tmp_path, [(fn, [])], "host")
    outcomes = assert_same(ex, "run", [
        [f32(0x10000, 999), 3, 1.25], [f32(0x10000, 999), 3, 2.0**-23], [f32(0x10000, 999), 3, 2.0**55],
        [f32(0x10000, 999), -3, 0.5], [f32(0x10000, 255), 12, -0.0]])
    assert outcomes[0].error.startswith("run: n=999 must be even unless k=3 < 0 (s=1.25, 00003, 1.250, 3e7) "
                                        "(assert at kern.py:")
    assert "(s=1.1920928955078125e-07," in outcomes[1].error and "(s=3.602879701896397e+16," in outcomes[2].error
    assert "s must not be one half" in outcomes[3].error and "(s=-0.0, 00012, -0.000, ff)" in outcomes[4].error


SHARED = """
import dsl
from dsl import Int32, Tensor, f32

@dsl.kernel(known_block_size=[128, 1, 1])
def reverse_rows(x: Tensor[f32, 2], y: Tensor[f32, 2], n: Int32):
    smem = dsl.SharedAllocator(dynamic=True)
    header = smem.array(dsl.i32, 4)
    row = smem.array(f32, n)
    r = dsl.block_idx.x
    i = dsl.thread_idx.x
    while i < n:
        row[i] = x[r, i]
        i = i + dsl.block_dim.x
    dsl.barrier()
    y[r, 0] = row[0]

@dsl.jit
def inferred(x: Tensor[f32, 2], y: Tensor[f32, 2], threads: Int32):
    reverse_rows(x, y, x.shape[1]).launch(grid=x.shape[0], block=threads)

@dsl.jit
def explicit(x: Tensor[f32, 2], y: Tensor[f32, 2], smem: Int32):
    reverse_rows(x, y, x.shape[1]).launch(grid=x.shape[0], block=128, smem=smem)
"""


def test_run_time_shared_memory_blocks_and_their_checks(tmp_path, jit_module):
    namespace = jit_module(SHARED)
    ex = export_and_build(tmp_path, [(namespace["inferred"], []), (namespace["explicit"], [])], "shared")
    x, y = f32(0x100000, 4, 20000), f32(0x200000, 4, 20000)
    small_x, small_y = f32(0x100000, 4, 100), f32(0x200000, 4, 100)
    outcomes = assert_same(ex, "inferred", [[small_x, small_y, 128], [x, y, 128], [x, y, 64],
                                            [f32(0x100000, 4, 60000), f32(0x200000, 4, 60000), 128]],
                           same_message=False)
    assert outcomes[1].log[0] == f"attribute reverse_rows 8 {16 + 4 * 20000}"
    assert "differs from known_block_size x=128" in outcomes[2].error
    assert "bytes of dynamic shared memory requested" in outcomes[3].error
    outcomes = assert_same(ex, "explicit", [[x, y, 16 + 4 * 20000], [x, y, 4 * 20000]])
    assert "is less than the 80016 bytes allocated by SharedAllocator" in outcomes[1].error


CLUSTER = """
import dsl
from dsl import Tensor, f32

@dsl.kernel
def k(x: Tensor[f32]):
    x[dsl.block_idx.x] = 1.0

@dsl.jit
def run(x: Tensor[f32]):
    k(x).launch(grid=(dsl.cdiv(x.shape[0], 2) * 2, 2), block=32, cluster=(2, 1, 1))
"""


def test_cluster_launches(tmp_path, jit_module):
    ex = export_and_build(tmp_path, [(jit_module(CLUSTER)["run"], [])], "cluster")
    outcomes = assert_same(ex, "run", [[f32(0x10000, 9)]])
    assert " cluster 2 1 1 " in outcomes[0].log[0]


SCALARS = """
import dsl
from dsl import BFloat16, Boolean, Float16, Float64, Int8, Int64, Tensor, Uint32, Uint64, f32

@dsl.kernel
def scalars(x: Tensor[f32], b: Boolean, h: Float16, g: BFloat16, d: Float64, q: Int64, u: Uint32, s: Int8,
            w: Uint64):
    x[0] = dsl.cast(h, f32)

@dsl.jit
def run(x: Tensor[f32], b: Boolean, h: Float16, g: BFloat16, d: Float64, q: Int64, u: Uint32, s: Int8, w: Uint64):
    scalars(x, b, h * 2.0, g, d / 3.0, q * 3 - 1, u + 1, s, w).launch(grid=1, block=32)
"""


@pytest.mark.parametrize("h, g", [(0.333251953125, 0.1), (32752.0, 3.0e38), (-1e-7, float("nan")),
                                  (5.960464477539063e-08, -0.0), (32760.0, 1.5), (float("inf"), 2.0**-130)])
def test_every_scalar_type_packs_as_python_packs_it(tmp_path, jit_module, h, g):
    ex = export_and_build(tmp_path, [(jit_module(SCALARS)["run"], [])], "scalars")
    assert_same(ex, "run", [[f32(0x10000, 4), True, h, g, 1.0, -5, 7, -3, 2**64 - 1],
                            [f32(0x10000, 4), False, h, g, -2.5, 2**40, 2**32 - 1, 127, 0]], same_message=False)


MULTI = """
import dsl
from dsl import Tensor, f32

@dsl.kernel
def first(x: Tensor[f32]):
    x[0] = 1.0

@dsl.kernel
def second(x: Tensor[f32], y: Tensor[f32, 2]):
    x[0] = y[0, 0]

@dsl.jit
def run(x: Tensor[f32], y: Tensor[f32, 2]):
    first(x).launch(grid=dsl.cdiv(x.shape[0], 64), block=64)
    second(x, y).launch(grid=(y.shape[0], y.shape[1]), block=(8, 4))
    first(x).launch(grid=1, block=32)
"""


def test_several_launches_in_order_an_empty_one_skipped(tmp_path, jit_module):
    ex = export_and_build(tmp_path, [(jit_module(MULTI)["run"], [])], "multi")
    outcomes = assert_same(ex, "run", [[f32(0x10000, 100), f32(0x20000, 3, 5)], [f32(0x10000, 100),
                                                                                  f32(0x20000, 0, 5)]])
    assert [len(o.log) for o in outcomes] == [3, 2]
