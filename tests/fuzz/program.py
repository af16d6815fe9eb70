"""The generated programs as a small tree, so the generator and the shrinker share one form.

A program is kept as data (expressions and statements) rather than as text because the
shrinker has to take it apart: drop a statement, keep one branch of an `if`, replace an
expression by a typed zero. `render` turns the tree into the module source that both the
compiler and the reference run; each node knows the DSL type of its value, which is what
lets the generator write only well-typed code (or an ill-typed line on purpose).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from dsl.language.types import DType, boolean, i32

INDENT = "    "
WIDTH = 8  # input elements per thread: thread g reads x[g * WIDTH + 0 .. 7]
LIST_LEN = 4  # the per-thread list `acc`


# --- expressions ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Expr:
    """An expression; `type` is its DSL type, None for a Python literal (typed by its partner)."""

    @property
    def type(self) -> DType | None:
        raise NotImplementedError

    def render(self) -> str:
        raise NotImplementedError

    def children(self) -> tuple[Expr, ...]:
        return ()

    def with_children(self, kids: tuple[Expr, ...]) -> Expr:
        return self


@dataclass(frozen=True)
class Lit(Expr):
    value: int

    @property
    def type(self) -> DType | None:
        return None

    def render(self) -> str:
        return f"({self.value})" if self.value < 0 else str(self.value)


@dataclass(frozen=True)
class Name(Expr):
    name: str
    dtype: DType | None

    @property
    def type(self) -> DType | None:
        return self.dtype

    def render(self) -> str:
        return self.name


@dataclass(frozen=True)
class Load(Expr):
    """`x[g * WIDTH + offset]`; a run-time offset is masked to stay inside the thread's row."""

    tensor: str
    dtype: DType
    offset: Expr  # a Lit (0..7), a compile-time Name, or an i32 expression masked with & 7

    @property
    def type(self) -> DType | None:
        return self.dtype

    def render(self) -> str:
        if isinstance(self.offset, Lit) or (isinstance(self.offset, Name) and self.offset.dtype is None):
            return f"{self.tensor}[g * {WIDTH} + {self.offset.render()}]"
        return f"{self.tensor}[g * {WIDTH} + ({self.offset.render()} & {WIDTH - 1})]"

    def children(self) -> tuple[Expr, ...]:
        return (self.offset,)

    def with_children(self, kids: tuple[Expr, ...]) -> Expr:
        return replace(self, offset=kids[0])


@dataclass(frozen=True)
class Bin(Expr):
    op: str
    a: Expr
    b: Expr
    dtype: DType | None

    @property
    def type(self) -> DType | None:
        return self.dtype

    def render(self) -> str:
        return f"({self.a.render()} {self.op} {self.b.render()})"

    def children(self) -> tuple[Expr, ...]:
        return (self.a, self.b)

    def with_children(self, kids: tuple[Expr, ...]) -> Expr:
        return replace(self, a=kids[0], b=kids[1])


@dataclass(frozen=True)
class Unary(Expr):
    op: str  # "-", "~", "not "
    a: Expr

    @property
    def type(self) -> DType | None:
        return boolean if self.op == "not " else self.a.type

    def render(self) -> str:
        return f"({self.op}{self.a.render()})"

    def children(self) -> tuple[Expr, ...]:
        return (self.a,)

    def with_children(self, kids: tuple[Expr, ...]) -> Expr:
        return replace(self, a=kids[0])


@dataclass(frozen=True)
class Call(Expr):
    """`dsl.min(a, b)`, `dsl.max`, `dsl.abs(a)`, or a helper `h0(a, b)`."""

    fn: str
    args: tuple[Expr, ...]
    dtype: DType | None

    @property
    def type(self) -> DType | None:
        return self.dtype

    def render(self) -> str:
        return f"{self.fn}({', '.join(a.render() for a in self.args)})"

    def children(self) -> tuple[Expr, ...]:
        return self.args

    def with_children(self, kids: tuple[Expr, ...]) -> Expr:
        return replace(self, args=kids)


@dataclass(frozen=True)
class Cast(Expr):
    a: Expr
    dtype: DType
    method: bool = False  # `(a).to(dsl.T)` instead of `dsl.cast(a, dsl.T)`

    @property
    def type(self) -> DType | None:
        return self.dtype

    def render(self) -> str:
        if self.method and self.a.type is not None:
            return f"{self.a.render()}.to(dsl.{self.dtype.name})"
        return f"dsl.cast({self.a.render()}, dsl.{self.dtype.name})"

    def children(self) -> tuple[Expr, ...]:
        return (self.a,)

    def with_children(self, kids: tuple[Expr, ...]) -> Expr:
        return replace(self, a=kids[0])


@dataclass(frozen=True)
class IfExp(Expr):
    cond: Expr
    a: Expr
    b: Expr

    @property
    def type(self) -> DType | None:
        return self.a.type or self.b.type

    def render(self) -> str:
        return f"({self.a.render()} if {self.cond.render()} else {self.b.render()})"

    def children(self) -> tuple[Expr, ...]:
        return (self.cond, self.a, self.b)

    def with_children(self, kids: tuple[Expr, ...]) -> Expr:
        return replace(self, cond=kids[0], a=kids[1], b=kids[2])


