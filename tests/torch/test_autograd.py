"""A kdsl operator with a backward made of kdsl kernels and a torch op:
`examples/pytorch/rmsnorm_torch.py`, RMSNorm's forward and backward kernels joined with
`register_autograd`. In float64 (the kernels take their element type from the tensors), run by
the interpreter: `gradcheck` compares the backward with finite differences, and the results with
torch's own RMSNorm; the example compiles to cubins with no diagnostics, as every example does."""

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
