"""Analysing a whole Python file: run its top-level statements, then compile every function.

This is what the editor's worker and `kdsl lint` do with a buffer. Statements run one by
one so that one that raises is reported at its own range (DSL001) while the rest still
run; each `@kernel` and `@jit` function is then compiled on its own, so one function's
mistakes never hide another's. Jit functions compile from their annotations or
`examples=`; kernels they launch are reported with that specialization.
"""

from __future__ import annotations

import ast
import collections
import concurrent.futures
import contextlib
import copy
import dataclasses
import hashlib
import json
import linecache
import os
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from dsl.compiler.api import PendingCompile, parse_examples, start_compile
from dsl.compiler.artifacts import FunctionReport, ModuleReport, Resources
from dsl.compiler.batch_assembly import Batches
from dsl.compiler.build_options import BuildOptions
from dsl.diagnostics import CompileError, Diagnostic, SourceRange
from dsl.frontend import trace_facts
from dsl.frontend.launch_syntax import launch_syntax
from dsl.frontend.source import SourceFile, is_user_code, load_file
from dsl.frontend.static_checks import static_checks
from dsl.language.decorators import JitFunction, KernelFunction

MODULE_NAME = "__kdsl_analysis__"


@dataclass
class ModuleRun:
    """What running a module read besides its own text, for caches of its results: the files of
    the modules it imported first (user and library), and whether an import failed (a module
    that is missing now may exist later, so such a result is not for keeping)."""

    imported: list[str] = field(default_factory=list)
    import_failed: bool = False


def read_program(path: str, command: str) -> str | None:
    """The source of a file a command line was given, with its directory importable (as when
    it runs as a script); None, said on stderr, when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    except OSError as err:
        print(f"{command}: cannot read {path}: {err.strerror}", file=sys.stderr)
        return None
    sys.path.insert(0, os.path.dirname(path))
    return source


def install_buffer(path: str, source: str) -> None:
    """Puts the buffer text in linecache so tracing and tracebacks read it, not the disk."""
    lines = source.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    linecache.cache[path] = (len(source), None, lines, path)


def run_module(source: str, path: str, record: ModuleRun | None = None) -> tuple[dict[str, Any], list[Diagnostic]]:
    """Executes the top-level statements one by one; returns the namespace and failures (and
    fills in `record`)."""
    install_buffer(path, source)
    try:
        file = load_file(path)  # the parse that every function's source lookup then shares
    except SyntaxError:
        return {}, [d for d in static_checks(source, path) if d.code == "DSL003"]
    codes = _STATEMENT_CODE.get(path, {})
    _STATEMENT_CODE[path] = kept = {}
    module = types.ModuleType(MODULE_NAME)
    module.__file__ = path
    namespace = module.__dict__
    previous = sys.modules.get(MODULE_NAME)
    sys.modules[MODULE_NAME] = module
    diagnostics: list[Diagnostic] = []
    modules_before = set(sys.modules)
    try:
        for stmt in file.tree.body:
            key = _statement_key(file, stmt)
            code = kept[key] = codes.get(key) or _compile_statement(stmt, path)
            if isinstance(code, SyntaxError):  # parses, but Python refuses it (`break` outside a loop, ...)
                diagnostics.append(Diagnostic.make("DSL003", f"syntax error: {code.msg}", _syntax_range(path, code)))
                continue
            try:
                exec(code, namespace)
            except CompileError as err:
                diagnostics.extend(err.diagnostics)
            except MemoryError:
                raise  # the worker reports it as running out of memory, not as a statement error
            except Exception as err:  # the user's statement failed: report it, go on
                if record is not None and isinstance(err, ImportError):
                    record.import_failed = True
                diagnostics.append(Diagnostic.make(
                    "DSL001", f"{type(err).__name__}: {err}", _statement_range(file, stmt, err)))
    finally:
        if previous is not None:
            sys.modules[MODULE_NAME] = previous
        else:
            sys.modules.pop(MODULE_NAME, None)
        imported = _forget_user_modules(modules_before)
        if record is not None:
            record.imported = imported
    return namespace, diagnostics


# path -> the code of each top-level statement of its last run, by `_statement_key`: a warm
# worker re-runs a module after every edit, and compiling its unchanged statements again
# was most of that run's time in a file of a hundred kernels.
_STATEMENT_CODE: dict[str, dict[tuple[Any, ...], types.CodeType | SyntaxError]] = {}


def _statement_key(file: SourceFile, stmt: ast.stmt) -> tuple[Any, ...]:
    """What a statement's code depends on: its place and the text of its lines (decorators
    included); the same text at the same place parses, and compiles, the same."""
    first = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))])
    end = stmt.end_lineno or stmt.lineno
    where = (stmt.lineno, stmt.col_offset, end, stmt.end_col_offset)
    return (first, *where, "\n".join(file.lines[first - 1 : end]))


def _compile_statement(stmt: ast.stmt, path: str) -> types.CodeType | SyntaxError:
    try:
        return compile(ast.Module(body=[stmt], type_ignores=[]), path, "exec", dont_inherit=True)
    except SyntaxError as err:
        return err


def _forget_user_modules(before: set[str]) -> list[str]:
    """Drops the user's own modules imported by this run, so the next run (in a warm
    worker) sees their current text; libraries stay imported. Returns the files of every
    module the run imported."""
    files = set()
    for name in set(sys.modules) - before:
        path = getattr(sys.modules[name], "__file__", None) or ""
        if path:
            files.add(os.path.abspath(path))
        if path and is_user_code(name, path):
            del sys.modules[name]
    return sorted(files)


def _syntax_range(path: str, err: SyntaxError) -> SourceRange:
    line = err.lineno or 1
    col = max((err.offset or 1) - 1, 0)
    end = (err.end_offset or col + 2) - 1 if (err.end_lineno or line) == line else col + 1
    return SourceRange(path, line, col, line, max(end, col + 1))


def _statement_range(file: SourceFile, stmt: ast.stmt, err: Exception) -> SourceRange:
    """The statement's first line (a whole class or def would cover too much)."""
    rng = file.range_of(stmt)
    if rng.end_line > rng.line:
        line_text = file.lines[rng.line - 1] if rng.line <= len(file.lines) else ""
        return SourceRange(rng.file, rng.line, rng.column, rng.line, len(line_text.rstrip()))
    return rng


