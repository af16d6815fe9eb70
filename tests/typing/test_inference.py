"""The types pyright and mypy infer for correct kernel code (`data/inferred.py`).

Where they differ, the reason is one of three, each explained in `dsl/language/types.pyi`:
pyright cannot know a `Tensor`'s element type (`Tensor[f32, 2]` is no type expression for
it, so `Tensor` takes any subscript and its elements are `Any`; mypy reads it through
`dsl.mypy_plugin`); pyright gives a Python float on the left of a float value (`0.5 * h`,
`acc = 0.0; acc += v`) `float`'s own result, where mypy tries the value's reflected
operator first, as Python does for a subclass; and pyright keeps the empty start of a tuple
grown in an unrolled loop in its type. Everything else is the same in both.
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
    "widened_int_left": ("i64", T + "i64"),
    "constexpr": ("int", "int"),
    "float_parameter": ("f32 | float", T + "f32 | float"),
    "tensor_element": ("Any", T + "f32"),
    "tensor2_element": ("Any", T + "f32"),
    "vector_load": ("Vector[Any]", T + "Vector[" + T + "f32]"),
    "shape": ("i32", T + "i32"),
    "cast": ("f16", T + "f16"),
    "f16_with_bf16": ("f32", T + "f32"),
    "float_literal": ("f16", T + "f16"),
    "reflected_float_literal": ("float", T + "f16"),
    "widened_float": ("f64", T + "f64"),
    "widened_half": ("f32", T + "f32"),
    "math": ("f16", T + "f16"),
    "cast_call": ("f32", T + "f32"),
    "to": ("f32", T + "f32"),
    "bitcast_same_width": ("u32", T + "u32"),
    "bitcast_to_lanes": ("Vector[f16]", T + "Vector[" + T + "f16]"),
    "vector_lanes": ("Vector[f32]", T + "Vector[" + T + "f32]"),
    "shared_element": ("f32", T + "f32"),
    "accumulator": ("float", T + "f32"),
    "float_list_element": ("float", "float"),
    "grown_tuple": ("tuple[()] | tuple[f32, ...]", "tuple[" + T + "f32, ...]"),
    "cdiv": ("i32", T + "i32"),
    "host_min": ("int | i32", "int | " + T + "i32"),
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


def test_a_list_of_python_ints_takes_dsl_integers_in_mypy_only(tmp_path):
    """`acc = [0] * 4` filled with `i32` values (`data/int_lists.py`): mypy through the
    plugin; pyright reports each store, since a DSL integer is no `int` (if it were, an
    int-with-float mix and mixed signedness would pass unreported)."""
    source = DATA / "int_lists.py"
    assert run_mypy(source).errors == []
    i32_into_int = 'Argument of type "i32" cannot be assigned to parameter "{}" of type "int" in function "{}"'
    for mode in ("basic", "standard"):
        assert run_pyright(source, mode, tmp_path).errors == [
            (line_of(source, "# store"), i32_into_int.format("value", "__setitem__")),
            (line_of(source, "# store"), 'No overloads for "__setitem__" match the provided arguments'),
            (line_of(source, "# append"), i32_into_int.format("object", "append")),
            (line_of(source, "# insert"), i32_into_int.format("object", "insert")),
        ]
