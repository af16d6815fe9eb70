"""A `@dsl.jit` call run by the interpreter: compile as for the GPU, then run the launcher on the CPU.

The function is compiled by the real compiler up to PTX (`dsl.compiler.api.compile_function`,
`until="ptx"`): tracing, verification and the NVVM lowering run exactly as for a GPU run, so
a program that does not compile does not interpret either, with the same diagnostics at the
same ranges. Only ptxas (register allocation, resource figures) is left out: the interpreter
needs no CUDA toolkit. Then the generated launcher runs with an `InterpreterRuntime`, and each
kernel's traced `gpu.func` becomes a `Program` (built once per traced module and kernel).

Specializations are cached per jit function, keyed as GPU calls are (`jit_call.call_key`).
"""

from __future__ import annotations

import re
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from dsl.diagnostics import CompileError, Diagnostic, DiagnosticWarning, SourceRange
from dsl.interpreter.mode import require_numpy

require_numpy()  # before the modules that compute with it, so a missing NumPy says what to install

from dsl.interpreter.program import Program, Refusal, RefusedKernel  # noqa: E402

_CACHE_SIZE = 64
_modules: OrderedDict[str, _Module] = OrderedDict()
_modules_lock = threading.Lock()
_contexts = threading.local()


@dataclass
class Interpreted:
    """One interpreted specialization of a jit function."""

    launch: Any
    plan: list
    compiled: Any
    writes: tuple[str, ...] = ()  # the tensor parameters its kernels write (the launcher's TENSOR_ACCESS)


class _Module:
    """A traced module parsed for the interpreter, and the programs built from its kernels."""

    def __init__(self, traced: str, source_map: Any, lowered: str, kernels: dict[str, SourceRange | None]):
        from mlir import ir

        from dsl.compiler.api import DIALECTS
        from dsl.frontend.ops import generic_views

        ctx = getattr(_contexts, "context", None)
        if ctx is None:  # as the compiler's: its dialects only, and no typed Python op classes
            ctx = _contexts.context = ir.Context(load_on_create_dialects=[])  # type: ignore[call-arg]
            for name in DIALECTS:
                ctx.get_dialect_descriptor(name)
        self.context = ctx
        with generic_views():
            self.module = ir.Module.parse(traced, ctx)
        self.source_map = source_map
        self.ftz = set(re.findall(r'llvm\.func @(\w+)\([^\n]*denormal_fp_math_f32 = "preserve-sign"', lowered))
        self.kernel_ranges = kernels
        self.programs: dict[str, Program] = {}
        self.lock = threading.Lock()

    def program(self, symbol: str) -> Program:
        with self.lock:
            found = self.programs.get(symbol)
            if found is None:
                found = self.programs[symbol] = self._build(symbol)
            return found

    def _build(self, symbol: str) -> Program:
        from mlir import ir

        from dsl.frontend.ops import generic_views
        from dsl.interpreter import arith_ops, cast_ops, control_flow, gpu_ops, llvm_ops
        from dsl.interpreter.program import build_program

        makers = {**arith_ops.MAKERS, **cast_ops.MAKERS, **control_flow.MAKERS, **gpu_ops.MAKERS, **llvm_ops.MAKERS}
        with generic_views():
            tops = [op.operation for op in self.module.body.operations]
        for top in tops:
            if top.name != "gpu.module":
                continue
            with generic_views():
                ops = [op.operation for op in top.regions[0].blocks[0].operations]
            for op in ops:
                if op.name == "gpu.func" and ir.StringAttr(op.attributes["sym_name"]).value == symbol:
                    with self.context, generic_views():
                        try:
                            return build_program(op, ops, self.source_map, makers, symbol in self.ftz)
                        except Refusal as refusal:
                            raise self._refused(symbol, [refusal]) from None
                        except RefusedKernel as refused:
                            raise self._refused(symbol, refused.refusals) from None
        raise KeyError(symbol)


    def _refused(self, symbol: str, refusals: list[Refusal]) -> CompileError:
        """DSL402 at each op the interpreter cannot run (the kernel's def when it has no location)."""
        fallback = self.kernel_ranges.get(symbol)
        diagnostics = []
        for r in refusals:
            where = r.where or fallback
            if where is not None:
                diagnostics.append(Diagnostic.make("DSL402", f"kernel '{symbol}': {r.message}", where))
        return CompileError(diagnostics)


