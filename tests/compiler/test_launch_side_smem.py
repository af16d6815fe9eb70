"""Dynamic shared memory sized by run-time values: `smem.array(f32, n)` as the last array of
a dynamic `SharedAllocator`, inferred by `launch(smem=None)` from the launch's arguments,
and a run-time `smem=` checked against it by the launcher (DSL205).

Fixture: `reverse_rows` stages a row of `n` floats (n a kernel argument) after a 4-int
header in dynamic shared memory and writes it back reversed.
"""

from __future__ import annotations

import pytest

from dsl.diagnostics import SourceRange
from dsl.runtime import LaunchError
from dsl.runtime.launch import Runtime
from dsl.runtime.module import ModuleImage
from tests.compiler.test_launch_side_asserts import bind

KERNEL = """
import dsl
from dsl import Int32, Tensor, f32

@dsl.kernel
def reverse_rows(x: Tensor[f32, 2], y: Tensor[f32, 2], n: Int32):
    smem = dsl.SharedAllocator(dynamic=True)
    header = smem.array(dsl.i32, 4)
    row = smem.array(f32, {extent})
    r = dsl.block_idx.x
    i = dsl.thread_idx.x
    while i < n:
        row[i] = x[r, i]
        i = i + dsl.block_dim.x
    dsl.barrier()
    j = dsl.thread_idx.x
    while j < n:
        y[r, j] = row[n - 1 - j]
        j = j + dsl.block_dim.x
"""

INFERRED = KERNEL.format(extent="n") + """
@dsl.jit
def run(x: Tensor[f32, 2], y: Tensor[f32, 2]):
    reverse_rows(x, y, x.shape[1]).launch(grid=x.shape[0], block=128)
"""


def launch_line(launcher: str) -> str:
    return next(line.strip() for line in launcher.splitlines()
                if line.strip().startswith("_launch_") and " = rt.kernel(" not in line)


def test_launch_infers_bytes_from_the_argument_that_sizes_the_array(analyse):
    a = analyse(INFERRED)
    assert a.diagnostics == []
    assert launch_line(a.stage("run", "launcher")) == (
        "_launch_reverse_rows((x_shape[0], 1, 1), (128, 1, 1), (16 + (4 * x_shape[1])), stream, x_ptr, "
        "x_shape[0], x_shape[1], x_strides[0], y_ptr, y_shape[0], y_shape[1], y_strides[0], x_shape[1])")
    launch, rt = bind(a.stage("run", "launcher"))
    launch((3, 1000), (3, 1000))
    assert rt.launches == [("reverse_rows", (3, 1, 1), (128, 1, 1), 16 + 4 * 1000)]


def test_the_array_starts_after_the_header_with_constant_strides(analyse):
    a = analyse(INFERRED)
    traced = a.stage("run", "traced")
    assert "llvm.getelementptr %1[16] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8" in traced
    ptx = a.stage("run", "ptx")
    assert ".extern .shared .align 16 .b8 __kdsl_dynamic_smem[];" in ptx
    kernel = a.report.function("run").compiled.kernels[0]
    assert kernel.dynamic_smem == 16  # the compile-time part: the header, before the sized array


def test_a_tensor_shape_as_the_extent(analyse):
    a = analyse(KERNEL.format(extent="y.shape[1]") + """
@dsl.jit
def run(x: Tensor[f32, 2], y: Tensor[f32, 2]):
    reverse_rows(x, y, 7).launch(grid=x.shape[0], block=128)
""")
    assert a.diagnostics == []
    assert launch_line(a.stage("run", "launcher")).startswith(
        "_launch_reverse_rows((x_shape[0], 1, 1), (128, 1, 1), (16 + (4 * y_shape[1])), stream,")


def test_a_two_dimensional_array_keeps_constant_strides(analyse):
    a = analyse("""
import dsl
from dsl import Int32, Tensor, f32

@dsl.kernel
def padded(x: Tensor[f32, 2], rows: Int32):
    tile = dsl.SharedAllocator(dynamic=True).array(f32, (rows, 33))
    tile[dsl.thread_idx.y, dsl.thread_idx.x] = x[dsl.thread_idx.y, dsl.thread_idx.x]
    dsl.barrier()
    x[dsl.thread_idx.y, dsl.thread_idx.x] = tile[dsl.thread_idx.y, 32 - dsl.thread_idx.x]

@dsl.jit
def run(x: Tensor[f32, 2]):
    padded(x, x.shape[0]).launch(grid=1, block=(32, x.shape[0], 1))
""")
    assert a.diagnostics == []
    assert "(132 * x_shape[0])" in launch_line(a.stage("run", "launcher"))
    traced = a.stage("run", "traced")
    assert traced.count("arith.constant 33 : i32") == 2  # the row stride, once per access


def test_a_literal_argument_gives_a_compile_time_size(analyse):
    a = analyse(KERNEL.format(extent="n") + """
@dsl.jit
def run(x: Tensor[f32, 2], y: Tensor[f32, 2]):
    reverse_rows(x, y, 100).launch(grid=x.shape[0], block=128)
""")
    assert launch_line(a.stage("run", "launcher")).startswith(
        "_launch_reverse_rows((x_shape[0], 1, 1), (128, 1, 1), 416, stream,")