def dsl_functions(namespace: dict[str, Any], path: str) -> list[tuple[str, Any]]:
    """The module's own kernel and jit functions, in source order."""
    found = []
    for name, value in namespace.items():
        if isinstance(value, KernelFunction | JitFunction) and value.fn.__code__.co_filename == path:
            found.append((value.fn.__code__.co_firstlineno, name, value))
    return [(name, value) for _, name, value in sorted(found, key=lambda t: t[0])]


def analyze_source(source: str, path: str, *, target: str | None = None, until: str = "cubin",
                   views: bool = True, cubins_on_request: bool = False, helpers: int = 0,
                   record: ModuleRun | None = None,
                   on_progress: Callable[[], None] | None = None,
                   on_traced: Callable[[ModuleReport, int], None] | None = None) -> ModuleReport:
    """Runs and compiles a buffer; every problem is a diagnostic in the report.

    `views=False` is for lint, which wants only the diagnostics: no stage texts or source
    maps (a build without views transforms one module in place and prints nothing), and a
    kernel that a compiled jit function launches is not compiled again on its own, with the
    same specialization: its diagnostics are the jit's (its report has no `compiled`); nor are
    the tracer's facts recorded (its report has no `values`).
    `record`, when given, is filled in with what the run imported; `on_progress` is called
    after the module ran and after each step of each function (the worker's time limit counts
    per step). Every function is traced before any is lowered: `on_traced`, when given, gets
    the report as tracing left it (what the tracer and the verifier found; no compiled
    results), with how many functions are still to be lowered and assembled, when any is:
    an editor can show it while the rest (lowering, ptxas, resources) runs.
    `cubins_on_request` (the editor's): each kernel's figures come from ptxas runs over many
    modules, and its cubin is made when a view asks for it (`analysis_options`). `helpers=1`
    forks a helper that lowers half of the functions, when there are many (`_LoweringHelper`)."""
    progress = on_progress or (lambda: None)
    namespace, diagnostics = run_module(source, path, record)
    progress()
    options = analysis_options(views, cubins_on_request)
    report = ModuleReport(path, diagnostics=diagnostics)
    with _assembling_beside():
        _compile_functions(namespace, path, report, target, until, views, options, progress, on_traced, helpers)
    report.functions.sort(key=lambda f: f.range.line)
    return report


