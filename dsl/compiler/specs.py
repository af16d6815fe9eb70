"""From call arguments, specs, annotations and defaults to a specialization's `ParamSpec`s.

This is where "compiling without data" happens: a parameter annotated `Tensor[f32, 2]`
needs no example, a `Constexpr` with a default needs none, and anything else needs an
argument, a `TensorSpec` or an `examples=` entry (DSL103 says so, with a fix).
"""

from __future__ import annotations

import ast
import inspect
from typing import Any

from dsl.diagnostics import Diagnostic, DiagnosticSink, Fix, SourceRange, TextEdit
from dsl.frontend.params import ParamSpec
from dsl.frontend.source import FunctionSource
from dsl.frontend.static_checks import (
    annotation_fixes,
    annotation_mismatch_message,
    mismatch_fixes,
    not_dsl_type_message,
)
from dsl.language.tensor_cores import TensorMapSpec
from dsl.language.types import (
    ConstexprType,
    DType,
    TensorSpec,
    TensorType,
    dtype_from_foreign,
    evaluate_annotation,
    f32,
    i32,
    is_dsl_annotation,
)

_EMPTY = inspect.Parameter.empty


def _array_spec(value: Any) -> tuple[DType, int] | None:
    """dtype and rank of an array-like argument (torch, CuPy, NumPy, JAX)."""
    dtype = getattr(value, "dtype", None)
    shape = getattr(value, "shape", None)
    if dtype is None or shape is None:
        return None
    dt = dtype_from_foreign(dtype)
    if dt is None:
        return None
    return dt, len(tuple(shape))


def resolve_params(fn: Any, src: FunctionSource, args: tuple, kwargs: dict, sink: DiagnosticSink,
                   example_range: SourceRange | None = None) -> list[ParamSpec] | None:
    """The specialization for these arguments, or None when some parameter lacks a type."""
    from dsl.language.decorators import JitFunction

    is_jit = isinstance(fn, JitFunction)
    context = "@jit" if is_jit else "@kernel"
    sig = inspect.signature(fn.fn)
    try:
        bound = sig.bind_partial(*args, **kwargs)
    except TypeError as err:
        rng = example_range or src.file.def_name_range(src.node)
        sink.add(Diagnostic.make("DSL301", f"{fn.fn.__name__}(): {err}", rng))
        return None
    arg_nodes = {a.arg: a for a in src.node.args.args + src.node.args.kwonlyargs}
    specs: list[ParamSpec] = []
    missing: list[ast.arg] = []
    for name, param in sig.parameters.items():
        ann = evaluate_annotation(fn.fn, param.annotation)
        node = arg_nodes.get(name)
        if ann is not _EMPTY and not is_dsl_annotation(ann) and node is not None and node.annotation is not None:
            text, rng = ast.unparse(node.annotation), src.file.range_of(node.annotation)
            sink.add(Diagnostic.make(
                "DSL102", not_dsl_type_message(context, name, text), rng,
                fixes=annotation_fixes(text, rng, param.default is not _EMPTY)))
        where = example_range or (src.file.range_of(node) if node is not None else src.file.def_name_range(src.node))
        if name in bound.arguments:
            ann_text = ast.unparse(node.annotation) if node is not None and node.annotation is not None else None
            ann_range = src.file.range_of(node.annotation) if ann_text is not None else None
            spec = _from_value(name, bound.arguments[name], ann, is_jit, sink, where, context, (ann_text, ann_range))
        else:
            spec = _from_annotation(name, ann, param.default, is_jit)
        if spec is None:
            if node is not None:
                missing.append(node)
            continue
        specs.append(spec)
    if missing:
        for node in missing:
            sink.add(_needs_examples(fn, src, node, is_jit))
        return None
    return specs


