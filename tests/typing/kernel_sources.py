"""The kernel sources the other tests compile, collected so the type checkers can read them.

Most tests write their kernels as strings (`HEADER + '''...'''`, implicitly joined literals)
or keep them in `data/` files. This module finds them by reading each test file's AST: a
string expression built only from literals, `+`, module-level string constants and
`.format` with literal arguments is evaluated; one that defines a `@dsl.kernel` or
`@dsl.jit` function is a kernel source.
Many are wrong on purpose (diagnostic tests), so `write_valid_sources` keeps those the DSL
itself accepts: `kdsl lint` reports no error, and no contradicted annotation, for them.
A source completed from run-time values (an f-string, `.format(hints=hints)`) is not
checked: found at all, it is its template, which the DSL rejects.
"""

from __future__ import annotations

import ast
import fcntl
import hashlib
import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
OWN = Path(__file__).resolve().parent  # tests/typing: its data files are checked by its own tests
MARKERS = ("@dsl.kernel", "@dsl.jit", "@kernel", "@jit")
REJECTING_WARNINGS = {"DSL101"}  # an argument contradicts its parameter's annotation


@dataclass(frozen=True)
class KernelSource:
    """One kernel source: where it was found (`file:line:column`) and its text."""

    origin: str
    text: str

    @property
    def file_name(self) -> str:
        """A module name unique per source, e.g. `compiler_test_language_L42_C14.py`."""
        where, line, column = self.origin.rsplit(":", 2)
        stem = Path(where).with_suffix("").as_posix().replace("/", "_").replace(".", "_")
        return f"{stem}_L{line}_C{column}.py"


def _string_value(node: ast.expr, constants: dict[str, str]) -> str | None:
    """The value of a string expression of literals, `+`, known constants and `.format` with
    literal arguments (`KERNEL.format(hints="")`), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        template = _string_value(node.func.value, constants)
        values = [_string_value(arg.value, constants) for arg in node.keywords if arg.arg is not None]
        if template is None or node.args or None in values or len(values) != len(node.keywords):
            return None
        try:
            return template.format(**dict(zip((arg.arg for arg in node.keywords), values)))
        except (KeyError, IndexError, ValueError):  # a placeholder the call does not fill
            return None
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _string_value(node.left, constants), _string_value(node.right, constants)
        return None if left is None or right is None else left + right
    return None


def _module_constants(tree: ast.Module) -> dict[str, str]:
    constants: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = _string_value(node.value, constants)
            if value is not None:
                constants[node.targets[0].id] = value
    return constants


def _is_kernel_source(text: str) -> bool:
    return "import dsl" in text and any(marker in text for marker in MARKERS)


def sources_in_test_file(path: Path) -> list[KernelSource]:
    """The largest evaluable string expressions of `path` that hold a kernel source."""
    tree = ast.parse(path.read_text(), str(path))
    constants = _module_constants(tree)
    found: list[KernelSource] = []
    taken: set[int] = set()  # ids of nodes inside an expression already taken
    for node in ast.walk(tree):  # breadth-first: an outer expression is met before its parts
        if id(node) in taken or not isinstance(node, ast.expr):
            continue
        text = _string_value(node, constants)
        if text is None or not _is_kernel_source(text):
            continue
        taken.update(id(part) for part in ast.walk(node))
        origin = f"{path.relative_to(TESTS).as_posix()}:{node.lineno}:{node.col_offset}"
        found.append(KernelSource(origin, textwrap.dedent(text).lstrip("\n")))
    return found


def all_sources() -> list[KernelSource]:
    """Every kernel source of the tests: in strings of test files, and data files."""
    found: list[KernelSource] = []
    for path in sorted(TESTS.rglob("*.py")):
        if OWN in path.parents:
            continue
        if "data" in path.relative_to(TESTS).parts:
            text = path.read_text(errors="replace")
            if _is_kernel_source(text):
                found.append(KernelSource(f"{path.relative_to(TESTS).as_posix()}:1:0", text))
        else:
            found.extend(sources_in_test_file(path))
    return found


def write_valid_sources(workdir: Path, shared: Path | None = None) -> list[KernelSource]:
    """Writes the kernel sources the DSL accepts to `workdir`, each under its `file_name`.

    The DSL's verdict is `kdsl lint`'s: it runs each module in an isolated worker with a time
    limit (some data files exit or hang on purpose) and traces and compiles its functions. A
    source with an error (a syntax error, an unfilled template, DSL301...) or an annotation
    the arguments contradict (DSL101) is not valid code, and a type checker may flag it.

    `shared`, a folder every pytest worker sees: the first worker to get there lints and leaves
    the verdict there (keyed by the sources' digest), the others wait for it and read it, so the
    sources are linted once a run, with both cores, rather than once per worker on one each.
    """
    sources = [source for source in all_sources() if _parses(source.text)]
    for source in sources:
        (workdir / source.file_name).write_text(source.text)
    if shared is None:
        rejected = _rejected(workdir)
    else:
        digest = hashlib.sha256("\0".join(f"{s.file_name}\0{s.text}" for s in sources).encode()).hexdigest()[:16]
        verdict = shared / f"kernel-sources-{digest}.json"
        with open(shared / f"kernel-sources-{digest}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # held while the first worker lints
            if not verdict.exists():
                verdict.write_text(json.dumps(sorted(_rejected(workdir))))
            rejected = set(json.loads(verdict.read_text()))
    for name in rejected:
        (workdir / name).unlink()
    return [source for source in sources if source.file_name not in rejected]


def _rejected(workdir: Path) -> set[str]:
    """The files of `workdir` that `kdsl lint` rejects."""
    report = workdir / "lint.json"
    subprocess.run([sys.executable, "-m", "lsp.cli", "lint", str(workdir), "--format", "json", "--output",
                    str(report), "--timeout", "30"], cwd=workdir, capture_output=True, timeout=900)
    rejected = {Path(d["path"]).name for d in json.loads(report.read_text())
                if d["severity"] == "error" or d["code"] in REJECTING_WARNINGS}
    report.unlink()
    return rejected


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except SyntaxError:
        return False
    return True
