"""Mistakes the DSL rejects are reported by pyright and mypy too (`data/mistakes.py`):
an unknown `dsl.` name, the operand mixes of DSL301 (fp8 arithmetic among them), a kernel
launched with a wrong number of arguments; for mypy also an index of the wrong rank and a
jit function called with a wrong number of arguments or an unknown keyword.

pyright reports neither of the last two, and the test says so: it cannot know a tensor's
rank (`Tensor[f32, 2]` is no type expression for it), and a jit call takes any arguments
for it (its parameters' annotations are no torch or CuPy arrays; only mypy's plugin can
keep their count and free their types). See `dsl/language/types.pyi` and `decorators.pyi`.
"""

from __future__ import annotations

import pytest

from tests.typing.checkers import DATA, line_of, run_mypy, run_pyright

SOURCE = DATA / "mistakes.py"
RANK_2 = 'Invalid index type "i32" for "TypedTensor[f32, Literal[2]]"; ' \
         'expected type "tuple[_Integer[Any] | int, _Integer[Any] | int]"  [index]'


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
        (_at("reflected_float_literal_with_int"), 'Operator "*" not supported for types "float" and "i32"'),
        (_at("fp8_arithmetic"), 'Operator "*" not supported for types "f8e4m3" and "Literal[2]"'),
        (_at("missing_argument"), 'Argument missing for parameter "n"'),
        (_at("extra_argument"), "Expected 4 positional arguments"),
    ]


def test_mypy_reports_each_mistake():
    assert run_mypy(SOURCE).errors == [
        (_at("unknown_name"), 'Module has no attribute "barier"; maybe "barrier"?  [attr-defined]'),
        (_at("int_with_float"), 'Unsupported operand types for + ("i32" and "f32")  [operator]'),
        (_at("mixed_signedness"), 'Unsupported operand types for + ("i32" and "u32")  [operator]'),
        (_at("int_division"), 'Unsupported operand types for / ("i32" and "int")  [operator]'),
        (_at("float_literal_with_int"), 'Unsupported operand types for + ("i32" and "float")  [operator]'),
        (_at("reflected_float_literal_with_int"), 'Unsupported operand types for * ("float" and "i32")  [operator]'),
        (_at("fp8_arithmetic"), 'Unsupported operand types for * ("f8e4m3" and "int")  [operator]'),
        (_at("rank_mismatch_store"), RANK_2),
        (_at("rank_mismatch_load"), RANK_2),
        (_at("missing_argument"),
         'Missing positional argument "n" in call to "__call__" of "KernelFunction"  [call-arg]'),
        (_at("extra_argument"), 'Too many arguments for "__call__" of "KernelFunction"  [call-arg]'),
        (_at("jit_missing_argument"),
         'Missing positional argument "a" in call to "__call__" of "JitFunction"  [call-arg]'),
        (_at("jit_extra_argument"), 'Too many positional arguments for "__call__" of "JitFunction"  [call-arg]'),
        (_at("jit_unknown_keyword"), 'Unexpected keyword argument "b" for "__call__" of "JitFunction"  [call-arg]'),
    ]
