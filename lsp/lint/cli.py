"""`kdsl lint PATH...`: the language server's checks in CI, with meaningful exit codes.

Exit codes: 0 when no diagnostic is at or above `--fail-on`, 1 when some are, 2 when the
command line or configuration is wrong or lint itself failed (said on stderr). Problems
in the checked files, even a file that cannot be read or kills its analysis worker, are
diagnostics, never exit code 2.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from lsp.analysis import at_least, parse_severity, split_codes, unknown_selectors
from lsp.lint import config as lint_config
from lsp.lint.discovery import Excluder, discover
from lsp.lint.formats import cache_note, render
from lsp.lint.runner import Progress, lint_files
from lsp.worker import SANDBOXES


class _UsageError(Exception):
    pass


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text}")
    return value


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kdsl lint",
        description="Check kdsl kernels with the compiler, without a GPU.",
        epilog="Settings also come from [tool.kdsl] in the nearest pyproject.toml; options here win.",
    )
    parser.add_argument(
        "paths", nargs="*", default=["."], metavar="PATH", help="files or folders (default: .)"
    )
    parser.add_argument(
        "--select",
        action="append",
        metavar="CODES",
        help="only these codes or prefixes, comma separated (DSL2 selects DSL201...)",
    )
    parser.add_argument("--ignore", action="append", metavar="CODES", help="drop these codes or prefixes")
    parser.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="skip paths matching GLOB, relative to the current folder (repeatable)",
    )
    parser.add_argument("--target", metavar="sm_XX", help="GPU architecture to compile for (default: sm_90)")
    parser.add_argument(
        "--no-exec", action="store_true", help="static checks only: never run the checked modules' code"
    )
    parser.add_argument(
        "--no-cache", action="store_true", help="check every file again, ignoring results kept from earlier runs"
    )
    parser.add_argument(
        "--sandbox",
        choices=SANDBOXES,
        help="standard (default), or strict: also no network, via user namespaces; fails where unavailable",
    )
    parser.add_argument(
        "--fail-on",
        choices=["error", "warning", "info"],
        help="lowest severity that makes the exit code 1 (default: error)",
    )
    parser.add_argument(
        "--format",
        dest="output_format",
        choices=lint_config.FORMATS,
        default="text",
        help="output format (default: text)",
    )
    parser.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE instead of stdout")
    parser.add_argument(
        "--jobs", "-j", type=_positive_int, metavar="N", help="parallel workers (default: CPUs)"
    )
    parser.add_argument(
        "--timeout", type=_positive_float, metavar="S", help="time limit per file (default: 10)"
    )
    parser.add_argument(
        "--memory-limit-mb",
        type=_positive_int,
        metavar="MB",
        help="address-space limit per worker (default: 4096)",
    )
    return parser  # fmt: skip


def _codes(values: list[str] | None, option: str) -> tuple[str, ...] | None:
    if values is None:
        return None
    codes = split_codes(values)
    bad = unknown_selectors(codes)
    if bad:
        raise _UsageError(f"{option}: unknown code or prefix {', '.join(bad)}")
    return tuple(codes)


def run(args: argparse.Namespace, cwd: Path) -> int:
    if args.target is not None:
        lint_config.target_name(args.target, "--target")
    config = lint_config.with_cli(
        lint_config.load(cwd),
        select=_codes(args.select, "--select"),
        ignore=_codes(args.ignore, "--ignore"),
        extend_exclude=tuple(args.exclude),
        target=args.target,
        fail_on=parse_severity(args.fail_on) if args.fail_on else None,
        timeout=args.timeout,
        memory_limit_mb=args.memory_limit_mb,
        jobs=args.jobs,
        execute=False if args.no_exec else None,
        cache=False if args.no_cache else None,
        sandbox=args.sandbox,
        output_format=args.output_format,
    )
    excluder = Excluder(config.exclude, config.root, config.extend_exclude, cwd)
    files, missing = discover(args.paths, excluder)
    if missing:
        raise _UsageError(f"no such file or folder: {', '.join(missing)}")
    progress = Progress(len(files))
    try:
        results = lint_files(files, config, on_done=progress.advance)
    finally:
        progress.finish()
    report = render(config.output_format, results, cwd)
    note = cache_note(results)
    if note is not None:
        print(note, file=sys.stderr)
    if args.output:
        try:
            Path(args.output).write_text(report, encoding="utf-8")
        except OSError as exc:
            raise _UsageError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    else:
        sys.stdout.write(report)
        sys.stdout.flush()
    failing = at_least((d for r in results for d in r.diagnostics), config.fail_on)
    return 1 if failing else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    try:
        return run(args, Path.cwd())
    except (_UsageError, lint_config.ConfigError) as exc:
        print(f"kdsl lint: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kdsl lint: interrupted", file=sys.stderr)
        return 130
    except Exception:
        traceback.print_exc()
        print("kdsl lint: internal error (the traceback above says where); please report it", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
