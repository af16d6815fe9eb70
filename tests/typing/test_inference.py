"""The types pyright and mypy infer for correct kernel code (`data/inferred.py`).

pyright cannot know a `Tensor`'s element type (`Tensor[f32, 2]` is no type expression, so
`Tensor` takes any subscript and its elements are `Any`); mypy can, through
`dsl.mypy_plugin`. Everything else is the same in both.
"""

from __future__ import annotations

import pytest

from tests.typing.checkers import DATA, line_of, run_mypy, run_pyright

SOURCE = DATA / "inferred.py"
T = "dsl.language.types."

# marker -> (pyright, mypy)
EXPECTED = {
    "thread_idx": ("i32", T + "i32"),
    "index_arithmetic": ("i32", T + "i32"),
    "int_literal": ("i32", T + "i32"),
    "reflected_int_literal": ("i32", T + "i32"),
    "comparison": ("boolean", T + "boolean"),
    "widened_int": ("i64", T + "i64"),
    "constexpr": ("int", "int"),
    "float_parameter": ("f32 | float", T + "f32 | float"),
    "tensor_element": ("Any", T + "f32"),
    "tensor2_element": ("Any", T + "f32"),
    "vector_load": ("Vector[Any]", T + "Vector[" + T + "f32]"),
    "shape": ("i32", T + "i32"),
    "cast": ("f16", T + "f16"),
    "f16_with_bf16": ("f32", T + "f32"),
    "float_literal": ("f16", T + "f16"),
    "widened_float": ("f64", T + "f64"),
    "math": ("f16", T + "f16"),
    "cast_call": ("f32", T + "f32"),
    "to": ("f32", T + "f32"),
    "shared_element": ("f32", T + "f32"),
    # `0.0 + f32`: mypy applies Python's rule that a subclass's reflected operator goes first
    "accumulator": ("float", T + "f32"),
    "cdiv": ("i32", T + "i32"),
}


@pytest.mark.parametrize("mode", ["basic", "standard"])
def test_pyright_infers_the_dsl_types(mode, tmp_path):
    report = run_pyright(SOURCE, mode, tmp_path)
    assert report.errors == []
    got = {marker: report.revealed.get(line_of(SOURCE, f"# {marker}")) for marker in EXPECTED}
    assert got == {marker: types[0] for marker, types in EXPECTED.items()}


def test_mypy_infers_the_dsl_types():
    report = run_mypy(SOURCE)
    assert report.errors == []
    got = {marker: report.revealed.get(line_of(SOURCE, f"# {marker}")) for marker in EXPECTED}
    assert got == {marker: types[1] for marker, types in EXPECTED.items()}
