"""The generated programs as a small tree, so the generator and the shrinker share one form.

A program is kept as data (expressions and statements) rather than as text because the
shrinker has to take it apart: drop a statement, keep one branch of an `if`, replace an
expression by a typed zero. `render` turns the tree into the module source that both the
compiler and the reference run; each node knows the DSL type of its value, which is what
lets the generator write only well-typed code (or an ill-typed line on purpose).

Every kernel is `@dsl.kernel(contract=False)`: with contraction on, the GPU may fuse
`a * b + c` into one FMA and round once where the reference rounds twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from dsl.language.types import DType, boolean, i32

INDENT = "    "
WIDTH = 8  # input elements per thread: thread g reads x[g * WIDTH + 0 .. 7] (x[g, 0 .. 7] at rank 2)
LIST_LEN = 4  # the per-thread list `acc`
SHARED_COLS = 4  # the shared array `sh` has a row of this many elements per thread of the block
HIST = 16  # elements of the atomics' target `hist`


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
    value: int | float

    @property
    def type(self) -> DType | None:
        return None

    def render(self) -> str:
        text = repr(self.value)
        return f"({text})" if text.startswith("-") else text


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
    rank: int = 1  # 2: `x[g, offset]`

    @property
    def type(self) -> DType | None:
        return self.dtype

    def render(self) -> str:
        if isinstance(self.offset, Lit) or (isinstance(self.offset, Name) and self.offset.dtype is None):
            column = self.offset.render()
        else:
            column = f"({self.offset.render()} & {WIDTH - 1})"
        return f"{self.tensor}[g, {column}]" if self.rank == 2 else f"{self.tensor}[g * {WIDTH} + {column}]"

    def children(self) -> tuple[Expr, ...]:
        return (self.offset,)

    def with_children(self, kids: tuple[Expr, ...]) -> Expr:
        return replace(self, offset=kids[0])


@dataclass(frozen=True)
class ShLoad(Expr):
    """`sh[t, col]` (the thread's own row), or `sh[row & (rows - 1), col]` (any row)."""

    dtype: DType
    col: Expr  # a Lit, or an i32 expression masked with & (SHARED_COLS - 1)
    row: Expr | None = None
    rows: int = 32

    @property
    def type(self) -> DType | None:
        return self.dtype

    def render(self) -> str:
        row = "t" if self.row is None else f"({self.row.render()} & {self.rows - 1})"
        return f"sh[{row}, {shared_column(self.col)}]"

    def children(self) -> tuple[Expr, ...]:
        return (self.col,) if self.row is None else (self.col, self.row)

    def with_children(self, kids: tuple[Expr, ...]) -> Expr:
        return replace(self, col=kids[0], row=kids[1] if len(kids) > 1 else None)


def shared_column(col: Expr) -> str:
    return col.render() if isinstance(col, Lit) else f"({col.render()} & {SHARED_COLS - 1})"


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
    """`out[g * slots + slot] = value` (`out[g, slot]` at rank 2); the value has the output's type."""

    slot: int
    value: Expr
    rank: int = 1

    def render(self, depth: int) -> list[str]:
        where = f"g, {self.slot}" if self.rank == 2 else f"g * SLOTS + {self.slot}"
        return [INDENT * depth + f"out[{where}] = {self.value.render()}"]


@dataclass(frozen=True)
class ShStore(Stmt):
    """`sh[t, col] = value`: a thread writes its own row of the shared array only."""

    col: Expr
    value: Expr

    def render(self, depth: int) -> list[str]:
        return [INDENT * depth + f"sh[t, {shared_column(self.col)}] = {self.value.render()}"]


@dataclass(frozen=True)
class Atomic(Stmt):
    """`dsl.atomic_<kind>(hist, index & (HIST - 1), value)`, its old value unused."""

    kind: str
    index: Expr
    value: Expr

    def render(self, depth: int) -> list[str]:
        index = self.index.render() if isinstance(self.index, Lit) else f"{self.index.render()} & {HIST - 1}"
        return [INDENT * depth + f"dsl.atomic_{self.kind}(hist, {index}, {self.value.render()})"]


@dataclass(frozen=True)
class Barrier(Stmt):
    """`dsl.barrier()`; `phase`: one the shared-memory discipline relies on (never shrunk away)."""

    phase: bool = True

    def render(self, depth: int) -> list[str]:
        return [INDENT * depth + "dsl.barrier()"]


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
class While(Stmt):
    """A run-time `while` that ends: `w = 0 (i32)`, `while w < limit [and cond]:`, `w += 1` first."""

    var: str
    limit: Expr
    cond: Expr | None
    body: tuple[Stmt, ...]

    def render(self, depth: int) -> list[str]:
        test = f"{self.var} < {self.limit.render()}"
        if self.cond is not None:
            test += f" and {self.cond.render()}"
        pad = INDENT * (depth + 1)
        return [INDENT * depth + f"{self.var} = dsl.cast(0, dsl.i32)", INDENT * depth + f"while {test}:",
                pad + f"{self.var} += 1"] + [line for s in self.body for line in s.render(depth + 1)]


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
    refusal_stmt: Stmt | None = None  # that line (at the top level of `body`)
    extra_types: tuple[DType, ...] = field(default=())
    rank2: tuple[str, ...] = ()  # the tensors (inputs, `out`) of shape (threads, WIDTH or SLOTS)
    hist: DType | None = None  # the element type of `hist`, the atomics' target, when there is one

    @property
    def threads(self) -> int:
        return self.block * self.grid

    def type_names(self) -> list[str]:
        names = {t.name for _, t in self.tensors} | {self.out_dtype.name} | {t.name for t in self.extra_types}
        return sorted(names | {"i32"} | ({self.hist.name} if self.hist else set()))

    def annotation(self, name: str, t: DType) -> str:
        return f"{name}: Tensor[{t.name}, 2]" if name in self.rank2 else f"{name}: Tensor[{t.name}]"

    def render(self) -> str:
        params = [self.annotation(name, t) for name, t in self.tensors] + [self.annotation("out", self.out_dtype)]
        names = [name for name, _ in self.tensors] + ["out"]
        if self.hist is not None:
            params.append(f"hist: Tensor[{self.hist.name}]")
            names.append("hist")
        signature = f"{', '.join(params)}, n: Int32, C: Constexpr[int]"
        lines = ["import dsl", f"from dsl import Constexpr, Int32, Tensor, {', '.join(self.type_names())}", "",
                 f"SLOTS = {self.slots}", ""]
        for h in self.helpers:
            lines += ["", *h.render(), ""]
        lines += ["", "@dsl.kernel(contract=False)", f"def k({signature}):",
                  f"{INDENT}t = dsl.thread_idx.x", f"{INDENT}g = dsl.block_idx.x * dsl.block_dim.x + t"]
        lines += render_block(self.prologue, 1) if self.prologue else []
        lines += render_block(self.body, 1)
        lines += ["", "", "@dsl.jit",
                  f"def run({signature} = {self.const}):",
                  f"{INDENT}k({', '.join(names)}, n, C).launch(grid={self.grid}, block={self.block})", ""]
        return "\n".join(lines)
