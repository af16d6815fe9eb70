"""`kdsl build FILE... [--target sm_XX]`: compile declared specializations into the kernel cache.

A `@dsl.jit` function's `examples=` (or, without them, its annotations: `Tensor[f32, 2]`,
`Float32`, Constexpr defaults) name the specializations a program calls. Building
them ahead of time writes each one's cubin and launcher to the on-disk cache, the entry a
program's first call looks up, so that call loads it (tens of milliseconds) instead of
importing MLIR and compiling (a few hundred). Build for the GPU that will run the program
(`--target`, default sm_90 for H100 and H200) and into the cache directory it will read
(`KDSL_CACHE_DIR`, else the user cache directory): e.g. in a container image's build step.

An `@dsl.autotune` function builds, per example, the config `kdsl tune` recorded for the
attached GPU when there is one for `--target`, else every config (whichever a run then chooses
is cached).

Runs each file (the user's own program, run on request) statement by statement. Exit code:
0 when every declared specialization is in the cache, 1 when one failed to compile or to be
stored, 2 for usage errors.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from dsl.compiler import disk_cache
from dsl.compiler.api import parse_examples
from dsl.diagnostics import CompileError
from dsl.language.autotune import Config, spec_of
from dsl.language.decorators import JitFunction, hint_overrides
from dsl.module_analysis import dsl_functions, read_program, run_module
from dsl.runtime.autotune import build_configs
from dsl.targets import TARGETS

DEFAULT_TARGET = "sm_90"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kdsl build", description="Compile the examples= of every @dsl.jit "
                                     "function into the on-disk kernel cache.")
    parser.add_argument("files", nargs="+", metavar="FILE")
    parser.add_argument("--target", default=DEFAULT_TARGET, choices=sorted(TARGETS),
                        help=f"the architecture of the GPU that will run the program (default {DEFAULT_TARGET})")
    args = parser.parse_args(argv)
    if not disk_cache.enabled():
        print("kdsl build: KDSL_NO_DISK_CACHE is set, so there is no cache to build into", file=sys.stderr)
        return 2
    failed = False
    for path in args.files:
        status = _build_file(os.path.abspath(path), args.target)
        if status == 2:
            return 2
        failed |= status == 1
    print(f"cache: {disk_cache.cache_dir()}")
    return 1 if failed else 0


def _build_file(path: str, target: str) -> int:
    source = read_program(path, "kdsl build")
    if source is None:
        return 2
    namespace, diagnostics = run_module(source, path)
    failed = False
    for d in diagnostics:
        if d.is_error:
            print(d.format(), file=sys.stderr)
            failed = True
    for name, fn in dsl_functions(namespace, path):
        if not isinstance(fn, JitFunction):
            continue
        line = fn.fn.__code__.co_firstlineno
        # Without examples=, the annotations alone may fix the specialization (Tensor[f32, 2],
        # Float32, Constexpr defaults): that is the one a call with matching arrays uses.
        for args, kwargs, _ in parse_examples(fn) or [((), {}, None)]:
            try:
                configs = build_configs(fn, args, kwargs, target) if spec_of(fn) is not None else [None]
            except TypeError as err:  # an example of an autotuned function that sets a tuned parameter
                print(f"{path}:{line}: {name}: {err}", file=sys.stderr)
                failed = True
                continue
            for config in configs:
                failed |= not _build_one(fn, name, path, line, args, kwargs, config, target)
    return 1 if failed else 0


def _build_one(fn: JitFunction, name: str, path: str, line: int, args: tuple, kwargs: dict, config: Config | None,
               target: str) -> bool:
    """Builds one specialization (of one config of an autotuned function); False if it failed."""
    from dsl.runtime.jit_call import compile_entry

    hints = hint_overrides(config.hints) if config is not None else contextlib.nullcontext()
    if config is not None:
        kwargs = {**kwargs, **config.params}
    label = f" [{config.describe()}]" if config is not None else ""
    what = f"{name}({_specialization(fn, args, kwargs)}){label} for {target}"
    with hints:
        try:
            _, from_disk, _ = compile_entry(fn, args, kwargs, target)
            stored = from_disk or compile_entry(fn, args, kwargs, target)[1]
        except CompileError as err:
            for d in err.diagnostics:
                print(d.format(), file=sys.stderr)
            print(f"{path}:{line}: {what}: did not compile", file=sys.stderr)
            return False
    if not stored:
        print(f"{path}:{line}: {what}: compiled, but the cache entry could not be written "
              f"under {disk_cache.cache_dir()}", file=sys.stderr)
        return False
    print(f"{path}:{line}: {what}: {'already cached' if from_disk else 'built'}")
    return True


def _specialization(fn: JitFunction, args: tuple, kwargs: dict) -> str:
    """The parameters this example fixes, as the launcher's header reads them."""
    from dsl.compiler.specs import resolve_params
    from dsl.diagnostics import DiagnosticSink
    from dsl.frontend.source import function_source

    params = resolve_params(fn, function_source(fn.fn), args, kwargs, DiagnosticSink())
    return ", ".join(p.describe() for p in params or [])
