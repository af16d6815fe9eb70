"""`kdsl export FILE::JIT_FUNCTION... -o DIR [--target sm_80,sm_90] [--prefix NAME]
[--example ARGS]... [--choose NAME]... [--build]`: jit functions as a C library.

Writes `DIR/NAME.h` (one `CUresult NAME(CUstream stream, <arguments>)` per jit function),
`DIR/NAME.c` (every cubin embedded, for every target; no dependency but the CUDA driver,
which it loads at run time), `DIR/NAME_launch_config.h` (each launch's kernel, block,
shared memory, registers and target) and `DIR/NAME.export.json` (what `dsl.load_export`
reads). NAME is `--prefix`, or the jit function's name when there is one; with a prefix,
entry points are `PREFIX_<jit name>`.

Specializations: each `--example` (Python arguments, evaluated in the file's namespace
with the `dsl` names, e.g. `--example "x=Tensor[f16, 2], y=Tensor[f16, 2]"`; prefix one with
`NAME:` to give it to one of several functions), else the function's `examples=`, else its
annotations. See `dsl.export.exporter` for how they dispatch and what `--choose` does.

A command built on this one passes an `Extension` (`python -m dsl.torch.cpp_library` writes the
functions as torch operators in C++ too); `kdsl export` itself never imports it.

Runs each file (the user's own program, run on request). Exit code: 0 when written, 1 when
a function did not compile or cannot be exported (the reason names the construct), 2 for
usage errors.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from dsl.module_analysis import read_program, run_module
from dsl.targets import DEFAULT_TARGET, TARGETS


class Extension:
    """What a command built on `kdsl export` adds: objects it exports besides jit functions,
    files it writes beside the export's, what `--build` builds after `lib<NAME>.so`. Its
    refusals are `dsl.export.exporter.ExportFailed` (printed; exit code 1)."""

    prog = "kdsl export"
    description = "Export jit functions as a C library."

    def jit_function_of(self, obj: Any) -> Any:
        """The jit function to export for an object FILE::NAME names that is not one (None: refused)."""
        return None

    def files(self, export: Any, objects: list[Any], choose: set[str]) -> dict[str, str]:
        """More files, from the export and the objects named (a jit function or another object)."""
        return {}

    def build(self, folder: str) -> list[Path]:
        return []

    def build_hint(self, folder: str) -> str | None:
        """What to run to build, printed without --build."""
        return None


def main(argv: list[str] | None = None, extension: Extension | None = None) -> int:
    extension = extension or Extension()
    parser = argparse.ArgumentParser(prog=extension.prog, description=extension.description)
    parser.add_argument("functions", nargs="+", metavar="FILE::JIT_FUNCTION")
    parser.add_argument("-o", "--output", required=True, metavar="DIR", help="the folder to write into")
    parser.add_argument("--target", action="append", metavar="sm_XX[,sm_YY]",
                        help=f"architectures to embed cubins for (default {DEFAULT_TARGET}); repeatable")
    parser.add_argument("--prefix", help="name of the files and prefix of the C names (default: the jit function's)")
    parser.add_argument("--example", action="append", default=[], metavar="ARGS",
                        help="a specialization, as Python arguments of the jit function; repeatable")
    parser.add_argument("--choose", action="append", default=[], metavar="NAME",
                        help="a Constexpr the entry point chooses (first specialization whose checks pass) instead "
                             "of taking it as an argument; repeatable")
    parser.add_argument("--build", action="store_true", help="also build lib<NAME>.so with gcc")
    args = parser.parse_args(argv)
    targets = [t for option in args.target or [DEFAULT_TARGET] for t in option.split(",") if t]
    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        parser.error(f"unknown target {unknown[0]!r}; known targets: {', '.join(TARGETS)}")
    if args.prefix is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", args.prefix):
        parser.error(f"--prefix {args.prefix!r} is not a C identifier")
    if args.prefix is None and len(args.functions) > 1:
        parser.error("several functions make one library: name it with --prefix")
    command = " ".join([extension.prog, *(argv if argv is not None else sys.argv[1:])])
    return _export(args, targets, command, extension)


def _export(args: argparse.Namespace, targets: list[str], command: str, extension: Extension) -> int:
    from dsl.export import emit_c
    from dsl.export.build import MANIFEST, build_command, build_library
    from dsl.export.c_types import C_KEYWORDS
    from dsl.export.exporter import ExportFailed, example_arguments, export_function, relative
    from dsl.export.launcher_plan import ExportRefused
    from dsl.export.model import Export
    from dsl.language.decorators import JitFunction

    prog = extension.prog
    namespaces: dict[str, dict[str, Any]] = {}
    exported = []
    objects = []  # what each export is of: its jit function, or what the extension took
    for item in args.functions:
        path, sep, name = item.partition("::")
        if not sep or not name:
            print(f"{prog}: {item!r}: name the function as FILE::JIT_FUNCTION", file=sys.stderr)
            return 2
        path = os.path.abspath(path)
        if path not in namespaces:
            source = read_program(path, "kdsl export")
            if source is None:
                return 2
            namespaces[path], diagnostics = run_module(source, path)
            for d in diagnostics:
                print(d.format(), file=sys.stderr)
            if any(d.is_error for d in diagnostics):
                return 1
        fn = obj = namespaces[path].get(name)
        if not isinstance(fn, JitFunction):
            fn = extension.jit_function_of(obj)
        if not isinstance(fn, JitFunction):
            jits = [n for n, v in namespaces[path].items() if isinstance(v, JitFunction)]
            print(f"{prog}: no @dsl.jit function named {name!r} in {path} (found: {', '.join(jits) or 'none'})",
                  file=sys.stderr)
            return 2
        entry = f"{args.prefix}_{name}" if args.prefix else name
        if entry in C_KEYWORDS or entry == "main":
            print(f"{prog}: the entry point would be named {entry!r}, which C or C++ reserves; name it with "
                  "--prefix", file=sys.stderr)
            return 2
        where = f"{relative(path)}:{fn.fn.__code__.co_firstlineno}"
        try:
            examples = [example_arguments(text, namespaces[path]) for text in _examples_of(args.example, name)]
            exported.append(export_function(fn, entry, where, targets, examples, set(args.choose)))
            objects.append(obj)
        except ExportFailed as err:
            for d in err.diagnostics:
                print(d.format(), file=sys.stderr)
            print(f"{where}: {prog}: {err}", file=sys.stderr)
            return 1
    base = args.prefix or exported[0].name
    export = Export(base, exported, command)
    try:
        files = {f"{base}.h": emit_c.header(export), f"{base}_launch_config.h": emit_c.config_header(export),
                 f"{base}.c": emit_c.source(export),
                 MANIFEST.format(base=base): json.dumps({"kdsl_export": 1, "base": base, "targets": targets,
                                                         "functions": [f.to_json() for f in exported]}, indent=2)}
        files.update(extension.files(export, objects, set(args.choose)))
    except ExportRefused as err:
        print(f"{prog}: cannot export {err}", file=sys.stderr)
        return 1
    except ExportFailed as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return 1
    os.makedirs(args.output, exist_ok=True)
    for file, text in files.items():
        with open(os.path.join(args.output, file), "w") as out:
            out.write(text)
    for fn in exported:
        _summary(fn)
    print("wrote " + ", ".join(os.path.join(args.output, f) for f in files))
    if args.build:
        try:
            print(f"built {build_library(args.output)}")
            for built in extension.build(args.output):
                print(f"built {built}")
        except (RuntimeError, ModuleNotFoundError) as err:
            print(f"{prog}: {err}", file=sys.stderr)
            return 1
    else:
        folder = Path(args.output)
        print("build: " + " ".join(build_command(folder / f"{base}.c", folder / f"lib{base}.so")))
        hint = extension.build_hint(args.output)
        if hint:
            print(hint)
    return 0


def _examples_of(texts: list[str], name: str) -> list[str]:
    """The --example texts for function `name`: those prefixed `name:` and those with no prefix."""
    out = []
    for text in texts:
        match = re.match(r"\s*([A-Za-z_]\w*)\s*:(?!=)", text)
        if match is None:
            out.append(text)
        elif match.group(1) == name:
            out.append(text[match.end():])
    return out


def _summary(fn: Any) -> None:
    from dsl.export.emit_c import declaration

    print(f"{fn.where}: {fn.jit_name} -> {declaration(fn)[-1]}")
    for i, spec in enumerate(fn.specs):
        print(f"  [{i}] {spec.description}")
        for build in spec.builds:
            kernels = ", ".join(f"{k.symbol} {k.resources.summary()}" if k.resources else k.symbol
                                for k in build.kernels)
            print(f"      {build.target}: {kernels}")


if __name__ == "__main__":
    sys.exit(main())
