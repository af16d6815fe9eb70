"""kdsl operators called eagerly on CPU tensors: the interpreter is their CPU kernel, so the
results are the jit function's own; the launcher's checks refuse a bad call with the user's
message and the operator's name; `torch.library.opcheck` accepts both forms. Fixtures:
`tests/torch/programs.py`."""

from __future__ import annotations

import numpy as np
import pytest

import dsl
import dsl.torch
from dsl.diagnostics import ArgumentError
from tests.torch import programs


def test_the_mutating_operator_updates_its_written_tensor_in_place(torch):
    x = torch.arange(100, dtype=torch.float32)
    y = torch.full((100,), 0.5)
    programs.run_saxpy.torch_op(x, y, 3.0)
    np.testing.assert_array_equal(y.numpy(), 3.0 * np.arange(100, dtype=np.float32) + 0.5)
    y2 = torch.zeros(5)
    programs.run_fill.torch_op(y2, 3, 2.0, SCALE=0.5)
    assert y2.tolist() == [1.0, 1.0, 1.0, 0.0, 0.0]


def test_the_functional_form_allocates_and_returns_its_outputs(torch):
    saxpy = dsl.torch.op(programs.run_saxpy, outputs={"y": lambda x: torch.ones_like(x)})
    x = torch.arange(10, dtype=torch.float32)
    y = saxpy(x, 2.0)
    assert y.tolist() == [2.0 * i + 1.0 for i in range(10)]
    assert str(saxpy.custom_op._opoverload._schema) == (
        "kdsl::run_saxpy_functional(Tensor x, float a, int BLOCK=64) -> Tensor")
    pick = dsl.torch.op(programs.run_pick_declared, outputs={"y": "x", "z": "x"}, name="pick_both")
    assert pick.name == "kdsl::pick_both"
    y, z = pick(x, WHICH=1)
    assert y.shape == z.shape == x.shape and z.tolist() == x.tolist()


def test_a_failing_assert_is_an_argument_error_naming_the_operator(torch):
    with pytest.raises(ArgumentError, match=r"y must have as many elements as x"):
        programs.run_saxpy.torch_op(torch.zeros(8), torch.zeros(9), 1.0)
    strided = torch.zeros(8, 2)[:, 0]
    with pytest.raises(ArgumentError, match=r"argument 'y' has innermost stride 2; kdsl tensors need a unit innermost"):
        programs.run_saxpy.torch_op(torch.zeros(8), strided, 1.0)


def test_a_specialization_writing_a_tensor_the_schema_reads_is_refused(torch):
    x, y, z = torch.ones(4), torch.zeros(4), torch.zeros(4)
    with pytest.raises(ArgumentError) as caught:
        programs.run_pick.torch_op(x, y, z, WHICH=1)
    assert "torch.ops.kdsl.run_pick (run_pick): this call's specialization writes 'z'" in str(caught.value)
    assert "@dsl.jit(examples=[...])" in str(caught.value)
    assert z.tolist() == [0.0] * 4  # refused before anything ran
    programs.run_pick_declared.torch_op(x, y, z, WHICH=1)  # its examples declare z
    assert z.tolist() == [1.0] * 4


def test_opcheck_accepts_the_mutating_and_the_functional_operator(torch):
    x, y = torch.randn(33), torch.randn(33)
    torch.library.opcheck(programs.run_saxpy.torch_op, (x, y, 2.0))
    torch.library.opcheck(programs.run_count_positive.torch_op, (x, torch.zeros(1, dtype=torch.int32)))
    pick = dsl.torch.op(programs.run_pick_declared, outputs={"z": lambda x: torch.zeros_like(x)})
    torch.library.opcheck(pick.custom_op, (x, y), {"WHICH": 1})
    assert torch.equal(pick(x, y, WHICH=1), x)


def test_outputs_are_refused_when_they_are_not_written_tensors_or_their_allocators_ask_for_no_input(torch):
    with pytest.raises(TypeError, match=r"output 'a' is not a tensor parameter of the function \(its tensors: x, y\)"):
        dsl.torch.op(programs.run_saxpy, outputs={"a": "x"})
    with pytest.raises(TypeError, match=r"output 'y'.s allocator takes 'shape', which is not an input"):
        dsl.torch.op(programs.run_saxpy, outputs={"y": lambda shape: torch.empty(shape)})
    with pytest.raises(TypeError, match=r"every tensor is an output, so the operator would take no tensor"):
        dsl.torch.op(programs.run_fill, outputs={"y": lambda n: torch.zeros(n)})
    with pytest.raises(TypeError, match=r"its kernels never write 'x'; an output is a tensor the kernels write"):
        dsl.torch.op(programs.run_saxpy, outputs={"x": "y"})  # with torch imported, registered (and refused) at once
    programs.run_saxpy.torch_op  # noqa: B018  # takes the name run_saxpy
    with pytest.raises(ValueError, match=r"torch.ops.kdsl.run_saxpy is already registered \(for tests.torch.programs"):
        dsl.torch.op(programs.run_count_positive, outputs={"total": "x"}, name="run_saxpy").custom_op  # noqa: B018
