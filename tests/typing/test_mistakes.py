"""Mistakes the DSL rejects are reported by pyright and mypy too (`data/mistakes.py`):
an unknown `dsl.` name, the operand mixes of DSL301, and a kernel launched with a wrong
number of arguments."""

from __future__ import annotations

import pytest

from tests.typing.checkers import DATA, line_of, run_mypy, run_pyright

SOURCE = DATA / "mistakes.py"


def _at(marker: str) -> int:
    return line_of(SOURCE, f"# {marker}")


@pytest.mark.parametrize("mode", ["basic", "standard"])
def test_pyright_reports_each_mistake(mode, tmp_path):
    assert run_pyright(SOURCE, mode, tmp_path).errors == [
        (_at("unknown_name"), '"barier" is not a known attribute of module "dsl"'),
        (_at("int_with_float"), 'Operator "+" not supported for types "i32" and "f32"'),
        (_at("mixed_signedness"), 'Operator "+" not supported for types "i32" and "u32"'),
        (_at("int_division"), 'Operator "/" not supported for types "i32" and "Literal[2]"'),
        (_at("float_literal_with_int"), 'Operator "+" not supported for types "i32" and "float"'),
        (_at("missing_argument"), 'Argument missing for parameter "n"'),
        (_at("extra_argument"), "Expected 3 positional arguments"),
    ]


def test_mypy_reports_each_mistake():
    assert run_mypy(SOURCE).errors == [
        (_at("unknown_name"), 'Module has no attribute "barier"; maybe "barrier"?  [attr-defined]'),
        (_at("int_with_float"),
         'No overload variant of "__add__" of "_Signed" matches argument type "f32"  [operator]'),
        (_at("mixed_signedness"),
         'No overload variant of "__add__" of "_Signed" matches argument type "u32"  [operator]'),
        (_at("int_division"), 'Unsupported operand types for / ("i32" and "int")  [operator]'),
        (_at("float_literal_with_int"),
         'No overload variant of "__add__" of "_Signed" matches argument type "float"  [operator]'),
        (_at("missing_argument"),
         'Missing positional argument "n" in call to "__call__" of "KernelFunction"  [call-arg]'),
        (_at("extra_argument"), 'Too many arguments for "__call__" of "KernelFunction"  [call-arg]'),
    ]