def _module_for(compiled: Any) -> _Module:
    traced = compiled.stages["traced"]
    with _modules_lock:
        found = _modules.get(traced)
        if found is not None:
            _modules.move_to_end(traced)
            return found
    kernels: dict[str, SourceRange | None] = {k.symbol: None for k in compiled.kernels}
    kernels.update({launch.kernel.symbol: launch.kernel.def_range for launch in compiled.launches})
    found = _Module(traced, compiled.source_maps.get("traced"), compiled.stages.get("lowered", ""), kernels)
    with _modules_lock:
        _modules[traced] = found
        while len(_modules) > _CACHE_SIZE:
            _modules.popitem(last=False)
    return found


def compile_for_interpreter(jit_fn: Any, args: tuple, kwargs: dict, target: str | None = None) -> Any:
    """The jit function compiled as for the GPU up to PTX; raises `CompileError` on errors and
    warns with the other diagnostics, as a GPU call does."""
    from dsl.compiler.api import compile_function
    from dsl.compiler.build_options import BuildOptions
    from dsl.interpreter import stepping

    options = BuildOptions(views=True, debug_steps=stepping.current() is not None)  # a debugger: step markers
    compiled, diags = compile_function(jit_fn, args, kwargs, target, until="ptx", options=options)
    errors = [d for d in diags if d.is_error]
    if errors or compiled is None:
        raise CompileError(errors or diags)
    for d in diags:
        warnings.warn(DiagnosticWarning(d), stacklevel=4)
    return compiled


def build(jit_fn: Any, args: tuple, kwargs: dict, target: str | None = None) -> Interpreted:
    """A runnable interpreted specialization for a call with these arguments."""
    from dsl.compiler.specs import resolve_params
    from dsl.diagnostics import DiagnosticSink
    from dsl.frontend.source import function_source
    from dsl.interpreter.debug import stop_at_breakpoint
    from dsl.interpreter.runtime import InterpreterRuntime
    from dsl.runtime import jit_call

    compiled = compile_for_interpreter(jit_fn, args, kwargs, target)
    module = _module_for(compiled)
    for launch in compiled.launches:  # every kernel first: one that cannot run is refused before any runs
        module.program(launch.kernel.symbol)
    namespace: dict[str, Any] = {}
    exec(compile(compiled.stages["launcher"], f"<kdsl interpreted launcher {compiled.name}>", "exec"), namespace)
    ranges = {launch.kernel.symbol: launch.range for launch in compiled.launches}
    kernels = {launch.kernel.symbol: launch.kernel.params for launch in compiled.launches}
    rt = InterpreterRuntime(module.program, kernels, ranges, compiled.name, namespace.get("TENSOR_ACCESS"),
                            compiled.target, breakpoints=stop_at_breakpoint)
    sink = DiagnosticSink()
    params = resolve_params(jit_fn, function_source(jit_fn.fn), args, kwargs, sink)
    runtime_names = [p.name for p in params or [] if p.kind != "constexpr"]
    state = jit_call.state_of(jit_fn)
    _, plan = jit_call.launch_plan(state, args, kwargs, runtime_names)
    access = namespace.get("TENSOR_ACCESS") or {}
    writes = tuple(name for name, fact in access.items() if fact[2] is not None)
    return Interpreted(namespace["bind"](rt), plan, compiled, writes)


def interpreted(jit_fn: Any, args: tuple, kwargs: dict, tag: str = "") -> Interpreted:
    """The interpreted specialization a call with these arguments runs (built once).
    `tag` tells apart specializations the call's arguments do not (an autotuning config)."""
    from dsl.interpreter import stepping
    from dsl.runtime import jit_call

    state = jit_call.state_of(jit_fn)
    key = (jit_call.call_key(state, args, kwargs), tag, stepping.current() is not None)
    cache = jit_fn.__dict__.setdefault("_kdsl_interpreted", {})
    spec = cache.get(key)
    if spec is None:
        with state.lock:
            spec = cache.get(key)
            if spec is None:
                spec = cache[key] = build(jit_fn, args, kwargs)
    return spec


def call_interpreted(jit_fn: Any, args: tuple, kwargs: dict, tag: str = "") -> Interpreted:
    """`jit_fn(*args, **kwargs)` run by the interpreter (compiling this specialization once);
    returns the specialization that ran."""
    from dsl.runtime import jit_call

    state = jit_call.state_of(jit_fn)
    if kwargs and "stream" in kwargs and "stream" not in state.names:
        kwargs = {k: v for k, v in kwargs.items() if k != "stream"}  # every launch runs to completion anyway
    spec = interpreted(jit_fn, args, kwargs, tag)
    values = [args[what] if how == "arg" else kwargs[what] if how == "kw" else what for how, what in spec.plan]
    spec.launch(*values, None)
    return spec
