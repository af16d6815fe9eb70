"""mypy plugin: reads `Tensor[f32, 2]` as the typed tensor it stands for.

A bare int is no type expression, so mypy alone rejects `Tensor[f32, 2]` (and, since the
stubs give `Tensor` its own `__class_getitem__` for pyright's sake, `Tensor[f32]` too).
This hook turns `Tensor[dtype]` into `TypedTensor[dtype, Literal[1]]` and `Tensor[dtype, n]`
into `TypedTensor[dtype, Literal[n]]`, whose elements are `dtype` values. Enable it with

    [tool.mypy]
    plugins = ["dsl.mypy_plugin"]

Only mypy imports this module; `dsl` never does.
"""

from __future__ import annotations

from collections.abc import Callable

from mypy.plugin import AnalyzeTypeContext, Plugin
from mypy.types import AnyType, LiteralType, RawExpressionType, Type, TypeOfAny

TENSOR = "dsl.language.types.Tensor"
TYPED_TENSOR = "dsl.language.types.TypedTensor"
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


class KdslPlugin(Plugin):
    def get_type_analyze_hook(self, fullname: str) -> Callable[[AnalyzeTypeContext], Type] | None:
        return tensor_annotation_to_type if fullname == TENSOR else None


def plugin(version: str) -> type[Plugin]:
    return KdslPlugin
