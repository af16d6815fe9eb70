"""Accesses the GPU would fault on are errors that name the tensor, the index, the thread, the
block and the line — a `LaunchError` with a DSL601 diagnostic, as a GPU fault is — and arguments
are checked before anything runs, with the GPU reader's messages.
"""

from __future__ import annotations

import numpy as np
import pytest

import dsl
from dsl import Int32, Tensor, f32, i32
from dsl.diagnostics import ArgumentError
from dsl.runtime.driver import LaunchError


def line_of(text: str) -> int:
    with open(__file__) as f:
        return next(n for n, line in enumerate(f, 1) if text in line)


@dsl.kernel
def unguarded(a: Tensor[f32], b: Tensor[f32], n: Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    b[i] = a[i] + 1.0


@dsl.jit
def run_unguarded(a: Tensor[f32], b: Tensor[f32]):
    unguarded(a, b, a.shape[0]).launch(grid=dsl.cdiv(a.shape[0], 256), block=256)


def test_an_out_of_bounds_load_names_tensor_index_thread_block_and_line():
    a, b = np.zeros(1000, dtype=np.float32), np.zeros(1000, dtype=np.float32)
    with pytest.raises(LaunchError) as caught:
        dsl.interpret(run_unguarded, a, b)
    err = caught.value
    assert str(err).splitlines()[0] == (
        "launching kernel 'unguarded' with grid=(4, 1, 1), block=(256, 1, 1), smem=0 failed: out-of-bounds load of "
        "4 bytes at tensor 'a' at element offset 1000 (shape (1000,), 1000 elements) by thread (232, 0, 0) of "
        "block (3, 0, 0)")
    assert err.diagnostic.code == "DSL601"
    assert (err.diagnostic.range.line, err.diagnostic.range.file) == (line_of("b[i] = a[i] + 1.0"), __file__)
    assert err.diagnostic.related[0].range.line == line_of("unguarded(a, b, a.shape[0]).launch")
    assert not b[:1000].any()  # the load faulted before any store of its batch


@dsl.kernel
def offset_rows(x: Tensor[f32, 2], out: Tensor[f32, 2]):
    r = dsl.thread_idx.y
    c = dsl.thread_idx.x
    out[r, c + 1] = x[r, c]


@dsl.jit
def run_offset_rows(x: Tensor[f32, 2], out: Tensor[f32, 2]):
    offset_rows(x, out).launch(grid=1, block=(x.shape[1], x.shape[0], 1))


def test_an_out_of_bounds_store_names_the_flat_element():
    x, out = np.zeros((4, 8), dtype=np.float32), np.zeros((4, 8), dtype=np.float32)
    with pytest.raises(LaunchError) as caught:
        dsl.interpret(run_offset_rows, x, out)
    assert ("out-of-bounds store of 4 bytes at tensor 'out' at element offset 32 (shape (4, 8), 32 elements) by "
            "thread (7, 3, 0) of block (0, 0, 0)") in str(caught.value)
    assert caught.value.diagnostic.range.line == line_of("out[r, c + 1] = x[r, c]")


@dsl.kernel
def shifted_vectors(x: Tensor[f32], y: Tensor[f32], shift: Int32):
    i = dsl.thread_idx.x * 4 + shift
    y.vstore(i, x.vload(i, 4))


@dsl.jit
def run_shifted(x: Tensor[f32], y: Tensor[f32], shift: Int32):
    shifted_vectors(x, y, shift).launch(grid=1, block=4)


def test_a_misaligned_vector_load_is_an_error():
    x, y = np.zeros(64, dtype=np.float32), np.zeros(64, dtype=np.float32)
    dsl.interpret(run_shifted, x, y, 0)  # aligned: fine
    with pytest.raises(LaunchError) as caught:
        dsl.interpret(run_shifted, x, y, 2)
    assert ("misaligned load of 16 bytes at tensor 'x' at element offset 2 (shape (64,), 64 elements): the address "
            "must be a multiple of 16 by thread (0, 0, 0)") in str(caught.value)


@dsl.kernel
def scale(x: Tensor[f32], y: Tensor[f32]):
    i = dsl.thread_idx.x
    y[i] = x[i] * 2.0


@dsl.jit
def run_scale(x: Tensor[f32], y: Tensor[f32]):
    scale(x, y).launch(grid=1, block=x.shape[0])


def test_arguments_are_checked_as_the_gpu_reader_checks_them():
    x = np.ones(8, dtype=np.float32)
    frozen = np.ones(8, dtype=np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ArgumentError, match="argument 'y' is a read-only array, but kernel parameter 'scale.y' writes"):
        dsl.interpret(run_scale, x, frozen)
    with pytest.raises(ArgumentError, match="argument 'x' has innermost stride 2"):
        dsl.interpret(run_scale, np.ones(16, dtype=np.float32)[::2], np.ones(8, dtype=np.float32))
    y = np.zeros(8, dtype=np.float32)
    dsl.interpret(run_scale, frozen, y)  # reading a read-only array is fine
    np.testing.assert_array_equal(y, 2 * x)


@dsl.kernel(known_block_size=[64, 1, 1])
def fixed(x: Tensor[i32]):
    x[dsl.thread_idx.x] = dsl.thread_idx.x


@dsl.jit
def run_fixed(x: Tensor[i32], threads: Int32):
    fixed(x).launch(grid=1, block=threads)


def test_the_launchers_own_checks_run_too():
    with pytest.raises(LaunchError, match="block") as caught:
        dsl.interpret(run_fixed, np.zeros(64, dtype=np.int32), 32)
    assert caught.value.diagnostic.code == "DSL202"
    x = np.zeros(64, dtype=np.int32)
    dsl.interpret(run_fixed, x, 64)
    np.testing.assert_array_equal(x, np.arange(64))


@dsl.jit
def run_scale_with(x: Tensor[f32], y: Tensor[f32], threads: Int32):
    scale(x, y).launch(grid=1, block=threads)


def test_a_launch_the_gpu_would_refuse_is_refused():
    x, y = np.ones(2048, dtype=np.float32), np.zeros(2048, dtype=np.float32)
    with pytest.raises(LaunchError, match=r"block \(2048, 1, 1\) exceeds sm_90's limits \(1024 threads"):
        dsl.interpret(run_scale_with, x, y, 2048)
    assert not y.any()
