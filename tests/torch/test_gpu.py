"""kdsl operators on CUDA tensors (an NVIDIA GPU that kdsl and torch both see; skipped elsewhere):
the operators launch on torch's current stream, so they work under `torch.compile` with
Inductor, with `mode="reduce-overhead"` (CUDA graphs) and in a hand-made CUDA graph once
warmed up, while a first call inside a capture is refused, naming the function; RMSNorm's
kdsl forward and backward agree with torch's at a real shape. Fixtures: `tests/torch/programs.py`,
`examples/pytorch/rmsnorm_torch.py`."""

from __future__ import annotations

import pytest

import dsl
import dsl.torch
from tests.torch import programs

pytestmark = pytest.mark.gpu


def test_the_mutating_operator_runs_on_the_gpu(cuda):
    torch = cuda
    x = torch.randn(10_000, device="cuda")
    y = torch.randn(10_000, device="cuda")
    expected = 2.5 * x + y
    programs.run_saxpy.torch_op(x, y, 2.5)
    torch.testing.assert_close(y, expected)


def test_a_first_call_inside_a_cuda_graph_capture_is_refused_naming_the_function(cuda):
    torch = cuda
    x = torch.randn(4096, device="cuda")
    y = torch.zeros(4096, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(dsl.torch.CaptureError) as caught, torch.cuda.graph(graph):
        programs.run_saxpy.torch_op(x, y, 1.0, BLOCK=128)  # BLOCK=128: a specialization no call has compiled
    assert "torch.ops.kdsl.run_saxpy (run_saxpy)" in str(caught.value)
    assert "call it once before capturing" in str(caught.value)


def test_after_a_warm_up_call_the_operator_is_captured_and_replayed(cuda):
    torch = cuda
    x = torch.randn(4096, device="cuda")
    y = torch.zeros(4096, device="cuda")
    programs.run_saxpy.torch_op(x, y, 3.0, BLOCK=256)  # warm-up: compiles and loads
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        programs.run_saxpy.torch_op(x, y, 3.0, BLOCK=256)
    y.zero_()
    graph.replay()
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(y, 6.0 * x)


@pytest.mark.parametrize("call", ["torch_op", "plain"])
def test_torch_compile_fullgraph_with_inductor_on_cuda_tensors(cuda, call):
    torch = cuda
    saxpy = programs.run_saxpy.torch_op if call == "torch_op" else programs.run_saxpy  # plain: the Dynamo stand-in

    def model(x, y):
        saxpy(x.relu(), y, 2.0)
        return y.sigmoid()

    x, y = torch.randn(5000, device="cuda"), torch.randn(5000, device="cuda")
    expected = (2.0 * x.relu() + y).sigmoid()
    out = torch.compile(model, fullgraph=True, dynamic=True)(x, y)
    torch.testing.assert_close(out, expected)


def test_reduce_overhead_runs_the_functional_operator_in_cuda_graphs(cuda):
    torch = cuda
    import rmsnorm_torch

    x = torch.randn(512, 1024, device="cuda")
    w = torch.randn(1024, device="cuda")
    compiled = torch.compile(rmsnorm_torch.rms_norm, mode="reduce-overhead", fullgraph=True)
    expected = torch.nn.functional.rms_norm(x, (1024,), w, eps=1e-6)
    for _ in range(4):  # warm-up runs, then recorded and replayed
        out = compiled(x, w)
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


def test_rmsnorm_forward_and_backward_match_torch_at_a_real_shape(cuda):
    torch = cuda
    import rmsnorm_torch

    x = torch.randn(2048, 4096, device="cuda", requires_grad=True)
    w = torch.randn(4096, device="cuda", requires_grad=True)
    grad = torch.randn(2048, 4096, device="cuda")
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    expected = torch.nn.functional.rms_norm(x2, (4096,), w2, eps=1e-6)
    expected.backward(grad)
    for fn in (rmsnorm_torch.rms_norm, torch.compile(rmsnorm_torch.rms_norm, fullgraph=True)):
        x.grad = w.grad = None
        y = fn(x, w)
        y.backward(grad)
        torch.testing.assert_close(y, expected, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(x.grad, x2.grad, rtol=1e-3, atol=1e-3)
        torch.testing.assert_close(w.grad, w2.grad, rtol=1e-3, atol=5e-2)  # a sum over 2048 rows


@pytest.mark.parametrize("causal", [False, True])
def test_attention_forward_and_backward_match_sdpa_at_a_real_shape(cuda, causal):
    """`examples/pytorch/attention_torch.py`: kdsl's forward and backward kernels joined by
    `register_autograd`, eager and under `torch.compile(fullgraph=True)`, against SDPA's."""
    torch = cuda
    import attention_torch

    F = torch.nn.functional
    q, k, v = (torch.randn(16, 2048, 128, device="cuda").bfloat16().requires_grad_() for _ in range(3))
    do = torch.randn_like(q)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    want_grads = torch.autograd.grad(want, (q, k, v), do)
    for fn in (attention_torch.attention, torch.compile(attention_torch.attention, fullgraph=True)):
        o = fn(q, k, v, causal)
        grads = torch.autograd.grad(o, (q, k, v), do)
        torch.testing.assert_close(o, want, rtol=2e-2, atol=2e-2)
        for got, expected in zip(grads, want_grads):
            torch.testing.assert_close(got, expected, rtol=2e-2, atol=3e-2)
