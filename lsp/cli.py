"""The `kdsl` command: `kdsl lint`, `kdsl lsp`, `kdsl ir`, `kdsl build`, `kdsl tune`, `kdsl export`,
`kdsl profile` and `kdsl debug`.

Each subcommand lives in its own module and is imported only when chosen, so `kdsl lint`
does not pay for pygls and `kdsl lsp` does not pay for the lint front end.
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable, Sequence

USAGE = """usage: kdsl <command> [options]

commands:
  lint PATH...   check kernels with the compiler (text, json, sarif or github output)
  lsp            run the language server over stdio
  ir FILE        print a function's IR at a compiler stage
  build FILE...  compile the jit functions' examples= into the on-disk kernel cache
  tune FILE      tune the @dsl.autotune functions on this GPU and record their choices
  export FILE::JIT_FUNCTION -o DIR
                 write jit functions as a C library (header, source, launch configs)
  profile FILE::JIT_FUNCTION
                 the GPU's counters for one call, per Python line (Nsight Compute)
  debug          run the debug adapter over stdio (Debug Adapter Protocol; kernels on the
                 CPU interpreter, stopped at their Python lines)

`kdsl <command> --help` describes each command's options.
"""


def drop_workspace_from_path() -> None:
    """`python -m lsp` puts the current folder first on `sys.path`; take it off again.

    Run in a user's workspace, that entry would make a workspace's own `dsl/` package (or a
    `json.py`) shadow the installed one, so merely starting the server or lint would run
    workspace code, trusted or not. Call this before importing anything but the standard
    library. (The `kdsl` console script never has the entry: its first path is its own folder.)
    """
    if sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]


def _run_lint(argv: list[str]) -> int:
    from lsp.lint.cli import main

    return main(argv)


def _run_lsp(argv: list[str]) -> int:
    from lsp.server import main

    return _call(main, argv, "kdsl lsp")


def _run_ir(argv: list[str]) -> int:
    from dsl.cli_ir import main

    return _call(main, argv, "kdsl ir")


def _call(entry: Callable[..., int | None], argv: list[str], prog: str) -> int:
    """Calls a subcommand's `main(argv)`, or `main()` with `sys.argv` set for ones that take none."""
    try:
        if inspect.signature(entry).parameters:
            return entry(argv) or 0
        sys.argv = [prog, *argv]
        return entry() or 0
    except BrokenPipeError:  # `kdsl ir ... | head`: the reader left; not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _run_build(argv: list[str]) -> int:
    from dsl.cli_build import main

    return _call(main, argv, "kdsl build")


def _run_tune(argv: list[str]) -> int:
    from dsl.cli_tune import main

    return _call(main, argv, "kdsl tune")


def _run_profile(argv: list[str]) -> int:
    from dsl.cli_profile import main

    return _call(main, argv, "kdsl profile")


def _run_export(argv: list[str]) -> int:
    from dsl.cli_export import main

    return _call(main, argv, "kdsl export")


def _run_debug(argv: list[str]) -> int:
    from lsp.dap.server import main

    return _call(main, argv, "kdsl debug")


COMMANDS: dict[str, Callable[[list[str]], int]] = {
    "lint": _run_lint, "lsp": _run_lsp, "ir": _run_ir, "build": _run_build, "tune": _run_tune,
    "export": _run_export, "profile": _run_profile, "debug": _run_debug,
}


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("kdsl")
    except metadata.PackageNotFoundError:
        return "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        sys.stdout.write(USAGE)
        return 0 if args else 2
    if args[0] in ("-V", "--version"):
        print(f"kdsl {_version()}")
        return 0
    command = COMMANDS.get(args[0])
    if command is None:
        sys.stderr.write(f"kdsl: unknown command {args[0]!r}\n\n{USAGE}")
        return 2
    return command(args[1:])


if __name__ == "__main__":
    drop_workspace_from_path()
    sys.exit(main())