@dataclass
class _Started:
    """A function of the module whose compiles (one per example of a jit) are under way."""

    name: str
    kind: str
    range: SourceRange
    compiles: list[PendingCompile]
    values: list[trace_facts.ValueFact]
    dropped: str | None = None  # a code whose diagnostics belong elsewhere

    @property
    def waiting(self) -> bool:
        """Still to be lowered and assembled (not found in the cache, not failed in tracing)."""
        return any(pending.lower_step is not None for pending in self.compiles)

    def report(self, finished: bool) -> FunctionReport:
        """Its report; before it is `finished`, without the compiled result (its diagnostics
        are then what tracing found, or all of them for a compile the cache answered)."""
        compiled, diags = None, []
        for pending in self.compiles:
            if finished or pending.lower_step is None:
                result, found = pending.result()
                compiled = compiled or (result if finished else None)
            else:
                found = pending.diagnostics
            diags += [d for d in found if d not in diags and d.code != self.dropped]
        return FunctionReport(self.name, self.kind, self.range, compiled, diags, self.values)


def _compile_functions(namespace: dict[str, Any], path: str, report: ModuleReport, target: str | None, until: str,
                       views: bool, options: BuildOptions, progress: Callable[[], None],
                       on_traced: Callable[[ModuleReport, int], None] | None, helpers: int = 0) -> None:
    """Traces every function, then lowers each to PTX (ptxas starting on its PTX while the
    next one lowers), then collects the results in order. Jit functions first: the
    specializations their launches give their kernels are needed before those are traced."""
    from dsl.frontend.source import function_source

    used_specs: dict[int, tuple[tuple, Any]] = {}
    launched_by_failed_jit: set[str] = set()
    functions = dsl_functions(namespace, path)
    started: list[_Started] = []
    for name, fn in functions:
        if not isinstance(fn, JitFunction):
            continue
        src = function_source(fn.fn)
        examples = parse_examples(fn) or [((), {}, None)]
        with _recording(views) as facts:  # what tracing bound each name to, for the editor
            compiles = [start_compile(fn, args, kwargs, target, until=until, example_range=ex_range,
                                      options=options) for args, kwargs, ex_range in examples]
        started.append(_Started(name, "jit", src.file.def_name_range(src.node), compiles, _facts_in(facts, path)))
        traced = [c for c in compiles if not any(d.is_error for d in c.diagnostics)]
        if not traced:
            launched_by_failed_jit |= _launched_names(src.node)
        for compiled in traced:  # every example's launches: a Constexpr may pick the kernel
            for launch in compiled.launches:
                kernel = namespace.get(launch.kernel.source_name)
                if id(kernel) not in used_specs:
                    used_specs[id(kernel)] = (tuple(launch.kernel.params), launch.kernel.block)
        progress()
    done: list[FunctionReport] = []
    for name, fn in functions:
        if not isinstance(fn, KernelFunction):
            continue
        src = function_source(fn.fn)
        rng = src.file.def_name_range(src.node)
        if id(fn) in used_specs and not views:
            # Compiled inside a jit function that launches it, with the same specialization:
            # its diagnostics are the jit's, and without views nothing shows its own stages.
            done.append(FunctionReport(name, "kernel", rng, None, []))
            continue
        with _recording(views) as facts:
            if id(fn) in used_specs:
                params, block = used_specs[id(fn)]
                pending, dropped = _start_kernel_spec(fn, list(params), block, target, until, options), "DSL101"
            else:
                pending = start_compile(fn, (), {}, target, until=until, options=options)
                # its types come from the launch; the jit's own error is the one to fix
                dropped = "DSL103" if name in launched_by_failed_jit else None
        started.append(_Started(name, "kernel", rng, [pending], _facts_in(facts, path), dropped))
        progress()
    waiting = sum(f.waiting for f in started)
    if on_traced is not None and waiting:
        traced_report = ModuleReport(path, diagnostics=list(report.diagnostics),
                                     functions=sorted(done + [f.report(finished=False) for f in started],
                                                      key=lambda f: f.range.line))
        on_traced(traced_report, waiting)
    helper = _LoweringHelper.start(started, helpers)
    for function in started:
        for pending in function.compiles:
            if not helper.takes(pending):
                pending.lower()
        progress()
    helper.adopt()
    for function in started:
        done.append(function.report(finished=True))
        progress()
    report.functions.extend(done)


HELPED_FROM = 8  # functions to lower before a helper pays for its fork and its answer


