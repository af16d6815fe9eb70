"""mypy plugin: what the DSL means that stubs alone cannot say to mypy.

- `Tensor[f32, 2]`: a bare int is no type expression, so mypy alone rejects it (and, since
  the stubs give `Tensor` its own `__class_getitem__` for pyright's sake, `Tensor[f32]`
  too). `Tensor[dtype]` becomes `TypedTensor[dtype, Literal[1]]` and `Tensor[dtype, n]`
  `TypedTensor[dtype, Literal[n]]`: elements are `dtype` values, indices count the rank.
- A jit function is called from plain Python with arrays of any library (torch, CuPy,
  NumPy) and Python numbers, which its annotations do not describe. Its call takes the
  function's own parameters, so a wrong argument count or keyword is still an error, but
  a parameter annotated with a DSL type takes any value; `stream=` is accepted too.
- `min` / `max` of Python ints and DSL integers in host code (`min(dsl.sm_count(), tiles)`)
  is one of them, not the comparison protocol mypy otherwise joins `int` and `i32` to.
- A per-thread array of Python ints (`acc = [0] * 4`, or `acc.append(k)` of a
  `static_range` index) is filled with DSL values later, as in the DSL, where each element
  becomes a register: `list[int]` takes DSL values in `__setitem__`, `append` and `insert`.

Enable it, together with `allow_redefinition` (a kernel's names are rebound to values of
other types as in Python: a tuple that grows, `v = x[i]` then `v = 0.0` in another branch):

    [tool.mypy]
    plugins = ["dsl.mypy_plugin"]
    allow_redefinition = true

Only mypy imports this module; `dsl` never does.
"""

from __future__ import annotations

from collections.abc import Callable

from mypy.nodes import ARG_NAMED_OPT, ARG_STAR2, TypeInfo
from mypy.plugin import AnalyzeTypeContext, FunctionContext, MethodSigContext, Plugin
from mypy.typeops import make_simplified_union
from mypy.types import (
    AnyType,
    CallableType,
    FunctionLike,
    Instance,
    LiteralType,
    Parameters,
    RawExpressionType,
    Type,
    TypeOfAny,
    UnionType,
    get_proper_type,
)

TYPES = "dsl.language.types"
TENSOR = f"{TYPES}.Tensor"
TYPED_TENSOR = f"{TYPES}.TypedTensor"
VALUE = f"{TYPES}._Value"
JIT_CALL = "dsl.language.decorators.JitFunction.__call__"
LIST_STORES = {"builtins.list.__setitem__": -1, "builtins.list.append": 0, "builtins.list.insert": 1}
NUMBERS = ("builtins.int", "builtins.float", "builtins.bool")
MAX_RANK = 8  # as `Tensor[...]` checks at run time


def tensor_annotation_to_type(ctx: AnalyzeTypeContext) -> Type:
    """`Tensor`, `Tensor[dtype]` or `Tensor[dtype, rank]` -> `TypedTensor[dtype, Literal[rank]]`."""
    args = list(ctx.type.args)
    int_type = ctx.api.named_type("builtins.int", [])
    if not args:  # bare `Tensor`: no dtype until `examples=` give one
        return ctx.api.named_type(TYPED_TENSOR, [AnyType(TypeOfAny.special_form)] * 2)
    if len(args) > 2:
        ctx.api.fail("Tensor[...] takes a dtype and an optional rank, e.g. Tensor[f32, 2]", ctx.context)
        return AnyType(TypeOfAny.from_error)
    rank = 1
    if len(args) == 2:
        raw = args[1]
        value = raw.literal_value if isinstance(raw, RawExpressionType) else None
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_RANK:
            ctx.api.fail(f"Tensor rank must be an int between 1 and {MAX_RANK}", ctx.context)
            return AnyType(TypeOfAny.from_error)
        rank = value
    return ctx.api.named_type(TYPED_TENSOR, [ctx.api.analyze_type(args[0]), LiteralType(rank, int_type)])


