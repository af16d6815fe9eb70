"""Several specializations behind one entry point: dispatched by element type, rank and
Constexpr arguments, or, with `--choose`, by what the arguments allow (alignment, asserts),
most specific first; arguments that fit none are refused with each one's reason.

Calls run against the recording driver (`recording.py`); which specialization launched is
read from the grid and parameters it recorded.
"""

from __future__ import annotations

import pytest

import dsl
from dsl.export.exporter import ExportFailed, export_function
from tests.export.conftest import have_gcc
from tests.export.recording import Array, c_outcomes, export_and_build

pytestmark = pytest.mark.skipif(not have_gcc(), reason="needs gcc")

SOURCE = """
import dsl
from dsl import Constexpr, Int32, Tensor, f32

@dsl.kernel
def copy(x: Tensor, y: Tensor, n: Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    if i < n:
        y[i] = x[i]

@dsl.jit
def run(x: Tensor, y: Tensor, BLOCK: Constexpr[int] = 256):
    copy(x, y, x.shape[0]).launch(grid=dsl.cdiv(x.shape[0], BLOCK), block=BLOCK)

@dsl.kernel
def touch(x: Tensor):
    pass

@dsl.jit
def ranks(x: Tensor):
    touch(x).launch(grid=x.shape[0], block=32)

@dsl.jit
def mode(x: Tensor, MODE: Constexpr[str] = "fast"):
    touch(x).launch(grid=1 if MODE == "fast" else 2, block=32)

@dsl.kernel
def scale(x: Tensor[f32], y: Tensor[f32], n: Int32, VEC: Constexpr[int]):
    i = (dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x) * VEC
    if i < n:
        if dsl.const_expr(VEC == 4):
            y.vstore(i, x.vload(i, 4) * 2.0)
        else:
            y[i] = x[i] * 2.0

@dsl.jit
def vec(x: Tensor[f32], y: Tensor[f32], VEC: Constexpr[int] = 1):
    n = x.shape[0]
    if dsl.const_expr(VEC == 4):
        assert n % 4 == 0, "n must be a multiple of 4"
    scale(x, y, n, VEC).launch(grid=dsl.cdiv(n, 256 * VEC), block=256)
"""


def tensors(dtype):
    return {"x": dsl.Tensor[dtype, 1], "y": dsl.Tensor[dtype, 1]}


def grids(outcomes) -> list[str | None]:
    """The grid and block each call launched with (None: it launched nothing)."""
    return [" ".join(o.log[-1].split()[2:10]) if o.log else None for o in outcomes]


def test_element_types_and_a_constexpr_argument_pick_the_specialization(tmp_path, jit_module):
    run = jit_module(SOURCE)["run"]
    examples = [((), tensors(dsl.f32)), ((), {**tensors(dsl.f16), "BLOCK": 128}), ((), tensors(dsl.f16))]
    ex = export_and_build(tmp_path, [(run, examples)], "copy")
    (fn,) = ex.export.functions
    assert [p.declaration() for p in fn.params] == ["const kdsl_tensor *x", "const kdsl_tensor *y", "int64_t BLOCK"]
    f32, f16 = (lambda n: Array(0x10000, (n,), "f32")), (lambda n: Array(0x10000, (n,), "f16"))
    outcomes = c_outcomes(ex, "run", [[f32(1000), f32(1000), 256], [f16(1000), f16(1000), 128],
                                      [f16(1000), f16(1000), 256], [f32(1000), f32(1000), 128],
                                      [Array(0x10000, (9,), "f64"), Array(0x20000, (9,), "f64"), 256]])
    assert grids(outcomes) == ["grid 4 1 1 block 256 1 1", "grid 8 1 1 block 128 1 1", "grid 4 1 1 block 256 1 1",
                               None, None]
    assert outcomes[3].error == (
        "run: no exported specialization takes these arguments:\n"
        "  [x: Tensor[f32, 1], y: Tensor[f32, 1], BLOCK=256] BLOCK=128, but this specialization has BLOCK=256\n"
        "  [x: Tensor[f16, 1], y: Tensor[f16, 1], BLOCK=128] argument 'x' has element type f32, but this "
        "specialization takes Tensor[f16, 1]\n"
        "  [x: Tensor[f16, 1], y: Tensor[f16, 1], BLOCK=256] BLOCK=128, but this specialization has BLOCK=256")
    assert "argument 'x' has element type f64" in outcomes[4].error


def test_ranks_pick_the_specialization(tmp_path, jit_module):
    ranks = jit_module(SOURCE)["ranks"]
    ex = export_and_build(tmp_path, [(ranks, [((dsl.Tensor[dsl.f32, 1],), {}), ((dsl.Tensor[dsl.f32, 2],), {})])],
                          "ranks")
    outcomes = c_outcomes(ex, "ranks", [[Array(0x10000, (5,))], [Array(0x10000, (6, 3))],
                                        [Array(0x10000, (2, 2, 2))]])
    assert [len(o.log[0].split()) - 12 if o.log else None for o in outcomes] == [2, 4, None]  # its parameters
    assert "argument 'x' has rank 3 (shape (2, 2, 2)), but this specialization takes Tensor[f32, 2]" in \
        outcomes[2].error


def test_a_chosen_constexpr_takes_the_most_specific_specialization_the_arguments_allow(tmp_path, jit_module):
    vec = jit_module(SOURCE)["vec"]
    ex = export_and_build(tmp_path, [(vec, [((), {"VEC": 1}), ((), {"VEC": 4})])], "vec", choose={"VEC"})
    (fn,) = ex.export.functions
    assert [s.description.rsplit(", ", 1)[1] for s in fn.specs] == ["VEC=4", "VEC=1"]  # 16-byte accesses first
    assert [p.name for p in fn.params] == ["x", "y"]
    outcomes = c_outcomes(ex, "vec", [
        [Array(0x10000, (4096,)), Array(0x20000, (4096,))],  # aligned, a multiple of 4: vectors
        [Array(0x10004, (4096,)), Array(0x20000, (4096,))],  # x is 4-byte aligned only
        [Array(0x10000, (4097,)), Array(0x20000, (4097,))],  # the assert of VEC=4 fails
        [Array(0x10000, (16,), "f16"), Array(0x20000, (16,))]])
    assert grids(outcomes) == ["grid 4 1 1 block 256 1 1", "grid 16 1 1 block 256 1 1", "grid 17 1 1 block 256 1 1",
                               None]
    assert "[x: Tensor[f32, 1], y: Tensor[f32, 1], VEC=4] argument 'x' has element type f16" in outcomes[3].error


def test_constexpr_values_a_c_argument_cannot_carry_are_refused_unless_chosen(tmp_path, jit_module):
    namespace = jit_module(SOURCE)
    examples = [((dsl.Tensor[dsl.f32, 1],), {"MODE": "fast"}), ((dsl.Tensor[dsl.f32, 1],), {"MODE": "slow"})]
    with pytest.raises(ExportFailed, match="Constexpr 'MODE' takes the values 'fast', 'slow'; a C argument can carry "
                                           "one of int, float or bool"):
        export_function(namespace["mode"], "mode", "kern.py:1", ["sm_90"], examples, set())
    chosen = export_function(namespace["mode"], "mode", "kern.py:1", ["sm_90"], examples, {"MODE"})
    assert [p.name for p in chosen.params] == ["x"]
    with pytest.raises(ExportFailed, match="--choose BLOCK: not a Constexpr parameter of it"):
        export_function(namespace["vec"], "vec", "kern.py:1", ["sm_90"], [], {"BLOCK"})
