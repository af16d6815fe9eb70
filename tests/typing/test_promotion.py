"""The stubs' operators give what the DSL's promotion rules give (`dsl.language.types.promote`,
the function the tracer applies), for every pair of scalar types and with Python literals,
in pyright (basic and standard modes) and mypy: the result type where the DSL mixes the two,
an error where it refuses them (DSL301).

A kernel-like file with one `reveal_type` per case is written for the test. The one place
the checkers differ is a Python float on the left of a float value (`0.5 + h`): pyright
gives `float` (see `dsl/language/types.pyi`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dsl.language.types import SCALAR_TYPES, DType, promote
from tests.typing.checkers import run_mypy, run_pyright

TYPES = sorted(SCALAR_TYPES.values(), key=lambda t: (t.kind, t.bits, t.name))
LITERALS = {"int": "2", "float": "0.5"}


def _name(t: DType) -> str:
    """The name `dsl` exports the type as (the run-time name of `boolean` is "bool")."""
    return "boolean" if t.is_bool else t.name


def _arithmetic(a: DType, b: DType) -> str | None:
    """The type of `a + b` in the DSL, or None where it is DSL301 (bool and fp8 do no arithmetic)."""
    if a.is_bool or b.is_bool or a.is_fp8 or b.is_fp8:
        return None
    result = promote(a, b)
    return _name(result) if result else None


def _with_literal(t: DType, literal: str) -> str | None:
    """The type of `t + literal`: the value's type; a float literal beside an integer is DSL301."""
    if t.is_bool or t.is_fp8 or (literal == "float" and not t.is_float):
        return None
    return _name(t)


def _cases() -> list[tuple[str, str | None, bool]]:
    """(expression, the DSL's result type or None, whether a Python float is on the left)."""
    cases: list[tuple[str, str | None, bool]] = []
    for a in TYPES:
        for b in TYPES:
            cases.append((f"v_{_name(a)} + v_{_name(b)}", _arithmetic(a, b), False))
            comparable = promote(a, b) is not None and not (a.is_fp8 or b.is_fp8)  # bools compare
            cases.append((f"v_{_name(a)} < v_{_name(b)}", "boolean" if comparable else None, False))
        for kind, text in LITERALS.items():
            result = _with_literal(a, kind)
            cases.append((f"v_{_name(a)} * {text}", result, False))
            cases.append((f"{text} * v_{_name(a)}", result, kind == "float"))
    return cases


def _write_source(folder: Path) -> tuple[Path, list[tuple[str, str | None, bool]]]:
    cases = _cases()
    names = ", ".join(_name(t) for t in TYPES)
    lines = ["from typing_extensions import reveal_type", "", f"from dsl import {names}", "",
             "def f(" + ", ".join(f"v_{_name(t)}: {_name(t)}" for t in TYPES) + ") -> None:"]
    lines += [f"    reveal_type({expression})" for expression, _, _ in cases]
    path = folder / "promotion.py"
    path.write_text("\n".join(lines) + "\n")
    return path, cases


FIRST_CASE_LINE = 6  # the line of the first `reveal_type` in the written file


@pytest.mark.parametrize("mode", ["basic", "standard"])
def test_pyright_follows_the_promotion_rules(mode, tmp_path):
    path, cases = _write_source(tmp_path)
    report = run_pyright(path, mode, tmp_path)
    errors = {line for line, _ in report.errors}
    got = {expr: None if line in errors else report.revealed.get(line)
           for line, (expr, _, _) in enumerate(cases, FIRST_CASE_LINE)}
    wanted = {expr: ("float" if float_left else result) if result else None for expr, result, float_left in cases}
    assert got == wanted


def test_mypy_follows_the_promotion_rules(tmp_path):
    path, cases = _write_source(tmp_path)
    report = run_mypy(path)
    errors = {line for line, _ in report.errors}
    got = {expr: None if line in errors else report.revealed.get(line, "").removeprefix("dsl.language.types.")
           for line, (expr, _, _) in enumerate(cases, FIRST_CASE_LINE)}
    assert got == {expr: result for expr, result, _ in cases}
