"""How a program asks for the interpreter, and what it refuses: `KDSL_INTERPRET=1`,
`with dsl.interpret():`, `dsl.interpret(fn, *args)`; a function that does not compile does not
interpret either, with the compiler's own diagnostics.
"""

from __future__ import annotations

import numpy as np
import pytest

import dsl
from dsl import Int32, Tensor, f32
from dsl.compiler.api import compile_function
from dsl.diagnostics import CompileError
from dsl.runtime import driver


@dsl.kernel
def axpb(x: Tensor[f32], y: Tensor[f32], a: dsl.Float32, n: Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    if i < n:
        y[i] = a * x[i] + 1.0


@dsl.jit
def run_axpb(x: Tensor[f32], y: Tensor[f32], a: dsl.Float32):
    axpb(x, y, a, x.shape[0]).launch(grid=dsl.cdiv(x.shape[0], 128), block=128)


def expected(x: np.ndarray, a: float) -> np.ndarray:
    return np.float32(a) * x + np.float32(1.0)


def test_kdsl_interpret_routes_every_call(monkeypatch):
    monkeypatch.setenv("KDSL_INTERPRET", "1")
    x = np.arange(300, dtype=np.float32)
    y = np.zeros_like(x)
    run_axpb(x, y, 0.5)
    np.testing.assert_array_equal(y, expected(x, 0.5))
    run_axpb(x, y, 3.0)  # the same specialization again
    np.testing.assert_array_equal(y, expected(x, 3.0))


@dsl.autotune(configs=[dsl.Config(BLOCK=64), dsl.Config(BLOCK=256)], key=["x"])
@dsl.jit
def run_axpb_tuned(x: Tensor[f32], y: Tensor[f32], a: dsl.Float32, BLOCK: dsl.Constexpr[int] = 128):
    axpb(x, y, a, x.shape[0]).launch(grid=dsl.cdiv(x.shape[0], BLOCK), block=BLOCK)


def test_an_autotuned_function_runs_its_first_config_under_kdsl_interpret(monkeypatch):
    from dsl.runtime.autotune import tuner

    monkeypatch.setenv("KDSL_INTERPRET", "1")
    x = np.arange(1000, dtype=np.float32)
    y = np.zeros_like(x)
    run_axpb_tuned(x, y, 0.25)
    np.testing.assert_array_equal(y, expected(x, 0.25))
    assert tuner(run_axpb_tuned).trials == 0  # nothing was timed: there is no GPU time to measure


def test_the_context_manager_routes_calls_inside_it_only():
    x = np.arange(10, dtype=np.float32)
    y = np.zeros_like(x)
    with dsl.interpret():
        run_axpb(x, y, 2.0)
    np.testing.assert_array_equal(y, expected(x, 2.0))
    if not driver.available():  # outside, the call is a GPU call again: here that says there is no GPU
        with pytest.raises(driver.NoGPUError):
            run_axpb(x, y, 2.0)


def test_interpret_takes_jit_functions_only():
    with pytest.raises(TypeError, match="dsl.interpret runs @dsl.jit functions"):
        dsl.interpret(axpb, np.zeros(1, dtype=np.float32))


@dsl.kernel
def mistyped(x: Tensor[f32], n: Int32):
    i = dsl.thread_idx.x
    if i < n:
        x[i] = x[i] + n


@dsl.jit
def run_mistyped(x: Tensor[f32]):
    mistyped(x, x.shape[0]).launch(grid=1, block=32)


def test_a_function_that_does_not_compile_does_not_interpret_with_the_same_diagnostics():
    x = np.zeros(4, dtype=np.float32)
    _, compiled = compile_function(run_mistyped, (x,), {})
    with pytest.raises(CompileError) as caught:
        dsl.interpret(run_mistyped, x)
    assert caught.value.diagnostics == [d for d in compiled if d.is_error]
    assert [d.code for d in caught.value.diagnostics] == ["DSL301"]


def test_bf16_and_fp8_arrays_from_plain_numpy():
    with pytest.raises(TypeError, match="needs 2-byte integers for bf16"):
        dsl.interpreter.bits(np.zeros(4, dtype=np.float32), dsl.bf16)
    assert dsl.interpreter.bits(np.zeros((2, 3), dtype=np.uint16), dsl.bf16).shape == (2, 3)


def test_cpu_torch_tensors_run_in_place():
    torch = pytest.importorskip("torch")
    x = torch.arange(50, dtype=torch.float32)
    y = torch.zeros(50)
    dsl.interpret(run_axpb, x, y, 2.0)
    np.testing.assert_array_equal(y.numpy(), expected(x.numpy(), 2.0))
