"""One diagnostic model, shared by the compiler, the runtime, the lint and the editor.

The compiler never only prints: every problem it finds is a `Diagnostic` with a stable
code, a severity, a message and the exact Python `SourceRange` it is about. Errors are
raised inside a `CompileError` that carries all of them; warnings also go through Python's
`warnings` module at run time. Front ends (traceback text, `kdsl lint`, the language
server) each convert these objects once, in one place.

Ranges use 1-based lines and 0-based columns counted in characters (not UTF-8 bytes, which
is what Python's `ast` reports); the language server converts to UTF-16 positions.
"""

from __future__ import annotations

import dataclasses
import enum
import linecache
from dataclasses import dataclass, field
from typing import TypeVar

from dsl.records import Record

DOCS_URL = "https://github.com/kdsl/kdsl/blob/main/README.md"


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        """Higher is more severe; lets `--fail-on` compare severities."""
        return {"info": 0, "warning": 1, "error": 2}[self.value]


@dataclass(frozen=True)
class SourceRange(Record):
    """A span of Python source: 1-based lines, 0-based character columns, end exclusive."""

    file: str
    line: int
    column: int
    end_line: int
    end_column: int

    def contains_line(self, line: int) -> bool:
        return self.line <= line <= self.end_line

    @property
    def one_based(self) -> tuple[int, int, int, int]:
        """(line, column, end line, end column), all 1-based, as text, JSON, GitHub and SARIF
        output count them."""
        return self.line, self.column + 1, self.end_line, self.end_column + 1

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column + 1}"


T = TypeVar("T")


def relocate(value: T, file: str, new_file: str, line_delta: int = 0) -> T:
    """`value` with every `SourceRange` in `file` moved to `new_file` and down `line_delta`
    lines, at any depth of dataclasses, tuples, lists and dicts (AST nodes are left alone)."""
    if isinstance(value, SourceRange):
        if value.file != file:
            return value
        return dataclasses.replace(  # type: ignore[return-value]
            value, file=new_file, line=value.line + line_delta, end_line=value.end_line + line_delta
        )
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {
            f.name: relocate(getattr(value, f.name), file, new_file, line_delta)
            for f in dataclasses.fields(value)
            if f.init
        }
        return dataclasses.replace(value, **changes)  # type: ignore[return-value]
    if isinstance(value, tuple):
        return tuple(relocate(v, file, new_file, line_delta) for v in value)  # type: ignore[return-value]
    if isinstance(value, list):
        return [relocate(v, file, new_file, line_delta) for v in value]  # type: ignore[return-value]
    if isinstance(value, dict):
        return {k: relocate(v, file, new_file, line_delta) for k, v in value.items()}  # type: ignore[return-value]
    return value


@dataclass(frozen=True)
class TextEdit(Record):
    range: SourceRange
    new_text: str


@dataclass(frozen=True)
class Fix(Record):
    """A quick fix: a titled set of edits that resolves the diagnostic."""

    title: str
    edits: tuple[TextEdit, ...]


@dataclass(frozen=True)
class Related(Record):
    range: SourceRange
    message: str


@dataclass(frozen=True)
class Rule:
    code: str
    severity: Severity
    title: str
    description: str

    @property
    def url(self) -> str:
        return f"{DOCS_URL}#{self.code.lower()}"