def test_run_time_smem_is_checked_before_its_launch(analyse):
    a = analyse(KERNEL.format(extent="n") + """
@dsl.jit
def run(x: Tensor[f32, 2], y: Tensor[f32, 2], smem: Int32):
    reverse_rows(x, y, x.shape[1]).launch(grid=x.shape[0], block=128, smem=smem)
""")
    lines = [line.strip() for line in a.stage("run", "launcher").splitlines()]
    check = lines.index("rt.check_smem('reverse_rows', (x_shape[0], 1, 1), (128, 1, 1), smem, "
                        "(16 + (4 * x_shape[1])))")
    assert lines[check + 1].startswith("_launch_reverse_rows((x_shape[0], 1, 1), (128, 1, 1), smem, stream,")


def test_run_time_smem_with_a_static_allocation_is_checked_too(analyse):
    a = analyse("""
import dsl
from dsl import Int32, Tensor, f32

@dsl.kernel
def k(x: Tensor[f32]):
    buf = dsl.SharedAllocator(dynamic=True).array(f32, 64)
    buf[dsl.thread_idx.x] = x[dsl.thread_idx.x]

@dsl.jit
def run(x: Tensor[f32], smem: Int32):
    k(x).launch(grid=1, block=64, smem=smem)
""")
    assert "rt.check_smem('k', (1, 1, 1), (64, 1, 1), smem, 256)" in a.stage("run", "launcher")


def test_the_runtime_check_raises_dsl205_at_the_launch():
    rng = SourceRange("/w/kern.py", 30, 4, 30, 60)
    rt = Runtime(ModuleImage(None, None), {"reverse_rows": rng})
    rt.check_smem("reverse_rows", (3, 1, 1), (128, 1, 1), 4016, 4016)  # enough: nothing happens
    with pytest.raises(LaunchError) as info:
        rt.check_smem("reverse_rows", (3, 1, 1), (128, 1, 1), 4000, 4016)
    assert info.value.diagnostic.code == "DSL205" and info.value.diagnostic.range == rng
    assert "launch smem=4000 is less than the 4016 bytes allocated by SharedAllocator in kernel 'reverse_rows'" \
        in str(info.value)


def test_a_size_the_kernel_computes_needs_an_explicit_smem(analyse):
    a = analyse(KERNEL.format(extent="n * 2") + """
@dsl.jit
def run(x: Tensor[f32, 2], y: Tensor[f32, 2]):
    reverse_rows(x, y, x.shape[1]).launch(grid=x.shape[0], block=128)
""")
    d = next(d for d in a.diagnostics if d.code == "DSL205")
    line = a.line_of(".launch(")
    text = a.source.splitlines()[line - 1]
    assert d.range == SourceRange(a.path, line, 4, line, len(text))
    assert d.message == ("kernel 'reverse_rows' sizes a shared array with a value it computes, so the launch "
                         "cannot infer its shared memory: pass smem= (at least 16 + 4 * that size, in bytes)")
    array_line = a.line_of("row = smem.array")
    assert [(r.range.line, r.range.column, r.message) for r in d.related] == [
        (array_line, 10, "the array is allocated here")]


def test_a_static_smem_below_a_literal_size_is_dsl205(analyse):
    a = analyse(KERNEL.format(extent="n") + """
@dsl.jit
def run(x: Tensor[f32, 2], y: Tensor[f32, 2]):
    reverse_rows(x, y, 100).launch(grid=x.shape[0], block=128, smem=400)
""")
    d = next(d for d in a.diagnostics if d.code == "DSL205")
    line = a.line_of("smem=400")
    col = a.source.splitlines()[line - 1].index("400")
    assert d.range == SourceRange(a.path, line, col, line, col + 3)
    assert d.message == ("launch smem=400 is less than the 416 bytes allocated by SharedAllocator in kernel "
                         "'reverse_rows'")


@pytest.mark.parametrize(("body", "needle", "message"), [
    ("    buf = dsl.SharedAllocator().array(f32, n)\n", "dsl.SharedAllocator().array(f32, n)",
     "a shared array with a run-time size needs SharedAllocator(dynamic=True)"),
    ("    smem = dsl.SharedAllocator(dynamic=True)\n    a = smem.array(f32, n)\n    b = smem.array(f32, 4)\n",
     "smem.array(f32, 4)", "the array with a run-time size must be the last one allocated from the "
     "SharedAllocator (it ends where the launch's dynamic shared memory ends)"),
    ("    buf = dsl.SharedAllocator(dynamic=True).array(f32, (4, n))\n", "dsl.SharedAllocator(dynamic=True)"
     ".array(f32, (4, n))", "only the outer extent of a shared array may be a run-time value; the others must "
     "be compile-time ints (they make its strides)"),
])
def test_misplaced_run_time_sizes_are_dsl301(analyse, body, needle, message):
    a = analyse("""
import dsl
from dsl import Int32, Tensor, f32

@dsl.kernel
def k(x: Tensor[f32], n: Int32):
""" + body + """
@dsl.jit
def run(x: Tensor[f32]):
    k(x, x.shape[0]).launch(grid=1, block=32)
""")
    d = next(d for d in a.diagnostics if d.code == "DSL301" and "kernel 'k' failed" not in d.message)
    line = a.line_of(needle)
    col = a.source.splitlines()[line - 1].index(needle)
    assert d.message == message
    assert (d.range.line, d.range.column, d.range.end_column) == (line, col, col + len(needle))