def typed_zero(dtype: DType | None) -> Expr:
    """The simplest expression of a type: what the shrinker puts in place of a subtree."""
    if dtype is None:
        return Lit(0)
    if dtype == boolean:
        return Bin("!=", Cast(Lit(0), i32), Lit(0), boolean)  # a run-time False
    return Cast(Lit(0), dtype)


# --- statements ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Stmt:
    def render(self, depth: int) -> list[str]:
        raise NotImplementedError


@dataclass(frozen=True)
class Assign(Stmt):
    target: str  # `v1` or `acc[2]`
    value: Expr
    aug: str = ""  # "+" for `+=`, ...

    def render(self, depth: int) -> list[str]:
        return [INDENT * depth + f"{self.target} {self.aug}= {self.value.render()}"]


@dataclass(frozen=True)
class Store(Stmt):
    """`out[g * slots + slot] = value`; the value already has the output's type."""

    slot: int
    value: Expr

    def render(self, depth: int) -> list[str]:
        return [INDENT * depth + f"out[g * SLOTS + {self.slot}] = {self.value.render()}"]


@dataclass(frozen=True)
class If(Stmt):
    cond: Expr
    body: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...] = ()

    def render(self, depth: int) -> list[str]:
        lines = [INDENT * depth + f"if {self.cond.render()}:"] + render_block(self.body, depth + 1)
        rest = self.orelse
        while len(rest) == 1 and isinstance(rest[0], If):  # elif chains
            lines += [INDENT * depth + f"elif {rest[0].cond.render()}:"] + render_block(rest[0].body, depth + 1)
            rest = rest[0].orelse
        if rest:
            lines += [INDENT * depth + "else:"] + render_block(rest, depth + 1)
        return lines


@dataclass(frozen=True)
class For(Stmt):
    """`for var in range(args)` (run-time) or `for var in dsl.static_range(args)` (unrolled)."""

    var: str
    args: tuple[Expr, ...]
    body: tuple[Stmt, ...]
    static: bool = False

    def render(self, depth: int) -> list[str]:
        fn = "dsl.static_range" if self.static else "range"
        head = f"for {self.var} in {fn}({', '.join(a.render() for a in self.args)}):"
        return [INDENT * depth + head] + render_block(self.body, depth + 1)


@dataclass(frozen=True)
class Exit(Stmt):
    kind: str  # "break", "continue", "return"

    def render(self, depth: int) -> list[str]:
        return [INDENT * depth + self.kind]


def render_block(stmts: tuple[Stmt, ...], depth: int) -> list[str]:
    lines = [line for s in stmts for line in s.render(depth)]
    return lines or [INDENT * depth + "pass"]


# --- the program ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Helper:
    """A plain Python helper traced inline: `r = expr; if cond: r = alt; return r`."""

    name: str
    params: tuple[tuple[str, DType], ...]
    dtype: DType
    value: Expr
    cond: Expr | None = None
    alt: Expr | None = None

    def render(self) -> list[str]:
        lines = [f"def {self.name}({', '.join(p for p, _ in self.params)}):", f"{INDENT}r = {self.value.render()}"]
        if self.cond is not None and self.alt is not None:
            lines += [f"{INDENT}if {self.cond.render()}:", f"{INDENT * 2}r = {self.alt.render()}"]
        return lines + [f"{INDENT}return r"]


@dataclass(frozen=True)
class Program:
    """One generated kernel, its launch and its arguments' values (drawn from `data_seed`)."""

    seed: int
    tensors: tuple[tuple[str, DType], ...]
    out_dtype: DType
    slots: int
    prologue: tuple[Stmt, ...]
    body: tuple[Stmt, ...]
    helpers: tuple[Helper, ...] = ()
    n: int = 3  # the run-time trip count parameter
    const: int = 2  # the Constexpr parameter C
    block: int = 32
    grid: int = 1
    data_seed: int = 0
    refusal: str | None = None  # why the compiler must refuse it (an ill-typed line written on purpose)
    extra_types: tuple[DType, ...] = field(default=())

    @property
    def threads(self) -> int:
        return self.block * self.grid

    def type_names(self) -> list[str]:
        names = {t.name for _, t in self.tensors} | {self.out_dtype.name} | {t.name for t in self.extra_types}
        return sorted(names | {"i32"})

    def render(self) -> str:
        params = ", ".join(f"{name}: Tensor[{t.name}]" for name, t in self.tensors)
        signature = f"{params}, out: Tensor[{self.out_dtype.name}], n: Int32, C: Constexpr[int]"
        args = ", ".join(name for name, _ in self.tensors)
        lines = ["import dsl", f"from dsl import Constexpr, Int32, Tensor, {', '.join(self.type_names())}", "",
                 f"SLOTS = {self.slots}", ""]
        for h in self.helpers:
            lines += ["", *h.render(), ""]
        lines += ["", "@dsl.kernel", f"def k({signature}):",
                  f"{INDENT}t = dsl.thread_idx.x", f"{INDENT}g = dsl.block_idx.x * dsl.block_dim.x + t"]
        lines += render_block(self.prologue, 1) if self.prologue else []
        lines += render_block(self.body, 1)
        lines += ["", "", "@dsl.jit",
                  f"def run({signature} = {self.const}):",
                  f"{INDENT}k({args}, out, n, C).launch(grid={self.grid}, block={self.block})", ""]
        return "\n".join(lines)