CATALOGUE: dict[str, Rule] = {
    rule.code: rule
    for rule in (
        Rule("DSL101", Severity.WARNING, "annotation mismatch",
             "An argument's value type differs from the parameter's annotation."),
        Rule("DSL102", Severity.WARNING, "annotation is not a DSL type",
             "A kernel or jit parameter is annotated with something that is not a DSL value type."),
        Rule("DSL103", Severity.INFO, "not enough type information",
             "The function cannot be compiled without example arguments; add `examples=`."),
        Rule("DSL201", Severity.ERROR, "malformed known_block_size",
             "`known_block_size` must be three positive integers."),
        Rule("DSL202", Severity.ERROR, "launch block differs from known_block_size",
             "The block passed to `launch` contradicts the kernel's `known_block_size` contract."),
        Rule("DSL203", Severity.ERROR, "block exceeds target limits",
             "The launch block has more threads, or a larger dimension, than the target allows."),
        Rule("DSL204", Severity.ERROR, "grid exceeds target limits",
             "The launch grid is larger than the target allows."),
        Rule("DSL205", Severity.ERROR, "launch smem below the kernel's allocation",
             "`launch(smem=...)` gives less dynamic shared memory than the kernel's SharedAllocator uses."),
        Rule("DSL206", Severity.ERROR, "shared memory exceeds the target maximum",
             "The kernel's shared memory is larger than the target's per-block maximum."),
        Rule("DSL207", Severity.ERROR, "instruction of another target",
             "The kernel uses an instruction the target lacks (wgmma and setmaxnreg need sm_90a), or is "
             "written for another GPU than the target."),
        Rule("DSL301", Severity.ERROR, "type error in a kernel",
             "Mixed or unsupported types, a bad cast or a bad index in a kernel body."),
        Rule("DSL302", Severity.ERROR, "unsupported Python construct",
             "A Python statement or expression the DSL cannot lower (try, with, yield, ...)."),
        Rule("DSL303", Severity.ERROR, "value not defined on every path",
             "A variable defined in only one branch of a dynamic `if` (or only inside a dynamic loop)"
             " is used after it, or `None` is carried through dynamic control flow."),
        Rule("DSL304", Severity.ERROR, "kernel called outside a jit function",
             "`@kernel` functions are launched from `@jit` functions, not called directly."),
        Rule("DSL305", Severity.ERROR, "wgmma accumulator read while in flight",
             "A wgmma accumulator is read (or stored, converted, passed to another op) before a `dsl.wgmma_wait` "
             "that retires its group returned it: on the GPU the tensor cores may still be writing it."),
        Rule("DSL401", Severity.ERROR, "MLIR verifier error",
             "The generated IR failed verification; the range is the Python that produced the op."),
        Rule("DSL402", Severity.ERROR, "lowering or backend failure",
             "A compiler pass, ptxas or another backend tool failed."),
        Rule("DSL501", Severity.WARNING, "register spills",
             "ptxas spilled registers to local memory for this kernel."),
        Rule("DSL502", Severity.INFO, "low theoretical occupancy",
             "Theoretical occupancy for the launch block is below 50%."),
        Rule("DSL601", Severity.ERROR, "GPU launch or execution failure",
             "The GPU reported an error launching or running the kernel."),
        Rule("DSL001", Severity.ERROR, "module failed to run",
             "A top-level statement of the analysed module raised; the rest still ran."),
        Rule("DSL002", Severity.ERROR, "analysis worker failed",
             "The analysis worker crashed, ran out of time or memory while running user code."),
        Rule("DSL003", Severity.ERROR, "syntax error",
             "The file cannot be parsed as Python."),
    )
}


@dataclass(frozen=True)
class Diagnostic(Record):
    code: str
    severity: Severity
    message: str
    range: SourceRange
    related: tuple[Related, ...] = ()
    fixes: tuple[Fix, ...] = ()

    @classmethod
    def make(
        cls,
        code: str,
        message: str,
        range: SourceRange,
        related: tuple[Related, ...] | list[Related] = (),
        fixes: tuple[Fix, ...] | list[Fix] = (),
        severity: Severity | None = None,
    ) -> Diagnostic:
        """Builds a diagnostic with the catalogue's severity for `code` unless one is given."""
        return cls(code, severity or CATALOGUE[code].severity, message, range, tuple(related), tuple(fixes))

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def format(self) -> str:
        """`path:line:col: CODE message` — the form compilers and linters print."""
        r = self.range
        return f"{r.file}:{r.line}:{r.column + 1}: {self.code} {self.message}"

    def render(self) -> str:
        """The one-line form plus the source line and a caret under the range."""
        text = self.format()
        source_line = linecache.getline(self.range.file, self.range.line).rstrip("\n")
        if source_line:
            end = self.range.end_column if self.range.end_line == self.range.line else len(source_line)
            width = max(1, end - self.range.column)
            text += f"\n    {source_line}\n    {' ' * self.range.column}{'^' * width}"
        for rel in self.related:
            text += f"\n  note: {rel.range}: {rel.message}"
        return text


class DiagnosticWarning(UserWarning):
    """Carries a warning `Diagnostic` through Python's `warnings` machinery."""

    def __init__(self, diagnostic: Diagnostic):
        super().__init__(diagnostic.format())
        self.diagnostic = diagnostic


class CompileError(Exception):
    """Raised when compiling finds errors; `diagnostics` holds every one of them."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = list(diagnostics)
        super().__init__("\n".join(d.render() for d in self.diagnostics))


class ArgumentError(TypeError):
    """An argument cannot be passed to the kernel; raised before anything is launched."""


class DiagnosticError(Exception):
    """Raised inside the frontend to abort tracing one function with one diagnostic."""

    def __init__(self, diagnostic: Diagnostic):
        super().__init__(diagnostic.format())
        self.diagnostic = diagnostic


@dataclass
class DiagnosticSink:
    """Collects diagnostics while a function is compiled, so one mistake hides no other."""

    items: list[Diagnostic] = field(default_factory=list)

    def add(self, diagnostic: Diagnostic) -> None:
        if diagnostic not in self.items:
            self.items.append(diagnostic)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.items if d.is_error]
