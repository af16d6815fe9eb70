"""`print`, `dsl.printf` and `breakpoint()` inside kernels.

`print` is one `printf` per thread prefixed with its coordinates, on the GPU (a `vprintf` in the
PTX) and in the interpreter alike; `dsl.printf` formats as C does. `breakpoint()` opens pdb at
the kernel's line with its variables bound to the values of the threads that reached it, and
the GPU build drops it: the PTX is the same as without it.
"""

from __future__ import annotations

import io
import re
import sys

import numpy as np

import dsl
from dsl import Constexpr, Int32, Tensor, f32, i32


@dsl.kernel
def chatty(x: Tensor[f32], n: Int32):
    i = dsl.thread_idx.x
    if i < n:
        v = x[i]
        print("i =", i, "v:", v, dsl.vector(i, i + 1), True, sep=" ")
        dsl.printf("%d|%5.2f|%x|%u|%%\n", i, v, i + 250, -1 + i * 0)


@dsl.jit
def run_chatty(x: Tensor[f32]):
    chatty(x, x.shape[0]).launch(grid=1, block=4)


def test_print_and_printf_write_one_line_per_thread_in_thread_order(capsys):
    dsl.interpret(run_chatty, np.array([0.5, -1.25, 3.0], dtype=np.float32))
    assert capsys.readouterr().out.splitlines() == [
        "[block (0, 0, 0) thread (0, 0, 0)] i = 0 v: 0.5 (0, 1) True",
        "[block (0, 0, 0) thread (1, 0, 0)] i = 1 v: -1.25 (1, 2) True",
        "[block (0, 0, 0) thread (2, 0, 0)] i = 2 v: 3 (2, 3) True",
        "0| 0.50|fa|4294967295|%",
        "1|-1.25|fb|4294967295|%",
        "2| 3.00|fc|4294967295|%",
    ]


def test_print_compiles_to_a_gpu_printf_with_the_same_format():
    compiled = dsl.compile(run_chatty, dsl.TensorSpec(f32, shape=(3,)))
    assert "call.uni" in compiled.ptx and "vprintf" in compiled.ptx
    formats = re.findall(r'gpu\.printf "([^"]*)"', compiled.traced)
    assert formats[0] == "[block (%d, %d, %d) thread (%d, %d, %d)] i = %d v: %g (%d, %d) True\\0A"


@dsl.kernel
def stop_once(x: Tensor[f32], n: Int32, SCALE: Constexpr[int]):
    i = dsl.thread_idx.x
    if i < n:
        doubled = x[i] * SCALE
        if i == 2:
            breakpoint()
        x[i] = doubled


@dsl.kernel
def stop_many(x: Tensor[i32]):
    i = dsl.thread_idx.x
    k = i * 10
    breakpoint()
    x[i] = k


@dsl.jit
def run_stops(x: Tensor[f32], y: Tensor[i32]):
    stop_once(x, x.shape[0], 2).launch(grid=1, block=8)
    stop_many(y).launch(grid=1, block=y.shape[0])


def test_breakpoint_opens_pdb_with_the_threads_values(monkeypatch, capsys):
    monkeypatch.delenv("PYTHONBREAKPOINT", raising=False)
    commands = "p i, doubled, SCALE, n, threads, blocks\np x\nl\nc\np k, threads\nc\n"
    monkeypatch.setattr(sys, "stdin", io.StringIO(commands))
    x = np.array([1, 2, 3, 4], dtype=np.float32)
    y = np.zeros(3, dtype=np.int32)
    dsl.interpret(run_stops, x, y)
    out = capsys.readouterr().out
    assert "kernel breakpoint: 1 thread (SCALE, n, i, doubled, x; threads, blocks)" in out
    assert "(np.int32(2), np.float32(6.0), 2, np.int32(4), (2, 0, 0), (0, 0, 0))" in out
    assert "array([1., 2., 3., 4.], dtype=float32)" in out  # the caller's array, before this kernel's stores
    assert f"{__file__}({stop_once.fn.__code__.co_firstlineno + 6})" in out  # pdb is at the kernel's line
    assert "->\t            breakpoint()" in out  # `l` lists the kernel's own source
    assert "kernel breakpoint: 3 threads (i, k, x; threads, blocks)" in out
    assert "(array([ 0, 10, 20], dtype=int32), [(0, 0, 0), (1, 0, 0), (2, 0, 0)])" in out
    np.testing.assert_array_equal(x, [2, 4, 6, 8])
    np.testing.assert_array_equal(y, [0, 10, 20])


def test_pythonbreakpoint_0_turns_kernel_breakpoints_off(monkeypatch, capsys):
    monkeypatch.setenv("PYTHONBREAKPOINT", "0")
    x = np.ones(4, dtype=np.float32)
    dsl.interpret(run_stops, x, np.zeros(2, dtype=np.int32))
    assert "breakpoint" not in capsys.readouterr().out
    np.testing.assert_array_equal(x, 2 * np.ones(4))


@dsl.kernel
def plain(x: Tensor[f32], n: Int32):
    i = dsl.thread_idx.x
    if i < n:
        doubled = x[i] * 2.0
        x[i] = doubled


@dsl.kernel
def plain_with_breakpoint(x: Tensor[f32], n: Int32):
    i = dsl.thread_idx.x
    if i < n:
        doubled = x[i] * 2.0
        breakpoint()
        x[i] = doubled


@dsl.jit
def run_plain(x: Tensor[f32]):
    plain(x, x.shape[0]).launch(grid=1, block=32)


@dsl.jit
def run_plain_with_breakpoint(x: Tensor[f32]):
    plain_with_breakpoint(x, x.shape[0]).launch(grid=1, block=32)


def _instructions(ptx: str, name: str) -> list[str]:
    """The PTX instructions, without line info and with the kernel's name blanked."""
    return [line.replace(name, "K") for line in ptx.splitlines()
            if line.strip() and not line.strip().startswith((".loc", ".file", "//", "$L__"))]


def test_the_gpu_build_drops_breakpoints():
    spec = dsl.TensorSpec(f32, shape=(32,))
    with_bp = dsl.compile(run_plain_with_breakpoint, spec)
    without = dsl.compile(run_plain, spec)
    assert "kdsl.breakpoint" in with_bp.traced  # the marker is in the traced IR, for the interpreter
    assert "kdsl.breakpoint" not in with_bp.lowered and "unrealized" not in with_bp.lowered
    assert _instructions(with_bp.ptx, "plain_with_breakpoint") == _instructions(without.ptx, "plain")


def test_quitting_pdb_at_a_kernel_breakpoint_ends_the_program_as_in_python(monkeypatch, capsys):
    import bdb

    import pytest

    monkeypatch.delenv("PYTHONBREAKPOINT", raising=False)
    monkeypatch.setattr(sys, "stdin", io.StringIO("q\n"))
    with pytest.raises(bdb.BdbQuit):
        dsl.interpret(run_stops, np.ones(4, dtype=np.float32), np.zeros(2, dtype=np.int32))
