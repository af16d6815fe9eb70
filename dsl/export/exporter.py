"""From `FILE::JIT_FUNCTION` to an `Export`: which specializations, compiled for which targets.

The specializations of a jit function are, in this order of precedence: the `--example`
options (each a Python argument list, evaluated in the file's namespace with the `dsl`
names: `"x=Tensor[f16, 2], y=Tensor[f16, 2], BLOCK=256"`), the function's `examples=`, or
its annotations and defaults alone. Each is compiled for every target. A Constexpr
parameter whose value differs between them becomes an argument of the C entry point,
unless it is named in `choose` (`--choose NAME`): then the dispatcher chooses it, trying
the specializations most specific first (the most alignment asked of the tensors, then
the most run-time asserts) and launching the first whose checks the arguments pass.
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass
from typing import Any

from dsl.compiler.api import compile_function, parse_examples
from dsl.compiler.build_options import BuildOptions
from dsl.compiler.specs import resolve_params
from dsl.diagnostics import Diagnostic, DiagnosticSink
from dsl.export.launcher_plan import ExportRefused, read_launcher
from dsl.export.model import Build, FunctionExport, Specialization, params_from_plan
from dsl.frontend.params import ParamSpec
from dsl.frontend.source import function_source
from dsl.language.decorators import JitFunction


class ExportFailed(Exception):
    """Exporting failed; `diagnostics` are the compiler's, when it was the compiler."""

    def __init__(self, message: str, diagnostics: list[Diagnostic] | None = None):
        super().__init__(message)
        self.diagnostics = diagnostics or []


@dataclass
class _Compiled:
    params: list[ParamSpec]
    builds: list[Build]


def example_arguments(text: str, namespace: dict[str, Any]) -> tuple[tuple, dict]:
    """The arguments of one `--example` text: `"x=Tensor[f16, 2], BLOCK=256"` -> ((), {...})."""
    import dsl

    scope = {name: getattr(dsl, name) for name in dsl.__all__ if name not in ("analyze_source", "run_function",
                                                                              "load_export")}
    scope.update(namespace)
    try:
        return eval(f"(lambda *args, **kwargs: (args, kwargs))({text})", scope)  # the user's own expression
    except Exception as err:
        raise ExportFailed(f"--example {text!r}: {type(err).__name__}: {err}") from None


def export_function(fn: JitFunction, name: str, where: str, targets: list[str], examples: list[tuple[tuple, dict]],
                    choose: set[str]) -> FunctionExport:
    """Compiles every specialization of `fn` for every target and describes its entry point."""
    compiled = [_compile(fn, args, kwargs, targets) for args, kwargs in examples or _declared(fn)]
    unique: dict[tuple, _Compiled] = {}
    for c in compiled:
        unique.setdefault(tuple(p.key() for p in c.params), c)
    compiled = list(unique.values())
    kinds = {tuple((p.name, p.kind) for p in c.params) for c in compiled}
    if len(kinds) != 1:
        raise ExportFailed(f"{name}: its specializations disagree on which parameters are tensors, scalars or "
                           "Constexpr")
    constexpr_args = _constexpr_arguments(name, compiled, choose)
    signature = inspect.signature(fn.fn)
    defaults = {p: (v.default if v.default is not inspect.Parameter.empty else None)
                for p, v in signature.parameters.items()}
    try:
        params_of = [params_from_plan(c.builds[0].plan, {k: v[0] for k, v in constexpr_args.items()}, defaults)
                     for c in compiled]
    except ExportRefused as err:
        raise ExportFailed(f"{name}: {err}") from None
    for c, params in zip(compiled, params_of):
        if [(p.name, p.c_type) for p in params] != [(p.name, p.c_type) for p in params_of[0]]:
            raise ExportFailed(f"{name}: a scalar parameter has another type in [{_describe(c.params)}] than in "
                               f"[{_describe(compiled[0].params)}]; a C argument has one type")
    specs = []
    for i, c in enumerate(compiled):
        values = {k: v[i] for k, v in constexpr_args.items()}
        every = {p.name: p.value for p in c.params if p.kind == "constexpr"}
        specs.append(Specialization(_describe(c.params), values, c.builds, every))
    specs.sort(key=lambda s: s.specificity, reverse=True)  # stable: ties keep the order given
    written = sorted({t for s in specs for t, (_, _, w) in s.builds[0].plan.access.items() if w})
    return FunctionExport(name, fn.fn.__name__, where, params_of[0], specs, written)


def _declared(fn: JitFunction) -> list[tuple[tuple, dict]]:
    return [(args, kwargs) for args, kwargs, _ in parse_examples(fn)] or [((), {})]


def _describe(params: list[ParamSpec]) -> str:
    return ", ".join(p.describe() for p in params) or "no parameters"


def _compile(fn: JitFunction, args: tuple, kwargs: dict, targets: list[str]) -> _Compiled:
    sink = DiagnosticSink()
    params = resolve_params(fn, function_source(fn.fn), args, kwargs, sink)
    if params is None:
        raise ExportFailed(f"{fn.fn.__name__}: the specialization is not fully typed", sink.errors or sink.items)
    for p in params:
        if p.kind == "tensor_map":
            raise ExportFailed(f"{fn.fn.__name__}: parameter '{p.name}' is a tensor map; exported entry points take "
                               "tensors (map them inside the jit function with dsl.tensor_map)")
    builds: dict[str, Build] = {}
    for target in targets:
        compiled, diags = compile_function(fn, args, kwargs, target, until="cubin", options=BuildOptions(views=False))
        errors = [d for d in diags if d.is_error]
        if errors or compiled is None:
            raise ExportFailed(f"{fn.fn.__name__}({_describe(params)}) did not compile for {target}", errors or diags)
        if compiled.target in builds:  # sm_90 and sm_90a: one cubin when the kernels need sm_90a
            continue
        try:
            plan = read_launcher(compiled.stages["launcher"])
        except ExportRefused as err:
            raise ExportFailed(f"{fn.fn.__name__}: {err}") from None
        builds[compiled.target] = Build(compiled.target, plan, compiled.cubin, list(compiled.kernels))
    return _Compiled(params, list(builds.values()))


def _constexpr_arguments(name: str, compiled: list[_Compiled], choose: set[str]) -> dict[str, list[Any]]:
    """Constexpr name -> its value per specialization, for those the caller passes in C."""
    values: dict[str, list[Any]] = {}
    for c in compiled:
        for p in c.params:
            if p.kind == "constexpr":
                values.setdefault(p.name, []).append(p.value)
    unknown = choose - set(values)
    if unknown:
        raise ExportFailed(f"{name}: --choose {', '.join(sorted(unknown))}: not a Constexpr parameter of it "
                           f"(Constexpr parameters: {', '.join(values) or 'none'})")
    out = {}
    for param, seen in values.items():
        if param in choose or all(v == seen[0] and type(v) is type(seen[0]) for v in seen):
            continue
        kinds = {type(v) for v in seen}
        if len(kinds) != 1 or kinds.pop() not in (bool, int, float):
            raise ExportFailed(f"{name}: Constexpr '{param}' takes the values {', '.join(map(repr, seen))}; a C "
                               f"argument can carry one of int, float or bool (or pass --choose {param} to let the "
                               "entry point choose)")
        out[param] = seen
    return out


def relative(path: str) -> str:
    """`path` as the user reads it in messages: relative to the working folder when inside it."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel
