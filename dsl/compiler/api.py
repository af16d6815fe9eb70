"""`dsl.compile`: from a decorated function and argument specs to a `CompiledFunction`.

`FunctionCompiler` owns one MLIR context and module per compiled function: the jit's
`func.func` and one `gpu.func` per kernel specialization (kernel, parameter types,
Constexpr values, block size), each with a unique symbol. Errors are collected as
diagnostics from every kernel the function launches, not just the first failure.
"""

from __future__ import annotations

import ast
import contextlib
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mlir import ir

from dsl import environment
from dsl.compiler import cache, relocation
from dsl.compiler.access import TensorAccess, tensor_access
from dsl.compiler.artifacts import CompiledFunction, KernelInfo
from dsl.compiler.build_options import BuildOptions
from dsl.compiler.float_flags import float_flags
from dsl.compiler.pipeline import Build, StageError, attach_error_collector, run_pipeline
from dsl.compiler.resource_checks import resource_diagnostics
from dsl.compiler.specs import resolve_params
from dsl.diagnostics import CompileError, Diagnostic, DiagnosticError, DiagnosticSink, DiagnosticWarning, SourceRange
from dsl.frontend import ops, trace_facts
from dsl.frontend.debug_steps import stepping
from dsl.frontend.kernel_tracer import TracedKernel, ensure_dynamic_smem_global, trace_kernel
from dsl.frontend.params import ParamSpec
from dsl.frontend.source import FunctionSource, function_source
from dsl.frontend.static_checks import check_hints, check_known_block_size, decorator_info
from dsl.language.decorators import JitFunction, KernelFunction
from dsl.targets import TARGETS, Target, get_target

_CONTEXTS = threading.local()


# What the tracer emits and the lowering produces. The bindings' default context loads every
# registered dialect (~10 ms); passes load any other dialect they need themselves.
DIALECTS = ("builtin", "func", "gpu", "arith", "scf", "vector", "math", "llvm", "nvvm", "cf", "index")


def shared_context() -> Any:
    """One MLIR context per thread, with only kdsl's dialects loaded."""
    ctx = getattr(_CONTEXTS, "context", None)
    if ctx is None:
        ctx = _CONTEXTS.context = ir.Context(load_on_create_dialects=[])
        for name in DIALECTS:
            ctx.get_dialect_descriptor(name)  # loads it without importing its Python module
    return ctx


class FunctionCompiler:
    """Builds the module of one compiled function and specializes its kernels on demand."""

    def __init__(self, target: Target, sink: DiagnosticSink, name: str):
        self.target = target
        self.sink = sink
        self.context = shared_context()
        self.gpu_module_name = f"{name}_kernels"
        self.kernels: dict[tuple, TracedKernel | None] = {}
        self.symbols: set[str] = set()
        self.float_flags: dict[str, str] = {}  # gpu.func symbol -> its #arith.fastmath flags
        self.flush_to_zero: set[str] = set()  # gpu.func symbols compiled with ftz=True
        # device debug information for cuda-gdb: `@kernel(debug=True)` or KDSL_DEBUG=1
        self.device_debug = environment.switch("KDSL_DEBUG")
        self.access: dict[str, dict[str, TensorAccess]] = {}  # gpu.func symbol -> its tensors' accesses
        self._dynamic_smem: Any = None
        self._dynamic_smem_align = 16
        with self.context, ir.Location.unknown():
            self.module = ir.Module.create()
            self.module.operation.attributes["gpu.container_module"] = ir.UnitAttr.get()
            with ir.InsertionPoint(self.module.body):
                self.gpu_module = ops.create("gpu.module", attributes={
                    "sym_name": ir.StringAttr.get(self.gpu_module_name)}, regions=1)
            self.gpu_module.regions[0].blocks.append()
        self.gpu_ip = ir.InsertionPoint(self.gpu_module.regions[0].blocks[0])

    def _declare_dynamic_smem(self, align: int = 16) -> None:
        """One extern shared array per module, aligned for the most aligned array carved from it."""
        if self._dynamic_smem is None:
            self._dynamic_smem = ensure_dynamic_smem_global(self.gpu_ip)
            self._dynamic_smem_align = 16
        if align > self._dynamic_smem_align:
            self._dynamic_smem.attributes["alignment"] = ops.i64_attr(align)
            self._dynamic_smem_align = align

    def _gpu_func(self, symbol: str) -> Any:
        for op in self.gpu_module.regions[0].blocks[0].operations:
            if op.name == "gpu.func" and ir.StringAttr(op.attributes["sym_name"]).value == symbol:
                return op
        raise KeyError(symbol)

    def kernel_target(self, kernel: KernelFunction, src: FunctionSource) -> Target | None:
        """The target `kernel` is traced for: the module's, or the architecture-specific one
        the kernel is written for (`@dsl.kernel(target="sm_90a")`), which the whole module then
        compiles for when it is the same GPU (sm_90 -> sm_90a). Another GPU is DSL207; None
        after reporting it."""
        if kernel.target is None:
            return self.target
        _, dec, _ = decorator_info(src.node)
        node = next((kw.value for kw in dec.keywords if kw.arg == "target"), dec) if isinstance(dec, ast.Call) \
            else dec
        where = src.file.range_of(node) if node is not None else src.file.def_name_range(src.node)
        if kernel.target not in TARGETS:
            self.sink.add(Diagnostic.make("DSL201", f"target must be one of {', '.join(TARGETS)}, not "
                                          f"{kernel.target!r}", where))
            return None
        pinned = get_target(kernel.target)
        if pinned.name != self.target.name:
            if pinned.compute_capability != self.target.compute_capability or not pinned.name.endswith("a"):
                self.sink.add(Diagnostic.make(
                    "DSL207", f"kernel '{kernel.kernel_name}' is written for {pinned.name}, which runs only on compute "
                    f"capability {'.'.join(map(str, pinned.compute_capability))}; the target is {self.target.name}",
                    where))
                return None
            self.target = pinned  # sm_90 -> sm_90a: the same GPU, with its own instructions
        return pinned

    def known_block_size(self, kernel: KernelFunction) -> tuple[tuple[int, int, int], SourceRange | None] | None:
        """The kernel's validated contract, or None; a malformed one raises DSL201."""
        if kernel.known_block_size is None:
            return None
        src = function_source(kernel.fn)
        diag, value_range = check_known_block_size(src.file, src.node, kernel.known_block_size)
        if diag is not None:
            raise DiagnosticError(diag)
        return tuple(kernel.known_block_size), value_range  # type: ignore[return-value]

    def specialize(self, kernel: KernelFunction, params: list[Any], block: tuple[int, int, int] | None
                   ) -> TracedKernel | None:
        specs = [p[0] if isinstance(p, tuple) else p for p in params]
        key = (id(kernel), tuple(s.key() for s in specs), block)
        if key in self.kernels:
            return self.kernels[key]
        src = function_source(kernel.fn)
        target = self.kernel_target(kernel, src)
        if target is None:
            self.kernels[key] = None
            return None
        problems = check_hints(src.file, src.node, kernel.hints, target.name)
        if problems:  # DSL201 at the decorator arguments; the launch says the kernel failed
            for diag in problems:
                self.sink.add(diag)
            self.kernels[key] = None
            return None
        symbol = kernel.kernel_name
        n = 1
        while symbol in self.symbols:
            symbol = f"{kernel.kernel_name}_{n}"
            n += 1
        self.symbols.add(symbol)
        self.float_flags[symbol] = float_flags(kernel.hints)
        if kernel.hints.get("ftz"):
            self.flush_to_zero.add(symbol)
        if kernel.hints.get("debug"):
            self.device_debug = True
        with self.context:
            traced = trace_kernel(kernel, src, specs, block, symbol, self.gpu_ip, target, self.sink,
                                  self._declare_dynamic_smem)
            if traced is not None:  # read now: the lowering replaces the gpu.func
                self.access[symbol] = tensor_access(self._gpu_func(symbol), specs)
        self.kernels[key] = traced
        return traced


def _kind(fn: Any) -> str:
    if isinstance(fn, KernelFunction):
        return "kernel"
    if isinstance(fn, JitFunction):
        return "jit"
    raise TypeError(f"dsl.compile needs a @dsl.kernel or @dsl.jit function, not {fn!r}")


def compile_function(fn: Any, args: tuple = (), kwargs: dict | None = None, target: str | None = None,
                     until: str = "cubin", example_range: SourceRange | None = None,
                     options: BuildOptions | None = None) -> tuple[CompiledFunction | None, list[Diagnostic]]:
    """Compiles without raising: returns the result (None on errors) and every diagnostic."""
    return start_compile(fn, args, kwargs, target, until, example_range, options).result()


@dataclass
class PendingCompile:
    """A compile in steps, so a caller compiling a file can take each step for every function
    in turn (`dsl.analyze_source`): `start_compile` traces; then what tracing found is known
    (`diagnostics` so far, `launches`: the jit's kernels with their specializations);
    `lower()` lowers to PTX and starts ptxas (with `BuildOptions.start_assembly`, in its own
    process while the caller goes on); `result()` takes the steps left, waits for the
    assembly and finishes, once."""

    launches: list[Any]
    diagnostics: list[Diagnostic]  # what is found so far (the sink's own list: it grows)
    lower_step: Callable[[], Callable[[], tuple[CompiledFunction | None, list[Diagnostic]]]] | None
    finish: Callable[[], tuple[CompiledFunction | None, list[Diagnostic]]] | None = None
    _result: tuple[CompiledFunction | None, list[Diagnostic]] | None = None
    adopt_step: Callable[[CompiledFunction | None, list[Diagnostic]],
                         tuple[CompiledFunction | None, list[Diagnostic]]] | None = None

    def lower(self) -> None:
        if self.lower_step is not None:
            step, self.lower_step = self.lower_step, None
            with ops.generic_views():
                self.finish = step()

    def adopt(self, compiled: CompiledFunction | None, diagnostics: list[Diagnostic]) -> None:
        """Takes the result that `lower()` and `result()` gave in a copy of this process (a
        forked helper that lowered a share of a file's functions: `dsl.module_analysis`), as if
        they had run here: it keeps this process's records of the launches, and is cached."""
        assert self.lower_step is not None and self.adopt_step is not None, "adopted before it was lowered"
        self.lower_step = None
        self._result = self.adopt_step(compiled, diagnostics)

    def result(self) -> tuple[CompiledFunction | None, list[Diagnostic]]:
        if self._result is None:
            self.lower()
            assert self.finish is not None
            self._result = self.finish()
        return self._result


def _done(compiled: CompiledFunction | None, diagnostics: list[Diagnostic]) -> PendingCompile:
    return PendingCompile(compiled.launches if compiled is not None else [], diagnostics, None,
                          lambda: (compiled, diagnostics))


def start_compile(fn: Any, args: tuple = (), kwargs: dict | None = None, target: str | None = None,
                  until: str = "cubin", example_range: SourceRange | None = None,
                  options: BuildOptions | None = None) -> PendingCompile:
    """`compile_function`, traced (or found in the cache) and no further: see `PendingCompile`."""
    with ops.generic_views():
        return _start_compile(fn, args, kwargs, target, until, example_range, options or BuildOptions())


def _start_compile(fn: Any, args: tuple, kwargs: dict | None, target: str | None, until: str,
                   example_range: SourceRange | None, options: BuildOptions) -> PendingCompile:
    kind = _kind(fn)
    tgt = get_target(target)
    sink = DiagnosticSink()
    try:
        src = function_source(fn.fn)
    except OSError as err:
        return _done(None, [Diagnostic.make("DSL402", str(err), SourceRange(fn.fn.__code__.co_filename,
                                                                           fn.fn.__code__.co_firstlineno, 0,
                                                                           fn.fn.__code__.co_firstlineno, 0))])
    params = resolve_params(fn, src, args, kwargs or {}, sink, example_range)
    if params is None:
        return _done(None, sink.items)
    shape = cache.function_shape_key(fn, src, params, tgt.name, until + options.cache_tag())
    key = cache.place_key(*shape)
    hit = cache.MEMORY.get(key)
    if hit is None and options.views:  # the editor's builds: a function moved by an edit above it
        hit = _moved(*shape)
        if hit is not None:
            cache.MEMORY.put(key, hit, shape)
    # a result compiled while nobody recorded the tracer's facts is traced again for a recording
    if hit is not None and (hit[2] is not None or trace_facts.current() is None):
        compiled, diags, facts = hit
        trace_facts.replay(facts)  # what tracing it told the editor, as if it were traced now
        return _done(compiled, list(diags))
    recording = trace_facts.recording() if trace_facts.current() is not None else contextlib.nullcontext()

    def internal_error(err: Exception) -> tuple[None, list[Diagnostic]]:  # never a bare traceback
        sink.add(Diagnostic.make("DSL402", f"internal compiler error: {type(err).__name__}: {err}",
                                 src.file.def_name_range(src.node)))
        return None, sink.items

    with recording as recorder:
        try:
            with stepping(options.debug_steps):
                launches, lower_build = _build(fn, kind, src, params, tgt, sink, until, options)
        except Exception as err:
            return _done(*internal_error(err))
    facts = tuple(recorder.facts()) if recorder is not None else None

    def lower() -> Callable[[], tuple[CompiledFunction | None, list[Diagnostic]]]:
        try:
            finish_build = lower_build()
        except Exception as err:
            failed = internal_error(err)
            return lambda: failed

        def finish() -> tuple[CompiledFunction | None, list[Diagnostic]]:
            try:
                compiled = finish_build()
            except Exception as err:
                return internal_error(err)
            cache.MEMORY.put(key, (compiled, tuple(sink.items), facts), shape)
            return compiled, sink.items

        return finish

    def adopt(compiled: CompiledFunction | None, diagnostics: list[Diagnostic]
              ) -> tuple[CompiledFunction | None, list[Diagnostic]]:
        sink.items[:] = diagnostics
        if compiled is not None:  # a failure is not kept: it may have been the helper's own
            compiled.launches = launches
            cache.MEMORY.put(key, (compiled, tuple(sink.items), facts), shape)
        return compiled, sink.items

    return PendingCompile(launches, sink.items, lower, adopt_step=adopt)


def _moved(shape_key: str, places: tuple[cache.Place, ...]) -> tuple | None:
    """The cached result of the same function at other lines, shifted to these (or None)."""
    latest = cache.MEMORY.latest_of_shape(shape_key)
    if latest is None:
        return None
    move = relocation.moved_by(latest[0], places)
    return None if move is None else relocation.relocate_entry(latest[1], *move)


def _build(fn: Any, kind: str, src: FunctionSource, params: list[ParamSpec], tgt: Target,
           sink: DiagnosticSink, until: str, options: BuildOptions
           ) -> tuple[list[Any], Callable[[], Callable[[], CompiledFunction | None]]]:
    """Traces and verifies now; the launches it traced, and the next step: what lowers to the
    PTX (ptxas started when the options can start it) and returns what finishes the result."""
    from dsl.compiler.launcher_source import launcher_source
    from dsl.frontend.host_tracer import trace_host

    name = fn.kernel_name if kind == "kernel" else fn.__name__
    fc = FunctionCompiler(tgt, sink, name)
    def_range = src.file.def_name_range(src.node)
    state = None
    failed = lambda: lambda: None  # noqa: E731  (the steps of a compile that stopped)
    with fc.context:
        try:
            if kind == "kernel":
                contract = fc.known_block_size(fn)
                fc.specialize(fn, params, contract[0] if contract else None)
            else:
                with ir.InsertionPoint(fc.module.body):
                    result = trace_host(src, fn.fn, params, fc, sink)
                if result is not None:
                    state = result[1]
        except DiagnosticError as err:
            sink.add(err.diagnostic)
    traced = [k for k in fc.kernels.values() if k is not None]
    if sink.errors or (kind == "kernel" and not traced) or any(k is None for k in fc.kernels.values()):
        if not sink.errors:
            sink.add(Diagnostic.make("DSL402", f"'{name}' did not compile", def_range))
        return [], failed
    tgt = fc.target  # a kernel written for sm_90a makes an sm_90 module sm_90a
    build = Build(fc.module, fc.context, tgt, def_range, options=options, float_flags=fc.float_flags,
                  flush_to_zero=fc.flush_to_zero, device_debug=fc.device_debug)
    assembles = until in ("cubin", "sass")
    launches = state.launches if state is not None else []

    def run(until_stage: str, start: str = "traced") -> bool:
        """The pipeline's stages from `start` to `until_stage`, MLIR's errors collected."""
        handler = attach_error_collector(fc.context, [build])
        try:
            with fc.context:
                run_pipeline(build, until=until_stage, start=start)
        except StageError as err:
            for d in err.diagnostics:
                sink.add(d)
            return False
        finally:
            handler.detach()
        return True

    if not run("traced"):  # the verifier's errors are tracing's to report
        return [], failed

    def lower() -> Callable[[], CompiledFunction | None]:
        if until != "traced" and not run("ptx" if assembles else until, start="lowered"):
            return lambda: None
        if assembles and options.start_assembly is not None and not build.device_debug:
            build.assembly = options.start_assembly(build.texts["ptx"], tgt.name)
        return finish

    def finish() -> CompiledFunction | None:
        if assembles:
            try:
                run_pipeline(build, until=until, start="cubin")
            except StageError as err:
                for d in err.diagnostics:
                    sink.add(d)
                return None
        compiled = CompiledFunction(name=name, kind=kind, target=tgt.name, stages=dict(build.texts),
                                    source_maps=dict(build.maps), cubin=build.cubin)
        if state is not None:
            compiled.stages["launcher"] = launcher_source(fn.__name__, params, state, tgt.name, fc.access)
        _describe_kernels(compiled, traced, launches, build, tgt, fc.access, sink)
        compiled.diagnostics = [d for d in sink.items if not d.is_error]
        compiled.launches = launches
        return compiled

    return launches, lower


def _describe_kernels(compiled: CompiledFunction, traced: list[TracedKernel], launches: list[Any], build: Build,
                      tgt: Target, access: dict, sink: DiagnosticSink) -> None:
    """Each kernel's resources and occupancy, with the spill (DSL501) and occupancy (DSL502)
    diagnostics they call for."""
    for k in traced:
        kernel = KernelInfo(k.symbol, k.source_name, k.block, k.dynamic_smem, None, access.get(k.symbol, {}),
                            k.def_range, k.blocks_per_sm)
        compiled.kernels.append(kernel)
        res = build.resources.get(k.symbol)
        if res is not None:
            for d in resource_diagnostics(kernel, res, [launch.range for launch in launches if launch.kernel is k],
                                          tgt):
                sink.add(d)


def compile(fn: Any, *args: Any, target: str | None = None, **kwargs: Any) -> CompiledFunction:
    """Compiles a kernel or jit function for `target` (default sm_90) from arrays or specs.

    Raises `CompileError` carrying every error; warnings are also issued through `warnings`.
    """
    compiled, diags = compile_function(fn, args, kwargs, target)
    errors = [d for d in diags if d.is_error]
    for d in diags:
        if not d.is_error:
            warnings.warn(DiagnosticWarning(d), stacklevel=2)
    if errors or compiled is None:
        raise CompileError(errors or diags)
    return compiled


def parse_examples(fn: Any) -> list[tuple[tuple, dict, SourceRange | None]]:
    """The `examples=` of a jit function as (args, kwargs, range of that example)."""
    examples = getattr(fn, "examples", None) or []
    out = []
    ranges: list[SourceRange | None] = []
    try:
        src = function_source(fn.fn)
        for dec in src.node.decorator_list:
            if isinstance(dec, ast.Call):
                for kw in dec.keywords:
                    if kw.arg == "examples" and isinstance(kw.value, ast.List | ast.Tuple):
                        ranges = [src.file.range_of(e) for e in kw.value.elts]
    except OSError:
        pass
    for i, ex in enumerate(examples):
        rng = ranges[i] if i < len(ranges) else None
        if isinstance(ex, dict):
            out.append(((), ex, rng))
        elif isinstance(ex, tuple | list):
            out.append((tuple(ex), {}, rng))
        else:
            out.append(((ex,), {}, rng))
    return out
