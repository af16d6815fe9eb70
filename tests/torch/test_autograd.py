"""A kdsl operator with a backward made of kdsl kernels and a torch op:
`examples/pytorch/rmsnorm_torch.py`, RMSNorm's forward and backward kernels joined with
`register_autograd`. In float64 (the kernels take their element type from the tensors), run by
the interpreter: `gradcheck` compares the backward with finite differences, and the results with
torch's own RMSNorm; the example compiles to cubins with no diagnostics, as every example does.
Attention (`examples/pytorch/attention_torch.py`): the Hopper forward and backward kernels, run by
the interpreter on CPU bf16 tensors, give SDPA's output and gradients, and pass `opcheck`."""

from __future__ import annotations

from pathlib import Path

import pytest

import dsl


@pytest.fixture(scope="module")
def rmsnorm(torch):
    import rmsnorm_torch

    return rmsnorm_torch


def test_forward_and_gradients_equal_torchs_rms_norm_in_float64(torch, rmsnorm):
    x = torch.randn(6, 96, dtype=torch.float64, requires_grad=True)
    w = torch.randn(96, dtype=torch.float64, requires_grad=True)
    y = rmsnorm.rms_norm(x, w, 1e-5)
    (y * torch.linspace(-1, 1, 96, dtype=torch.float64)).sum().backward()
    x2, w2 = x.detach().requires_grad_(), w.detach().requires_grad_()
    expected = torch.nn.functional.rms_norm(x2, (96,), w2, eps=1e-5)
    (expected * torch.linspace(-1, 1, 96, dtype=torch.float64)).sum().backward()
    torch.testing.assert_close(y, expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(x.grad, x2.grad, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(w.grad, w2.grad, rtol=1e-10, atol=1e-12)


def test_gradcheck_passes_for_both_inputs(torch, rmsnorm):
    x = torch.randn(3, 40, dtype=torch.float64, requires_grad=True)
    w = torch.randn(40, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(rmsnorm.rms_norm, (x, w), eps=1e-6, atol=1e-8)


def test_opcheck_accepts_the_operators_with_their_autograd_registration(torch, rmsnorm):
    x = torch.randn(4, 64, dtype=torch.float64, requires_grad=True)
    w = torch.randn(64, dtype=torch.float64, requires_grad=True)
    torch.library.opcheck(rmsnorm.forward_op.custom_op, (x, w, 1e-6))
    y, rstd = rmsnorm.forward_op(x.detach(), w.detach(), 1e-6)
    torch.library.opcheck(rmsnorm.backward_op.custom_op, (torch.randn_like(y), x.detach(), w.detach(), rstd))
    schema = rmsnorm.forward_op.custom_op._opoverload._schema
    assert [(a.name, str(a.type), a.default_value) for a in schema.arguments] == [
        ("x", "Tensor", None), ("w", "Tensor", None), ("eps", "float", 1e-6)]
    assert [str(r.type) for r in schema.returns] == ["Tensor", "Tensor"]


def test_the_example_compiles_to_cubins_with_no_diagnostics(torch, rmsnorm):
    path = Path(rmsnorm.__file__)
    report = dsl.analyze_source(path.read_text(), str(path))
    assert [d.format() for d in report.all_diagnostics()] == []
    jits = [fn for fn in report.functions if fn.kind == "jit"]
    assert sorted(fn.name for fn in jits) == ["run_rmsnorm_backward", "run_rmsnorm_forward"]
    for fn in jits:
        assert fn.compiled is not None and fn.compiled.cubin and ".visible .entry" in fn.compiled.ptx
        resources = fn.compiled.kernels[0].resources
        assert resources is not None and resources.spill_stores == 0


@pytest.fixture(scope="module")
def attention(torch):
    import attention_torch

    return attention_torch


def _relative_error(got, want) -> float:
    return ((got.float() - want).norm() / want.norm()).item()


def test_attention_output_and_gradients_are_sdpas(torch, attention):
    """Two heads of 128 rows at head dim 64 (the backward's two key blocks and query tiles),
    causal (the interpreter's own tests cover the rest); SDPA in float32 on the same bf16
    values. bf16 results: about 0.25% relative error."""
    causal = True
    q, k, v = (torch.randn(2, 128, 64).bfloat16().requires_grad_() for _ in range(3))
    do = torch.randn_like(q)
    o = attention.attention(q, k, v, causal)
    grads = torch.autograd.grad(o, (q, k, v), do)
    leaves = [t.detach().float().requires_grad_() for t in (q, k, v)]
    want = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=causal)
    want_grads = torch.autograd.grad(want, leaves, do.float())
    assert o.dtype == torch.bfloat16 and _relative_error(o, want) < 5e-3
    for name, got, expected in zip("qkv", grads, want_grads):
        assert got.dtype == torch.bfloat16 and _relative_error(got, expected) < 5e-3, name


def test_the_attention_operators_pass_opcheck(torch, attention):
    q, k, v = (torch.randn(1, 128, 64).bfloat16() for _ in range(3))
    torch.library.opcheck(attention.forward_op.custom_op, (q.requires_grad_(), k, v, 64, True))
    o, lse = attention.forward_op(q.detach(), k, v, 64, True)
    assert lse.dtype == torch.float32 and lse.shape == (1, 128)
    torch.library.opcheck(attention.backward_op.custom_op, (q.detach(), k, v, o, torch.randn_like(o), lse, 64, True))
