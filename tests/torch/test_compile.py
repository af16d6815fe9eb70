"""kdsl operators inside `torch.compile(fullgraph=True)` on CPU tensors: a plain call of a jit
function, `fn.torch_op` and a functional form each trace into one graph (fullgraph raises on
any break; Dynamo's frame counter says one compile), with symbolic shapes under
`dynamic=True`; a failing `assert` fails at trace time with its message. Mostly the
`aot_eager` backend (functionalization and the fake kernels, no C++ compile); one test goes
through Inductor. Fixtures: `tests/torch/programs.py`."""

from __future__ import annotations

import numpy as np
import pytest

import dsl
import dsl.torch
from tests.torch import programs


def counting(torch):
    from torch._dynamo.testing import CompileCounterWithBackend

    return CompileCounterWithBackend("aot_eager")


def test_a_plain_call_of_a_jit_function_is_one_graph_with_no_break(torch):
    def model(x, y):
        programs.run_saxpy(x, y, 2.0)  # no dsl.torch in sight: the call becomes torch.ops.kdsl.run_saxpy
        return y * 3.0

    backend = counting(torch)
    x, y = torch.arange(40, dtype=torch.float32), torch.ones(40)
    out = torch.compile(model, fullgraph=True, backend=backend)(x, y)
    expected = 2.0 * np.arange(40, dtype=np.float32) + 1.0
    np.testing.assert_array_equal(y.numpy(), expected)  # the mutation reaches the caller's tensor
    np.testing.assert_array_equal(out.numpy(), 3.0 * expected)
    assert backend.frame_count == 1
    targets = [str(n.target) for g in backend.graphs for n in g.graph.nodes if n.op == "call_function"]
    assert targets == ["kdsl.run_saxpy", "<built-in function mul>"]


def test_dynamic_shapes_compile_once_and_symbolic_sizes_pass_as_symints(torch):
    def model(y, x):
        programs.run_fill.torch_op(y, x.shape[0], 5.0)  # n: a SymInt while tracing
        return y * 2.0

    backend = counting(torch)
    compiled = torch.compile(model, fullgraph=True, backend=backend, dynamic=True)
    for n in (7, 19):
        y = torch.zeros(n + 3)
        out = compiled(y, torch.ones(n))
        assert y.tolist() == [5.0] * n + [0.0] * 3
        assert out.tolist() == [10.0] * n + [0.0] * 3
    assert backend.frame_count == 1


def test_an_integer_argument_that_turns_symbolic_keeps_its_launch_arithmetic(torch):
    """A decode loop's position: the second value makes torch trace the int symbolically, and
    the launcher's truncating `dsl.cdiv(n + 1, 64)` compared two symbolic signs, which torch
    refused ("BooleanAtom not allowed")."""
    def model(y, n):
        programs.run_fill.torch_op(y, n + 1, 5.0)
        return y

    backend = counting(torch)
    compiled = torch.compile(model, fullgraph=True, backend=backend)
    for n in (10, 20, 30):
        y = torch.zeros(40)
        compiled(y, n)
        assert y.tolist() == [5.0] * (n + 1) + [0.0] * (39 - n)
    assert backend.frame_count == 2  # the first value specialized, then one symbolic graph for the rest


def test_a_functional_operator_with_autograd_compiles_forward_and_backward(torch):
    import rmsnorm_torch

    x = torch.randn(5, 64, requires_grad=True)
    w = torch.randn(64, requires_grad=True)
    backend = counting(torch)
    y = torch.compile(rmsnorm_torch.rms_norm, fullgraph=True, backend=backend)(x, w)
    y.square().sum().backward()
    x2, w2 = x.detach().requires_grad_(), w.detach().requires_grad_()
    expected = torch.nn.functional.rms_norm(x2, (64,), w2, eps=1e-6)
    expected.square().sum().backward()
    torch.testing.assert_close(y, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(x.grad, x2.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(w.grad, w2.grad, rtol=1e-4, atol=1e-4)
    assert backend.frame_count == 1


def test_a_failing_assert_fails_at_trace_time_with_its_message(torch):
    def model(x, y):
        programs.run_saxpy(x, y, 1.0)
        return y

    compiled = torch.compile(model, fullgraph=True, backend="aot_eager", dynamic=True)
    with pytest.raises(Exception, match=r"torch.ops.kdsl.run_saxpy \(run_saxpy\): y must have as many elements as x"):
        compiled(torch.zeros(8), torch.zeros(9))


def test_inductor_on_cpu_runs_the_operator_between_its_own_kernels(torch):
    saxpy = dsl.torch.op(programs.run_saxpy, outputs={"y": lambda x: torch.zeros_like(x)}, name="saxpy_inductor")

    def model(x):
        return saxpy(x.sin(), 2.0).cos()

    x = torch.linspace(-1.0, 1.0, 50)
    out = torch.compile(model, fullgraph=True)(x)
    torch.testing.assert_close(out, (2.0 * x.sin()).cos())