def _mentions_dsl_type(typ: Type) -> bool:
    """Whether `typ` is a DSL value or tensor type, or a union with one (`Int32` is `i32 | int`)."""
    proper = get_proper_type(typ)
    if isinstance(proper, UnionType):
        return any(_mentions_dsl_type(item) for item in proper.items)
    return isinstance(proper, Instance) and any(base.fullname in (VALUE, TYPED_TENSOR) for base in proper.type.mro)


def jit_call_signature(ctx: MethodSigContext) -> FunctionLike:
    """A jit function's call: its parameters, each DSL-typed one taking any value, and `stream=`."""
    instance = get_proper_type(ctx.type)
    params = get_proper_type(instance.args[0]) if isinstance(instance, Instance) and instance.args else None
    if not isinstance(params, Parameters | CallableType) or params.is_ellipsis_args:
        return ctx.default_signature
    anything = AnyType(TypeOfAny.explicit)
    arg_types = [anything if _mentions_dsl_type(t) else t for t in params.arg_types]
    arg_kinds, arg_names = list(params.arg_kinds), list(params.arg_names)
    if "stream" not in arg_names and ARG_STAR2 not in arg_kinds:
        arg_types.append(anything)
        arg_kinds.append(ARG_NAMED_OPT)
        arg_names.append("stream")
    return ctx.default_signature.copy_modified(arg_types=arg_types, arg_kinds=arg_kinds, arg_names=arg_names,
                                               variables=[])


def min_max_of_dsl_values(ctx: FunctionContext) -> Type:
    """`min(a, b, ...)` of ints and DSL values: the union of the operand types (as pyright says)."""
    operands = [get_proper_type(t) for types in ctx.arg_types for t in types]
    if len(operands) < 2 or not any(_mentions_dsl_type(t) for t in operands):
        return ctx.default_return_type
    if not all(_mentions_dsl_type(t) or (isinstance(t, Instance) and t.type.fullname in NUMBERS) for t in operands):
        return ctx.default_return_type
    return make_simplified_union(operands)


def _list_store_signature(position: int) -> Callable[[MethodSigContext], FunctionLike]:
    def widen(ctx: MethodSigContext) -> FunctionLike:
        """`list[int]` also stores DSL values (the argument at `position`: -1 is the last)."""
        signature = ctx.default_signature
        owner = get_proper_type(ctx.type)
        if not (isinstance(owner, Instance) and owner.args and signature.arg_types):
            return signature
        item = get_proper_type(owner.args[0])
        if not (isinstance(item, Instance) and item.type.fullname == "builtins.int"):
            return signature
        value = get_proper_type(signature.arg_types[position])
        if not (isinstance(value, Instance) and value.type.fullname == "builtins.int"):
            return signature  # e.g. the slice overload of __setitem__
        modules = getattr(ctx.api, "modules", {})  # the checker's loaded modules (not in the plugin interface)
        module = modules.get(TYPES)
        dsl_value = module.names.get("_Value") if module else None
        if dsl_value is None or not isinstance(dsl_value.node, TypeInfo):
            return signature  # a module that uses no DSL values
        arg_types = list(signature.arg_types)
        arg_types[position] = UnionType([value, Instance(dsl_value.node, [])])
        return signature.copy_modified(arg_types=arg_types)

    return widen


class KdslPlugin(Plugin):
    def get_type_analyze_hook(self, fullname: str) -> Callable[[AnalyzeTypeContext], Type] | None:
        return tensor_annotation_to_type if fullname == TENSOR else None

    def get_function_hook(self, fullname: str) -> Callable[[FunctionContext], Type] | None:
        return min_max_of_dsl_values if fullname in ("builtins.min", "builtins.max") else None

    def get_method_signature_hook(self, fullname: str) -> Callable[[MethodSigContext], FunctionLike] | None:
        if fullname == JIT_CALL:
            return jit_call_signature
        if fullname in LIST_STORES:
            return _list_store_signature(LIST_STORES[fullname])
        return None


def plugin(version: str) -> type[Plugin]:
    return KdslPlugin