class _LoweringHelper:
    """A fork that lowers and assembles the second half of the functions still to lower
    while this process takes the first: the editor opening a file of many kernels uses two
    cores. A copy of this process after tracing, it runs none of the module's code, only the
    compiler, and answers on a pipe; its results are adopted here (`PendingCompile.adopt`)
    with this process's own records of the launches. A helper that fails or dies leaves its
    share to be lowered here. None is forked for fewer than `HELPED_FROM` functions, with
    `helpers=0` or without `os.fork`."""

    def __init__(self, share: list[PendingCompile], pid: int | None, answer: int | None):
        self.share, self.pid, self.answer = share, pid, answer
        self._ids = {id(p) for p in share}

    @classmethod
    def start(cls, started: list[_Started], helpers: int) -> _LoweringHelper:
        waiting = [p for function in started for p in function.compiles if p.lower_step is not None]
        if helpers < 1 or len(waiting) < HELPED_FROM or not hasattr(os, "fork"):
            return cls([], None, None)
        share = waiting[len(waiting) // 2:]
        read_end, write_end = os.pipe()
        try:
            pid = os.fork()
        except OSError as err:  # no process to spare: everything is lowered here
            print(f"kdsl: no lowering helper ({err}); lowering every function in this process", file=sys.stderr)
            os.close(read_end)
            os.close(write_end)
            return cls([], None, None)
        if pid == 0:
            try:
                os.close(read_end)
                _serve_share(share, write_end)
            finally:
                os._exit(0)
        os.close(write_end)
        return cls(share, pid, read_end)

    def takes(self, pending: PendingCompile) -> bool:
        return id(pending) in self._ids

    def adopt(self) -> None:
        if self.pid is None or self.answer is None:
            return
        try:
            with os.fdopen(self.answer, "rb") as answer:
                results = json.loads(answer.read() or b"null")
        except ValueError:
            results = None
        finally:
            _, status = os.waitpid(self.pid, 0)
        if not isinstance(results, list) or len(results) != len(self.share):
            print(f"kdsl: the lowering helper failed (wait status {status}); lowering its share here",
                  file=sys.stderr)
            return  # each `result()` lowers its function here
        from dsl.compiler.artifacts import CompiledFunction

        for pending, result in zip(self.share, results):
            compiled = CompiledFunction.from_dict(result["compiled"]) if result["compiled"] is not None else None
            pending.adopt(compiled, [Diagnostic.from_dict(d) for d in result["diagnostics"]])


def _serve_share(share: list[PendingCompile], out: int) -> None:
    """The helper's work: lower and assemble its share, with ptxas threads of its own (a fork
    has none of its parent's), and write the results as one JSON document."""
    results = []
    with _assembling_beside():
        for pending in share:  # every module's PTX first, so ptxas takes them in batches
            pending.lower()
        for pending in share:
            compiled, diagnostics = pending.result()
            results.append({"compiled": compiled.to_dict() if compiled is not None else None,
                            "diagnostics": [d.to_dict() for d in diagnostics]})
    data = memoryview(json.dumps(results).encode())
    while data:
        data = data[os.write(out, data):]


def _recording(views: bool) -> contextlib.AbstractContextManager[trace_facts.FactRecorder | None]:
    """The tracer's facts are for the editor's hints and tokens; lint (no views) records none,
    which is a fifth of compiling a small kernel."""
    return trace_facts.recording() if views else contextlib.nullcontext(None)


def _facts_in(recorder: trace_facts.FactRecorder | None, path: str) -> list[trace_facts.ValueFact]:
    """The recorded facts about `path` (helpers of other files are not this report's to show)."""
    return [] if recorder is None else [fact for fact in recorder.facts() if fact.range.file == path]


def _launched_names(node: ast.AST) -> set[str]:
    """Names of the kernels a jit function's source launches: `NAME(...).launch(...)`."""
    launches = (launch_syntax(n) for n in ast.walk(node))
    return {launch.kernel.id for launch in launches if launch is not None and isinstance(launch.kernel, ast.Name)}


def _start_kernel_spec(fn: KernelFunction, params: list[Any], block: Any, target: str | None, until: str,
                       options: BuildOptions) -> PendingCompile:
    """Compiles a kernel alone with the specialization a jit launch gave it (its annotation
    mismatches, DSL101, belong to the launch that passed the arguments: reported there)."""
    from dsl.language.tensor_cores import TensorMapSpec
    from dsl.language.types import TensorSpec

    args = []
    for p in params:
        if p.kind == "tensor":
            args.append(TensorSpec(p.dtype, rank=p.rank))
        elif p.kind == "scalar":
            args.append(p.dtype)
        elif p.kind == "tensor_map":
            args.append(TensorMapSpec(p.dtype, *p.value))
        else:
            args.append(p.value)
    if block is not None and fn.known_block_size is None:
        fn = copy.copy(fn)  # the inferred contract, for this compile only: the user's object is left alone
        fn.known_block_size = list(block)
    return start_compile(fn, tuple(args), {}, target, until=until, options=options)


def analysis_options(views: bool, cubins_on_request: bool = False) -> BuildOptions:
    """`cubins_on_request`: ptxas finds the kernels' figures many modules at a run (`Batches`),
    and a kernel's cubin is made when something asks for it (`CompiledFunction.assembled_cubin`)."""
    start = start_figures if cubins_on_request else start_assembly_once
    return BuildOptions(views=views, assembler=assemble_once, start_assembly=start)


# (sha256 of the PTX, architecture) -> what ptxas made of it, most recent last
_ASSEMBLED: collections.OrderedDict[tuple[str, str], tuple[bytes, dict[str, Resources], str]] = (
    collections.OrderedDict())
_ASSEMBLED_MAX = 64


def assemble_once(ptx: str, arch: str) -> tuple[bytes, dict[str, Resources], str]:
    """ptxas, once per PTX text: a kernel a jit function launches compiles to the same PTX
    alone as inside the jit (the report has both), and a ptxas process is most of the time
    of compiling a small kernel. The resources are copies (the compiler fills them in)."""
    from dsl.compiler import toolchain

    key = (hashlib.sha256(ptx.encode()).hexdigest(), arch)
    done = _ASSEMBLED.get(key)
    if done is None:
        done = _ASSEMBLED[key] = toolchain.assemble(ptx, arch)
        while len(_ASSEMBLED) > _ASSEMBLED_MAX:
            _ASSEMBLED.popitem(last=False)
    _ASSEMBLED.move_to_end(key)
    cubin, resources, log = done
    return cubin, {name: dataclasses.replace(r) for name, r in resources.items()}, log


_ASSEMBLERS = 2  # ptxas processes beside the compiling thread
_pool: concurrent.futures.ThreadPoolExecutor | None = None  # while `analyze_source` runs
_batches: Batches | None = None  # the same analysis's modules assembled for their figures only
_STARTED: dict[tuple[str, str], concurrent.futures.Future] = {}


@contextlib.contextmanager
def _assembling_beside() -> Iterator[None]:
    """Threads that run ptxas while the module's functions compile, for one analysis: none is
    left behind (a warm run process that keeps a thread is retired, see `lsp.zygote`)."""
    global _pool, _batches
    _pool = concurrent.futures.ThreadPoolExecutor(_ASSEMBLERS, "ptxas")
    _batches = Batches(_pool, _ASSEMBLERS)
    try:
        yield
    finally:
        pool, _pool, _batches = _pool, None, None
        pool.shutdown(wait=True, cancel_futures=True)
        _STARTED.clear()


def start_assembly_once(ptx: str, arch: str) -> Callable[[], tuple[bytes, dict[str, Resources], str]]:
    """`assemble_once`, started: during an analysis ptxas runs in a thread's process while the
    caller compiles on; the returned function waits for it."""
    from dsl.compiler import toolchain

    key = (hashlib.sha256(ptx.encode()).hexdigest(), arch)
    if _pool is not None and key not in _ASSEMBLED and key not in _STARTED:
        _STARTED[key] = _pool.submit(toolchain.assemble, ptx, arch)

    def wait() -> tuple[bytes, dict[str, Resources], str]:
        future = _STARTED.pop(key, None)
        if future is not None:
            _ASSEMBLED[key] = future.result()  # ptxas's errors are raised here, as assembling raises them
        return assemble_once(ptx, arch)

    return wait


def start_figures(ptx: str, arch: str) -> Callable[[], tuple[bytes | None, dict[str, Resources], str]]:
    """The kernels' figures without a cubin, found with the analysis's other modules
    (`Batches`): a file of a hundred kernels pays for a few ptxas start-ups, not a hundred.
    A module that uses tensor cores is assembled alone, cubin and all: its SASS gives the
    tensor-core mix that hover shows. So is any outside an analysis."""
    from dsl.compiler.pipeline import uses_tensor_cores

    if _batches is None or uses_tensor_cores(ptx):
        return start_assembly_once(ptx, arch)
    wait = _batches.start(ptx, arch)
    return lambda: (None, wait(), "")
