"""What a `@jit` function settles at run time besides its launches: comparisons and
`and`/`or`/`not` on host values, `assert`s (launcher checks) and device attributes.

A mixin of `HostTracer`. Host values depend on the jit's arguments only (nothing a kernel
computes flows back to the host), so every `assert` is checked right after the launcher
reads the arguments and before its first launch, whatever its place in the function:
a failing one raises `ArgumentError` with the user's message and launches nothing. The
IR shows each check as `cf.assert`; `dsl.sm_count()` / `dsl.device_attribute(name)` are
calls of declared functions there, and `rt.device_attribute(name)` in the launcher.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from mlir import ir

from dsl.diagnostics import SourceRange
from dsl.frontend import arith as A
from dsl.frontend import ops
from dsl.frontend.host_values import PY_COMPARE, PY_SYMBOL, HostScalar, host_logical, py_expr, truth_expr
from dsl.frontend.values import DSLTypeError, Scalar
from dsl.language import device as D
from dsl.language.types import boolean, i32


@dataclass
class CheckRecord:
    """A run-time `assert` of the jit function: the launcher raises ArgumentError(message)."""

    condition: str  # Python expression over the launcher's locals
    message: str  # Python expression of the message
    range: SourceRange


class HostRunTimeFacts:
    """Host-tracer methods for run-time conditions, checks and device attributes."""

    def expr_Compare(self, node: ast.Compare) -> Any:
        result: Any = None
        left = self.eval(node.left)
        for op, comparator in zip(node.ops, node.comparators):
            right = self.eval(comparator)
            name = type(op).__name__
            if isinstance(left, Scalar) or isinstance(right, Scalar):
                if name in ("Is", "IsNot", "In", "NotIn"):
                    raise DSLTypeError(f"'{name}' comparisons need compile-time values")
                out = A.compare(name, left, right)
                value: Any = HostScalar(out.value, boolean, f"({py_expr(left)} {PY_SYMBOL[name]} {py_expr(right)})")
            else:
                value = PY_COMPARE[name](left, right)
            result = value if result is None else host_logical("And", result, value)
            left = right
        return result

    def expr_BoolOp(self, node: ast.BoolOp) -> Any:
        op = type(node.op).__name__
        result = self.eval(node.values[0])
        for value_node in node.values[1:]:
            if not isinstance(result, Scalar) and ((op == "And") != bool(result)):
                return result  # Python's short circuit on a compile-time value
            value = self.eval(value_node)
            result = value if not isinstance(result, Scalar) else host_logical(op, result, value)
        return result

    def stmt_Assert(self, stmt: ast.Assert) -> None:
        cond = self.eval(stmt.test)
        if not isinstance(cond, Scalar):  # settled while tracing
            if not cond:
                msg = self.eval(stmt.msg) if stmt.msg else "assertion failed while tracing"
                raise self.fail("DSL301", stmt, str(msg))
            return
        truth = A.truth(cond)
        condition = truth_expr(cond)
        text = ast.get_source_segment(self.frame.src.text, stmt.test) or ast.unparse(stmt.test)
        message = self._message(stmt.msg) if stmt.msg is not None else repr(f"assertion failed: {text}")
        if isinstance(stmt.msg, ast.Constant):
            shown = str(stmt.msg.value)
        elif stmt.msg is not None:  # an f-string: its source, as the launcher formats it at run time
            shown = ast.unparse(stmt.msg)
        else:
            shown = f"assertion failed: {text}"
        ops.create("cf.assert", operands=[truth.value], attributes={"msg": ir.StringAttr.get(shown)})
        self.state.checks.append(CheckRecord(condition, message, self.range(stmt)))

    def _message(self, node: ast.expr) -> str:
        """The Python expression of an assert's message; f-strings may format run-time values."""
        if not isinstance(node, ast.JoinedStr):
            value = self.eval(node)
            return f"str({py_expr(value)})" if isinstance(value, Scalar) else repr(str(value))
        parts = []
        for part in node.values:
            if not isinstance(part, ast.FormattedValue):
                parts.append(repr(part.value))  # type: ignore[attr-defined]
                continue
            spec = ""
            if part.format_spec is not None:
                pieces = part.format_spec.values  # type: ignore[attr-defined]
                if not all(isinstance(v, ast.Constant) for v in pieces):
                    raise self.fail("DSL302", part.format_spec, "a format spec must be a literal here")
                spec = "".join(str(v.value) for v in pieces)
            value = self.eval(part.value)
            convert = {-1: "", 115: "str", 114: "repr", 97: "ascii"}[part.conversion]
            if isinstance(value, Scalar):
                parts.append(f"format({convert}({py_expr(value)}), {spec!r})")
            else:
                shown = {"": value, "str": str(value), "repr": repr(value), "ascii": ascii(value)}[convert]
                parts.append(repr(format(shown, spec)))
        return "(" + " + ".join(parts or ["''"]) + ")"

    def device_attribute(self, name: Any) -> HostScalar:
        """A run-time i32 the launcher reads from the device; in the IR, a call of a declared
        function (the value is not known until the launch)."""
        try:
            name = D.check_attribute_name(name)
        except ValueError as err:
            raise DSLTypeError(str(err)) from None
        symbol = f"kdsl_device_attribute_{name}"
        if symbol not in self._declared and self.declare_at is not None:
            self._declared.add(symbol)
            with self.declare_at, ir.Location.unknown():
                ops.create("func.func", attributes={
                    "sym_name": ir.StringAttr.get(symbol), "sym_visibility": ir.StringAttr.get("private"),
                    "function_type": ir.TypeAttr.get(ir.FunctionType.get([], [i32.mlir_type()]))}, regions=1)
        value = ops.create("func.call", results=[i32.mlir_type()],
                           attributes={"callee": ir.FlatSymbolRefAttr.get(symbol)}).result
        return HostScalar(value, i32, f"rt.device_attribute({name!r})", True)
