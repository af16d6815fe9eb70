"""Analysing a whole Python file: run its top-level statements, then compile every function.

This is what the editor's worker and `kdsl lint` do with a buffer. Statements run one by
one so that one that raises is reported at its own range (DSL001) while the rest still
run; each `@kernel` and `@jit` function is then compiled on its own, so one function's
mistakes never hide another's. Jit functions compile from their annotations or
`examples=`; kernels they launch are reported with that specialization.
"""

from __future__ import annotations

import ast
import copy
import linecache
import os
import sys
import types
from typing import Any

from dsl.compiler.api import compile_function, parse_examples
from dsl.compiler.artifacts import FunctionReport, ModuleReport
from dsl.diagnostics import CompileError, Diagnostic, SourceRange
from dsl.frontend.launch_syntax import launch_syntax
from dsl.frontend.source import SourceFile, is_user_code
from dsl.frontend.static_checks import static_checks
from dsl.language.decorators import JitFunction, KernelFunction

MODULE_NAME = "__kdsl_analysis__"


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


def run_module(source: str, path: str) -> tuple[dict[str, Any], list[Diagnostic]]:
    """Executes the top-level statements one by one; returns the namespace and failures."""
    install_buffer(path, source)
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError:
        return {}, [d for d in static_checks(source, path) if d.code == "DSL003"]
    file = SourceFile(path, source, tree)
    module = types.ModuleType(MODULE_NAME)
    module.__file__ = path
    namespace = module.__dict__
    previous = sys.modules.get(MODULE_NAME)
    sys.modules[MODULE_NAME] = module
    diagnostics: list[Diagnostic] = []
    modules_before = set(sys.modules)
    try:
        for stmt in tree.body:
            try:
                code = compile(ast.Module(body=[stmt], type_ignores=[]), path, "exec", dont_inherit=True)
            except SyntaxError as err:  # parses, but Python refuses it (`break` outside a loop, ...)
                diagnostics.append(Diagnostic.make("DSL003", f"syntax error: {err.msg}", _syntax_range(path, err)))
                continue
            try:
                exec(code, namespace)
            except CompileError as err:
                diagnostics.extend(err.diagnostics)
            except MemoryError:
                raise  # the worker reports it as running out of memory, not as a statement error
            except Exception as err:  # the user's statement failed: report it, go on
                diagnostics.append(Diagnostic.make(
                    "DSL001", f"{type(err).__name__}: {err}", _statement_range(file, stmt, err)))
    finally:
        if previous is not None:
            sys.modules[MODULE_NAME] = previous
        else:
            sys.modules.pop(MODULE_NAME, None)
        _forget_user_modules(modules_before)
    return namespace, diagnostics


def _forget_user_modules(before: set[str]) -> None:
    """Drops the user's own modules imported by this run, so the next run (in a warm
    worker) sees their current text; libraries stay imported."""
    for name in set(sys.modules) - before:
        path = getattr(sys.modules[name], "__file__", None) or ""
        if path and is_user_code(name, path):
            del sys.modules[name]


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


def analyze_source(source: str, path: str, *, target: str | None = None, until: str = "cubin") -> ModuleReport:
    """Runs and compiles a buffer; every problem is a diagnostic in the report."""
    namespace, diagnostics = run_module(source, path)
    report = ModuleReport(path, diagnostics=diagnostics)
    from dsl.frontend.source import function_source

    used_specs: dict[int, tuple[tuple, Any]] = {}
    launched_by_failed_jit: set[str] = set()
    functions = dsl_functions(namespace, path)
    for name, fn in functions:
        if not isinstance(fn, JitFunction):
            continue
        src = function_source(fn.fn)
        rng = src.file.def_name_range(src.node)
        examples = parse_examples(fn) or [((), {}, None)]
        compiled, diags = None, []
        for args, kwargs, ex_range in examples:
            result, ds = compile_function(fn, args, kwargs, target, until=until, example_range=ex_range)
            compiled = compiled or result
            diags += [d for d in ds if d not in diags]
        if compiled is None:
            launched_by_failed_jit |= _launched_names(src.node)
        else:
            for launch in compiled.launches:
                kernel = namespace.get(launch.kernel.source_name)
                key = id(kernel)
                if key not in used_specs:
                    used_specs[key] = (tuple(launch.kernel.params), launch.kernel.block)
        report.functions.append(FunctionReport(name, "jit", rng, compiled, diags))
    for name, fn in functions:
        if not isinstance(fn, KernelFunction):
            continue
        src = function_source(fn.fn)
        rng = src.file.def_name_range(src.node)
        if id(fn) in used_specs:
            params, block = used_specs[id(fn)]
            compiled, diags = _compile_kernel_spec(fn, list(params), block, target, until)
        else:
            compiled, diags = compile_function(fn, (), {}, target, until=until)
            if name in launched_by_failed_jit:
                # its types come from the launch; the jit's own error is the one to fix
                diags = [d for d in diags if d.code != "DSL103"]
        report.functions.append(FunctionReport(name, "kernel", rng, compiled, diags))
    report.functions.sort(key=lambda f: f.range.line)
    return report


def _launched_names(node: ast.AST) -> set[str]:
    """Names of the kernels a jit function's source launches: `NAME(...).launch(...)`."""
    launches = (launch_syntax(n) for n in ast.walk(node))
    return {launch.kernel.id for launch in launches if launch is not None and isinstance(launch.kernel, ast.Name)}


def _compile_kernel_spec(fn: KernelFunction, params: list[Any], block: Any, target: str | None, until: str):
    """Compiles a kernel alone with the specialization a jit launch gave it."""
    from dsl.language.types import TensorSpec

    args = []
    for p in params:
        if p.kind == "tensor":
            args.append(TensorSpec(p.dtype, rank=p.rank))
        elif p.kind == "scalar":
            args.append(p.dtype)
        else:
            args.append(p.value)
    if block is not None and fn.known_block_size is None:
        fn = copy.copy(fn)  # the inferred contract, for this compile only: the user's object is left alone
        fn.known_block_size = list(block)
    compiled, diagnostics = compile_function(fn, tuple(args), {}, target, until=until)
    # annotation mismatches belong to the launch that passed the arguments (reported there)
    return compiled, [d for d in diagnostics if d.code != "DSL101"]