def _from_value(name: str, value: Any, ann: Any, is_jit: bool, sink: DiagnosticSink,
                where: SourceRange, context: str, annotation: tuple[str | None, SourceRange | None]
                ) -> ParamSpec | None:
    def mismatch(annotated: str, actual: str) -> None:
        sink.add(Diagnostic.make("DSL101", annotation_mismatch_message(context, name, annotated, actual), where,
                                 fixes=mismatch_fixes(annotation[0], annotated, actual, annotation[1])))

    if isinstance(ann, ConstexprType):
        return ParamSpec(name, "constexpr", value=value)
    if isinstance(value, TensorMapSpec):
        return ParamSpec(name, "tensor_map", value.dtype, len(value.box), (value.box, value.swizzle))
    if isinstance(value, TensorSpec | TensorType):
        spec = value.type if isinstance(value, TensorSpec) else value
        _check_tensor(ann, spec.dtype, spec.rank, mismatch)
        return ParamSpec(name, "tensor", spec.dtype, spec.rank)
    if isinstance(value, DType):
        if isinstance(ann, DType) and ann != value:
            mismatch(ann.name, value.name)
        return ParamSpec(name, "scalar", value)
    array = _array_spec(value)
    if array is not None:
        _check_tensor(ann, array[0], array[1], mismatch)
        return ParamSpec(name, "tensor", array[0], array[1])
    if isinstance(value, bool | int | float):
        if isinstance(ann, DType):
            if isinstance(value, float) and not ann.is_float:
                mismatch(ann.name, "f32")
                return ParamSpec(name, "scalar", f32)
            return ParamSpec(name, "scalar", ann)
        if is_jit:
            return ParamSpec(name, "constexpr", value=value)
        return ParamSpec(name, "scalar", f32 if isinstance(value, float) else i32)
    return ParamSpec(name, "constexpr", value=value)


def _check_tensor(ann: Any, dtype: DType, rank: int, mismatch: Any) -> None:
    if isinstance(ann, TensorType) and ann.dtype is not None and (ann.dtype != dtype or ann.rank != rank):
        mismatch(f"Tensor[{ann.dtype.name}, {ann.rank}]", f"Tensor[{dtype.name}, {rank}]")


def _from_annotation(name: str, ann: Any, default: Any, is_jit: bool) -> ParamSpec | None:
    if default is not _EMPTY:
        if isinstance(ann, DType):
            return ParamSpec(name, "scalar", ann)
        return ParamSpec(name, "constexpr", value=default)
    if isinstance(ann, TensorType) and ann.dtype is not None:
        return ParamSpec(name, "tensor", ann.dtype, ann.rank)
    if isinstance(ann, DType):
        return ParamSpec(name, "scalar", ann)
    return None


def _needs_examples(fn: Any, src: FunctionSource, node: ast.arg, is_jit: bool) -> Diagnostic:
    rng = src.file.range_of(node)
    if not is_jit:
        return Diagnostic.make(
            "DSL103", f"Parameter '{node.arg}' has no DSL type, so kernel '{fn.kernel_name}' cannot be compiled "
            "on its own; annotate it (e.g. Tensor[dsl.f32]) or launch it from a @jit function", rng)
    fixes = []
    for dec in src.node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        text = ast.unparse(target)
        if text.endswith("jit"):
            template = ", ".join(_example_for(a, src) for a in src.node.args.args)
            fixes.append(Fix("Add an examples= template", (TextEdit(
                src.file.range_of(dec), f"{text}(examples=[({template},)])"),)))
            break
    return Diagnostic.make(
        "DSL103", f"Parameter '{node.arg}' needs a type to compile without data; annotate it or add "
        "examples= to @dsl.jit", rng, fixes=fixes)


def _example_for(arg: ast.arg, src: FunctionSource) -> str:
    ann = ast.unparse(arg.annotation) if arg.annotation is not None else ""
    if "Tensor" in ann or not ann:
        return "dsl.TensorSpec(dsl.f32, shape=(1024,))"
    if "Constexpr" in ann:
        return "128"
    return "dsl.f32"

