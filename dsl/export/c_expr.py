"""The launcher's Python expressions, translated into C that computes what Python computes.

The Python launcher evaluates its grid, block, shared-memory and argument expressions with
Python's numbers: unbounded integers, flooring `//` and `%`, doubles that raise on a
division by zero. The C keeps those meanings: integers are `int64_t` and every operation
that could leave 64 bits is checked (`kdsl_add`, `kdsl_mul`, ...: on overflow they record a
fault, which the entry point returns as an error, where Python would have computed a
value too large for any kernel parameter or grid anyway); `//` and `%` floor; the DSL's
truncating `rt.trunc_div` / `rt.trunc_mod` / `rt.cdiv` are their own helpers; floats are
`double`. The types follow Python's (int, float, bool) and are known here from the
names the launcher reads, so each operator picks its helper while translating.

Only the expressions `launcher_source` writes are accepted; any other construct raises
`ExportRefused` naming it, rather than being translated approximately.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass

from dsl.export.launcher_plan import ExportRefused

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True)
class CValue:
    """A translated expression: C source and its Python type.

    `type` is "int" (an `int64_t`), "float" (a `double`), "bool", "u64" (a `uint64_t`
    argument, read as an int where arithmetic needs it), "ptr" (a `CUdeviceptr`) or
    "tmap" (a `dsl.tensor_map` call, which only a kernel argument may be)."""

    code: str
    type: str
    tensor_map: tuple | None = None  # for "tmap": (tensor name, dtype, box, swizzle)


@dataclass(frozen=True)
class TensorRef:
    """A tensor parameter as C reaches it: `A->x` of type `const kdsl_tensor *`."""

    code: str
    rank: int


_INT_OPS = {"Add": "kdsl_add", "Sub": "kdsl_sub", "Mult": "kdsl_mul", "FloorDiv": "kdsl_floordiv",
            "Mod": "kdsl_mod", "LShift": "kdsl_lshift", "RShift": "kdsl_rshift"}
_FLOAT_OPS = {"Div": "kdsl_fdiv", "FloorDiv": "kdsl_ffloordiv", "Mod": "kdsl_fmod"}
_C_SYMBOL = {"Add": "+", "Sub": "-", "Mult": "*", "BitAnd": "&", "BitOr": "|", "BitXor": "^"}
_COMPARE = {"Eq": "==", "NotEq": "!=", "Lt": "<", "LtE": "<=", "Gt": ">", "GtE": ">="}
_COMPARE_CODE = {"Eq": "EQ", "NotEq": "NE", "Lt": "LT", "LtE": "LE", "Gt": "GT", "GtE": "GE"}  # KDSL_EQ, ... in C
_FLIPPED = {"Eq": "Eq", "NotEq": "NotEq", "Lt": "Gt", "LtE": "GtE", "Gt": "Lt", "GtE": "LtE"}
_TRUNCATING = {"trunc_div": "kdsl_trunc_div", "trunc_mod": "kdsl_trunc_mod", "cdiv": "kdsl_trunc_cdiv"}


def c_int(value: int) -> str:
    if not INT64_MIN < value <= INT64_MAX:
        raise ExportRefused(f"the integer {value} does not fit 64 bits")
    return str(value) if -(2**31) < value < 2**31 else f"INT64_C({value})"


def c_float(value: float) -> str:
    """A double literal the compiler reads back exactly (hexadecimal unless it is a small integer)."""
    if value != value or value in (float("inf"), float("-inf")):
        raise ExportRefused(f"the float {value!r} has no C literal here")
    if value.is_integer() and abs(value) < 2**53:
        return f"{value:.1f}"
    return f"{value.hex()} /* {value!r} */"


def c_string(text: str) -> str:
    """A C string literal of `text` (UTF-8, octal escapes: no escape can swallow a digit after it)."""
    out = []
    for byte in text.encode():
        ch = chr(byte)
        if ch in '"\\?':
            out.append("\\" + ch)
        elif 32 <= byte < 127:
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


class ExprTranslator:
    """Translates one launcher's expressions; `names` are the scalars it reads, `tensors`
    its tensor parameters, `attribute(name)` the C of a device attribute's value."""

    def __init__(self, names: dict[str, CValue], tensors: dict[str, TensorRef], attribute: Callable[[str], str]):
        self.names = names
        self.tensors = tensors
        self.attribute = attribute

    # ----- values --------------------------------------------------------------------------
    def expr(self, node: ast.expr) -> CValue:
        method = getattr(self, f"_{type(node).__name__}", None)
        if method is None:
            raise ExportRefused(f"the launcher expression `{ast.unparse(node)}` ({type(node).__name__}) has no C "
                                "translation")
        return method(node)

    def _Constant(self, node: ast.Constant) -> CValue:
        v = node.value
        if isinstance(v, bool):
            return CValue("true" if v else "false", "bool")
        if isinstance(v, int):
            return CValue(c_int(v), "int")
        if isinstance(v, float):
            return CValue(c_float(v), "float")
        raise ExportRefused(f"the constant {v!r} is not a number")

    def _Name(self, node: ast.Name) -> CValue:
        found = self.names.get(node.id)
        if found is None:
            raise ExportRefused(f"the launcher reads `{node.id}`, which is not one of its parameters")
        return found

    def _Subscript(self, node: ast.Subscript) -> CValue:
        base, index = node.value, node.slice
        if isinstance(base, ast.Name) and isinstance(index, ast.Constant) and isinstance(index.value, int):
            for field in ("shape", "strides"):
                tensor = self.tensors.get(base.id.removesuffix(f"_{field}")) if base.id.endswith(f"_{field}") \
                    else None
                if tensor is not None and 0 <= index.value < tensor.rank:
                    return CValue(f"{tensor.code}->{field}[{index.value}]", "int")
        raise ExportRefused(f"`{ast.unparse(node)}` is not an extent or stride of a tensor parameter")

    def _BinOp(self, node: ast.BinOp) -> CValue:
        op = type(node.op).__name__
        a, b = self.expr(node.left), self.expr(node.right)
        if op == "Pow":
            raise ExportRefused("`**` on run-time values in the launcher (Python may answer a complex number)")
        if self._is_int(a) and self._is_int(b):
            if op in ("BitAnd", "BitOr", "BitXor"):
                kind = "bool" if a.type == b.type == "bool" else "int"
                return CValue(f"({self._as(a, kind)} {_C_SYMBOL[op]} {self._as(b, kind)})", kind)
            if op == "Div":
                return CValue(f"kdsl_truediv(ev, {self.as_int(a)}, {self.as_int(b)})", "float")
            return CValue(f"{_INT_OPS[op]}(ev, {self.as_int(a)}, {self.as_int(b)})", "int")
        if op in ("LShift", "RShift", "BitAnd", "BitOr", "BitXor"):
            raise ExportRefused(f"`{ast.unparse(node)}`: Python refuses this operator on floats")
        x, y = self.as_float(a), self.as_float(b)
        if op in _FLOAT_OPS:
            return CValue(f"{_FLOAT_OPS[op]}(ev, {x}, {y})", "float")
        return CValue(f"({x} {_C_SYMBOL[op]} {y})", "float")

    def _UnaryOp(self, node: ast.UnaryOp) -> CValue:
        operand = node.operand
        if isinstance(node.op, ast.USub):
            # -(-a // b): the launcher's ceiling division of two non-negative values
            if isinstance(operand, ast.BinOp) and isinstance(operand.op, ast.FloorDiv) and \
                    isinstance(operand.left, ast.UnaryOp) and isinstance(operand.left.op, ast.USub):
                a, b = self.expr(operand.left.operand), self.expr(operand.right)
                if self._is_int(a) and self._is_int(b):
                    return CValue(f"kdsl_ceil_div(ev, {self.as_int(a)}, {self.as_int(b)})", "int")
            a = self.expr(operand)
            if self._is_int(a):
                return CValue(f"kdsl_neg(ev, {self.as_int(a)})", "int")
            return CValue(f"(-{self.as_float(a)})", "float")
        if isinstance(node.op, ast.Not):
            return CValue(f"(!{self.truth(self.expr(operand))})", "bool")
        raise ExportRefused(f"the operator of `{ast.unparse(node)}` has no C translation here")

    def _Compare(self, node: ast.Compare) -> CValue:
        if len(node.ops) != 1:
            raise ExportRefused(f"the chained comparison `{ast.unparse(node)}`")
        op = type(node.ops[0]).__name__
        if op not in _COMPARE:
            raise ExportRefused(f"`{ast.unparse(node)}`: only ==, !=, <, <=, >, >= compare run-time values")
        a, b = self.expr(node.left), self.expr(node.comparators[0])
        if self._is_int(a) and self._is_int(b):
            return CValue(f"({self.as_int(a)} {_COMPARE[op]} {self.as_int(b)})", "bool")
        if a.type == b.type == "float":
            return CValue(f"({a.code} {_COMPARE[op]} {b.code})", "bool")
        # an int and a float compare exactly in Python (not as two doubles)
        if self._is_int(a):
            return CValue(f"kdsl_cmp_if({self.as_int(a)}, {self.as_float(b)}, KDSL_{_COMPARE_CODE[op]})", "bool")
        return CValue(f"kdsl_cmp_if({self.as_int(b)}, {self.as_float(a)}, KDSL_{_COMPARE_CODE[_FLIPPED[op]]})", "bool")

    def _BoolOp(self, node: ast.BoolOp) -> CValue:
        parts = [self.expr(v) for v in node.values]
        if any(p.type != "bool" for p in parts):
            raise ExportRefused(f"`{ast.unparse(node)}`: `and`/`or` of values that are not bools")
        word = " && " if isinstance(node.op, ast.And) else " || "
        return CValue("(" + word.join(p.code for p in parts) + ")", "bool")

    def _Call(self, node: ast.Call) -> CValue:
        fn = node.func
        if node.keywords:
            raise ExportRefused(f"the call `{ast.unparse(node)}` with keywords")
        if isinstance(fn, ast.Attribute) and getattr(fn.value, "id", None) == "rt":
            return self._runtime_call(fn.attr, node)
        name = fn.id if isinstance(fn, ast.Name) else None
        if name in ("min", "max") and len(node.args) >= 2:
            return self._min_max(name, [self.expr(a) for a in node.args], node)
        if name in ("float", "int", "bool") and len(node.args) == 1:
            v = self.expr(node.args[0])
            if name == "float":
                return CValue(self.as_float(v), "float")
            if name == "bool":
                return CValue(self.truth(v), "bool")
            if v.type == "float":
                return CValue(f"kdsl_float_to_int(ev, {v.code})", "int")
            return CValue(self.as_int(v), "int")
        raise ExportRefused(f"the call `{ast.unparse(node)}` has no C translation")

    def _runtime_call(self, attr: str, node: ast.Call) -> CValue:
        if attr in _TRUNCATING and len(node.args) == 2:
            a, b = (self.expr(x) for x in node.args)
            if not (self._is_int(a) and self._is_int(b)):
                raise ExportRefused(f"`{ast.unparse(node)}` on floats")
            return CValue(f"{_TRUNCATING[attr]}(ev, {self.as_int(a)}, {self.as_int(b)})", "int")
        if attr == "device_attribute" and len(node.args) == 1 and isinstance(node.args[0], ast.Constant):
            return CValue(self.attribute(str(node.args[0].value)), "int")
        if attr == "tensor_map" and len(node.args) == 6:
            ptr, shape, strides, dtype, box, swizzle = node.args
            names = [getattr(a, "id", "") for a in (ptr, shape, strides)]
            tensor = names[0].removesuffix("_ptr")
            if names != [f"{tensor}_ptr", f"{tensor}_shape", f"{tensor}_strides"] or tensor not in self.tensors:
                raise ExportRefused(f"`{ast.unparse(node)}` does not map one tensor parameter")
            spec = (tensor, ast.literal_eval(dtype), tuple(ast.literal_eval(box)), ast.literal_eval(swizzle))
            return CValue(self.tensors[tensor].code, "tmap", spec)
        raise ExportRefused(f"the runtime call `{ast.unparse(node)}` has no C translation")

    def _min_max(self, name: str, values: list[CValue], node: ast.Call) -> CValue:
        """Python's min/max keep the first extreme value (a NaN first stays)."""
        kinds = {"int" if self._is_int(v) and v.type != "bool" else v.type for v in values}
        if len(kinds) != 1:
            raise ExportRefused(f"`{ast.unparse(node)}` mixes ints and floats: its result's type depends on the values")
        kind = kinds.pop()
        helper = f"kdsl_{name}_{'f' if kind == 'float' else 'i'}"
        acc = values[0]
        for v in values[1:]:
            a, b = (self.as_float(acc), self.as_float(v)) if kind == "float" else (self._as(acc, kind),
                                                                                    self._as(v, kind))
            acc = CValue(f"{helper}({a}, {b})" if kind != "bool" else f"({b} {'<' if name == 'min' else '>'} {a} ? "
                         f"{b} : {a})", kind)
        return acc

    # ----- conversions ---------------------------------------------------------------------
    @staticmethod
    def _is_int(v: CValue) -> bool:
        return v.type in ("int", "bool", "u64")

    def as_int(self, v: CValue) -> str:
        if v.type == "int":
            return v.code
        if v.type == "bool":
            return f"(int64_t){v.code}"
        if v.type == "u64":
            return f"kdsl_u64_to_int(ev, {v.code})"
        raise ExportRefused(f"a {v.type} where the launcher computes with an integer")

    def as_float(self, v: CValue) -> str:
        if v.type == "float":
            return v.code
        if self._is_int(v):
            return f"(double){self.as_int(v) if v.type == 'u64' else v.code}"
        raise ExportRefused(f"a {v.type} where the launcher computes with a float")

    def _as(self, v: CValue, kind: str) -> str:
        return v.code if kind == "bool" else self.as_int(v)

    def truth(self, v: CValue) -> str:
        """Python's truth of a value, as a C bool expression."""
        if v.type == "bool":
            return v.code
        if v.type in ("int", "u64"):
            return f"({v.code} != 0)"
        if v.type == "float":
            return f"({v.code} != 0.0)"
        raise ExportRefused(f"the truth of a {v.type}")

    # ----- assert messages -----------------------------------------------------------------
    def message(self, node: ast.expr) -> list[str]:
        """C statements appending the message `node` computes to the message builder `msg`."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [f"kdsl_msg_text(msg, {c_string(node.value)});"] if node.value else []
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.message(node.left) + self.message(node.right)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
            fn = node.func.id
            if fn in ("str", "repr", "ascii") and len(node.args) == 1:
                return [self._append(self.expr(node.args[0]), "")]
            if fn == "format" and len(node.args) == 2 and isinstance(node.args[1], ast.Constant):
                inner, spec = node.args[0], str(node.args[1].value)
                if isinstance(inner, ast.Call) and getattr(inner.func, "id", None) in ("str", "repr", "ascii"):
                    if spec:
                        raise ExportRefused(f"the format spec {spec!r} of a converted value in an assert message")
                    return [self._append(self.expr(inner.args[0]), "")]
                return [self._append(self.expr(inner), spec)]
        raise ExportRefused(f"the assert message `{ast.unparse(node)}` has no C translation")

    _SPEC = re.compile(r"(?P<zero>0)?(?P<width>[1-9][0-9]*)?(?:\.(?P<precision>[0-9]+))?(?P<kind>[dxfe]?)")

    def _append(self, v: CValue, spec: str) -> str:
        """`str(v)` or `format(v, spec)` for the specs whose C rendering equals Python's."""
        match = self._SPEC.fullmatch(spec)
        if match is None:
            raise ExportRefused(f"the format spec {spec!r} in an assert message")
        zero, width = bool(match["zero"]), int(match["width"] or 0)
        precision, kind = match["precision"], match["kind"]
        if v.type == "bool" and not spec:
            return f"kdsl_msg_bool(msg, {v.code});"
        if self._is_int(v) and kind in ("", "d", "x") and precision is None:
            base = 16 if kind == "x" else 10
            return f"kdsl_msg_int(msg, {self.as_int(v)}, {base}, {width}, {int(zero)});"
        if (v.type == "float" and kind in ("", "f", "e")) or (self._is_int(v) and kind in ("f", "e")):
            if not kind and (precision is not None or zero or width):
                raise ExportRefused(f"the format spec {spec!r} of a float in an assert message")
            digits = int(precision) if precision is not None else 6
            return f"kdsl_msg_float(msg, {self.as_float(v)}, '{kind or 'r'}', {digits}, {width}, {int(zero)});"
        raise ExportRefused(f"the format spec {spec!r} of a {v.type} in an assert message")
