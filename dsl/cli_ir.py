"""`kdsl ir FILE[::FUNCTION] [--stage STAGE] [--target sm_XX] [--line-cost]`: print a stage of
each function (`--stage c`: a jit function's C entry point, as `kdsl export` writes it).

Runs the file (it is the user's own program, run on request) statement by statement,
compiles every kernel and jit function (or the one named) and prints the chosen stage
with a resources summary. With `--stage sass --line-cost`, each function's SASS is followed
by what each source line costs in it (`dsl.compiler.source_maps.sass_line_costs`, the figures
the editor's line-cost hints show). Diagnostics go to stderr as `path:line:col: CODE message`;
the exit code is 1 when any error was found, 2 for usage errors.
"""

from __future__ import annotations

import argparse
import os
import sys

from dsl.compiler.stages import TEXT_STAGES
from dsl.module_analysis import analyze_source, read_program
from dsl.targets import TARGETS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kdsl ir", description="Print a compiler stage of a file's kernels.")
    parser.add_argument("file", help="FILE or FILE::FUNCTION")
    parser.add_argument("--stage", default="ptx", choices=TEXT_STAGES)
    parser.add_argument("--target", default=None, choices=sorted(TARGETS))
    parser.add_argument("--line-cost", action="store_true",
                        help="with --stage sass: SASS instructions per source line (global, shared, tensor-core)")
    args = parser.parse_args(argv)
    if args.line_cost and args.stage != "sass":
        parser.error("--line-cost needs --stage sass")
    path, _, only = args.file.partition("::")
    path = os.path.abspath(path)
    source = read_program(path, "kdsl ir")
    if source is None:
        return 2
    report = analyze_source(source, path, target=args.target)
    functions = [f for f in report.functions if not only or f.name == only]
    if only and not functions:
        names = ", ".join(f.name for f in report.functions) or "none"
        print(f"kdsl ir: no kernel or jit function named {only!r} in {path} (found: {names})", file=sys.stderr)
        return 2
    for fn in functions:
        compiled = fn.compiled
        print(f"// ===== {fn.kind} {fn.name} =====")
        if compiled is None:
            print("// (did not compile; see the diagnostics)")
            continue
        for k in compiled.kernels:
            if k.resources is not None:
                print(f"// {k.symbol}: {k.resources.summary()}")
        text = compiled.sass if args.stage == "sass" else compiled.stages.get(args.stage)
        if text is None and args.stage == "c" and fn.kind == "jit":
            from dsl.export.emit_c import c_stage

            text = c_stage(compiled)  # what `kdsl export` writes for this specialization
        if text is None:
            reason = f"this is a kernel ({'launchers' if args.stage == 'launcher' else 'C entry points'} belong to " \
                "jit functions)" if args.stage in ("launcher", "c") else "the tool for it (nvdisasm) was not found"
            print(f"// stage {args.stage} is not available: {reason}")
            continue
        print(text.rstrip("\n"))
        if args.line_cost:
            print(line_cost_table(text, path, source))
    diagnostics = report.diagnostics + [d for f in functions for d in f.diagnostics]
    seen = []
    for d in diagnostics:
        if d not in seen:
            seen.append(d)
            print(d.format(), file=sys.stderr)
    return 1 if any(d.is_error for d in seen) else 0


def line_cost_table(sass: str, path: str, source: str) -> str:
    """`// line  cost  source text` per line of `path` the SASS names (other files by name)."""
    from dsl.compiler.source_maps import sass_line_costs

    lines = source.splitlines()
    rows = ["// SASS per source line (all instructions: global memory, shared memory, tensor-core)"]
    for cost in sass_line_costs(sass):
        where = f"{cost.line:>5}" if cost.file == path else f"{cost.file}:{cost.line}"
        text = lines[cost.line - 1].strip() if cost.file == path and 0 < cost.line <= len(lines) else ""
        rows.append(f"// {where}  {cost.summary():<32}  {text}".rstrip())
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
