"""A seeded generator of kernels: the same seed always gives the same program and data.

What it writes (the expressions themselves: `expressions.py`), and the disciplines that keep
each program's result defined, so that one reference can promise it:

- inputs `Tensor[T]` or `Tensor[T, 2]` of integers and floats (f16, bf16, f32, f64), one
  output; each thread reads its own row of `WIDTH` elements (`x[g * WIDTH + k]` or `x[g, k]`)
  and writes its own `SLOTS` outputs; in about 40% of programs every type is an integer;
- scalar variables of fixed types (a bool among them at times), a per-thread list `acc`
  updated with compile-time indices, run-time `if / elif / else`, `for` over run-time
  `range`s, run-time `while` loops bounded by a counter (`w < limit and cond`, the counter
  stepped first so `continue` cannot spin), `break` / `continue` / `return` at any depth,
  `dsl.static_range` loops, a helper traced inline, a `Constexpr` parameter (`C`);
- barriers only at the top level of the kernel (uniform control flow; threads that returned
  earlier do not count), and, in a few programs, one `if <divergent>: dsl.barrier()`: the
  reference says whether the GPU would hang (a thread that skipped it reaches another) and
  the interpreter must fault (DSL601) exactly then;
- a shared array `sh` of one row per thread, written in the prologue and then used in
  phases between top-level barriers: a thread writes only its own row and reads only it, or,
  in the next phase, reads any row and writes none (no race, whatever the order of threads);
- warp operations (shuffles with every `width`, `ballot`, `any`, `all`, `match_any`,
  `warp_reduce`) as top-level statements `v = dsl.<op>(...)` before any `return` may have run,
  so every lane of every warp takes part;
- integer atomics (add, min or max: one kind per program; f32 / f64 min or max) into `hist`
  anywhere, their old value unused: the final `hist` is the same in any order;
- a small share of programs (`REFUSAL_RATE`) carry one ill-typed line on purpose (mixed
  signedness, integer with float, a store without its cast, a literal that does not fit,
  `/` on integers, `//` or shifts on floats, arithmetic on a bool, an atomic of another type):
  the compiler must refuse those, with DSL301.
"""

from __future__ import annotations

from dsl.language.types import DType, bf16, boolean, f16, f32, f64, i8, i16, i32, i64, u8, u32, u64
from tests.fuzz.expressions import FLOAT_TYPES, INT_TYPES, Expressions, Scope, widening_to
from tests.fuzz.program import (
    HIST,
    LIST_LEN,
    SHARED_COLS,
    WIDTH,
    Assign,
    Atomic,
    Barrier,
    Bin,
    Call,
    Cast,
    Exit,
    Expr,
    For,
    Helper,
    If,
    Lit,
    Load,
    Name,
    Program,
    ShStore,
    Stmt,
    Store,
    Unary,
    While,
)

TENSOR_TYPES = (i32, u32, i64, i8, i16)
FLOAT_TENSOR_TYPES = (f32, f16, f32, f64, bf16)
OUT_TYPES = (i32, u32, i64)
HIST_TYPES = (i32, u32, i64, u64)
REFUSAL_RATE = 0.04
MAX_DEPTH = 3
REDUCTIONS = {"int": ("sum", "max", "min", "and", "or", "xor"), "float": ("sum", "max", "min"),
              "bool": ("and", "or", "xor")}


class Generator(Expressions):
    """Builds one `Program` from a seed; every random choice comes from that seed's `Random`."""

    def __init__(self, seed: int):
        super().__init__(seed)
        self.seed = seed
        self.counter = 0
        rng = self.rng
        floats = rng.random() < 0.6
        self.types = INT_TYPES + FLOAT_TYPES if floats else INT_TYPES
        self.tensors = tuple((f"x{i}", rng.choice(TENSOR_TYPES + (FLOAT_TENSOR_TYPES if floats else ())))
                             for i in range(rng.randint(1, 3)))
        self.out_dtype = rng.choice(OUT_TYPES + ((f32, f64, f16) if floats else ()))
        self.rank2 = {name for name, _ in self.tensors if rng.random() < 0.35} | (
            {"out"} if rng.random() < 0.35 else set())
        self.scalars: dict[str, DType] = {f"v{i}": rng.choice(self.types) for i in range(rng.randint(2, 4))}
        self.warp = rng.random() < 0.3
        if self.warp:  # what votes and `match_any` give
            self.scalars[f"v{len(self.scalars)}"] = u32
        if self.warp or rng.random() < 0.15:
            self.scalars[f"v{len(self.scalars)}"] = boolean
        self.list_type = rng.choice(self.types)
        self.block_size, self.grid = rng.choice([32, 64]), rng.choice([1, 2])
        self.wanted_shared = rng.choice(self.types) if rng.random() < 0.25 else None
        self.hist = rng.choice(HIST_TYPES + ((f32, f64) if floats else ())) if rng.random() < 0.25 else None
        self.hist_kind: str | None = None
        self.barriers_left = 3 if (self.wanted_shared or self.warp or rng.random() < 0.1) else 0
        self.divergent_barrier = rng.random() < 0.04
        self.may_exit = False  # once a `return` may have run, warp operations would miss lanes
        self.refusal: str | None = None
        self.refusal_stmt: Stmt | None = None  # the ill-typed line itself

    # --- statements ----------------------------------------------------------------------------

    def block(self, scope: Scope, size: int) -> tuple[Stmt, ...]:
        stmts: list[Stmt] = []
        for _ in range(size):
            stmt = self.statement(scope)
            stmts.append(stmt)
            if isinstance(stmt, Exit):  # a bare exit ends its block, as in Python
                break
        return tuple(stmts)

    def statement(self, scope: Scope) -> Stmt:
        rng = self.rng
        kinds = {"assign": 5.0, "list": 3.0, "store": 2.0, "exit": 2.5 if scope.in_loop else 1.0}
        if scope.depth < MAX_DEPTH:
            kinds |= {"if": 3.0, "for": 1.5, "static_for": 1.0, "const_if": 0.4, "while": 1.0}
        if self.shared is not None and not self.any_row:
            kinds["shared_store"] = 2.0
        if self.hist is not None:
            kinds["atomic"] = 1.2
        if scope.depth == 0:
            if self.warp and not self.may_exit:
                kinds["warp"] = 4.0
            if self.barriers_left:
                kinds["barrier"] = 1.0
        kind = rng.choices(list(kinds), weights=list(kinds.values()))[0]
        inner = max(1, 3 - scope.depth)
        if kind == "assign":
            name, t = rng.choice(list(scope.scalars.items()))
            aug = rng.choice(["", "", "^", "|"] if t == boolean else ["", "", "+", "-"] if t.is_float
                             else ["", "", "+", "^", "-"])
            return Assign(name, self.expr(t, scope), aug)
        if kind == "list":
            k = self.list_index(scope)
            augs = ["+", "", "*", "-"] if self.list_type.is_float else ["+", "", "^", "*"]
            return Assign(f"acc[{k}]", self.expr(self.list_type, scope), rng.choice(augs))
        if kind == "store":
            return self.store(rng.randrange(self.slots), scope)
        if kind == "exit":
            exits = ["return"] + (["break", "continue"] if scope.in_loop else [])
            exit_stmt = Exit(rng.choice(exits))
            self.may_exit |= exit_stmt.kind == "return"
            if scope.depth > 0 and rng.random() < 0.2:  # bare, ending its block
                return exit_stmt
            return If(self.condition(scope), (exit_stmt,))
        if kind == "if":
            body = self.block(scope.nested(), rng.randint(1, inner))
            orelse: tuple[Stmt, ...] = ()
            r = rng.random()
            if r < 0.3:
                orelse = (If(self.condition(scope), self.block(scope.nested(), rng.randint(1, inner)),
                             self.block(scope.nested(), rng.randint(1, inner)) if rng.random() < 0.5 else ()),)
            elif r < 0.7:
                orelse = self.block(scope.nested(), rng.randint(1, inner))
            return If(self.condition(scope), body, orelse)
        if kind == "const_if":
            cond = Call("dsl.const_expr", (Bin(rng.choice([">", "==", "<="]), Name("C", None),
                                               Lit(rng.randint(0, 4)), None),), None)
            return If(cond, self.block(scope.nested(), rng.randint(1, inner)),
                      self.block(scope.nested(), 1) if rng.random() < 0.5 else ())
        if kind == "shared_store":
            return ShStore(self.shared_column(scope), self.expr(self.shared, scope))  # type: ignore[arg-type]
        if kind == "atomic":
            return self.atomic(scope)
        if kind == "warp":
            return self.warp_statement(scope)
        if kind == "barrier":
            self.barriers_left -= 1
            self.any_row = not self.any_row  # the next phase reads any row, or writes its own
            return Barrier()
        var = f"j{self.counter}" if kind != "while" else f"w{self.counter}"
        self.counter += 1
        if kind == "static_for":
            args: tuple[Expr, ...] = (Name("C", None),) if rng.random() < 0.5 else (Lit(rng.randint(1, LIST_LEN)),)
            return For(var, args, self.block(scope.nested(static_var=var), rng.randint(1, inner)), static=True)
        if kind == "while":
            limit = rng.choice([Name("n", i32), Lit(rng.randint(1, 3)),
                                Bin("&", self.expr(i32, scope, 2), Lit(3), i32)])
            cond = self.condition(scope, 2) if rng.random() < 0.5 else None
            return While(var, limit, cond, self.block(scope.nested(loop_var=(var, i32)), rng.randint(1, inner)))
        bound_t, bounds = self.range_args(scope)
        return For(var, bounds, self.block(scope.nested(loop_var=(var, bound_t)), rng.randint(1, inner)))

    def range_args(self, scope: Scope) -> tuple[DType, tuple[Expr, ...]]:
        """Run-time bounds: the parameter `n`, a count read from the data, or one of another type."""
        rng = self.rng
        r = rng.random()
        n = Name("n", i32)
        if r < 0.4:
            return i32, (n,)
        if r < 0.55:
            return i32, (Lit(1), n)
        if r < 0.65:
            return i32, (Lit(0), n, Lit(2))
        t = rng.choice([i32, u32, i64, u8])
        return t, (Bin("&", self.expr(t, scope, 2), Lit(3), t),)

    def list_index(self, scope: Scope) -> str:
        """A compile-time index into `acc`: a constant, or a static loop index kept in range."""
        rng = self.rng
        if scope.static_vars and rng.random() < 0.6:
            return f"{rng.choice(scope.static_vars)} % {LIST_LEN}"
        return str(rng.randrange(LIST_LEN))

    def shared_column(self, scope: Scope) -> Expr:
        return Lit(self.rng.randrange(SHARED_COLS)) if self.rng.random() < 0.6 else self.index(scope)

    def store(self, slot: int, scope: Scope) -> Store:
        t = self.rng.choice(self.types)
        value = self.expr(t, scope)
        return Store(slot, value if t == self.out_dtype else Cast(value, self.out_dtype), self.out_rank)

    def atomic(self, scope: Scope) -> Atomic:
        """An atomic into `hist` at a constant or masked run-time index."""
        rng = self.rng
        assert self.hist is not None
        if self.hist_kind is None:  # one kind per program: add then max is not max then add
            self.hist_kind = rng.choice(["min", "max"] if self.hist.is_float else ["add", "add", "min", "max"])
        kind = self.hist_kind
        index = Lit(rng.randrange(HIST)) if rng.random() < 0.4 else self.index(scope)
        return Atomic(kind, index, self.expr(self.hist, scope, 1))

    def warp_statement(self, scope: Scope) -> Assign:
        """`v = dsl.<warp op>(...)`, its result of `v`'s type."""
        rng = self.rng
        name, t = rng.choice(list(scope.scalars.items()))
        ops = ["shfl_xor", "shfl_down", "shfl_up", "shfl_idx", "warp_reduce"]
        ops += ["ballot", "match_any"] * 2 if t == u32 else ["any", "all"] * 2 if t == boolean else []
        op = rng.choice(ops)
        width = rng.choice([32, 32, 32, 16, 8, 4, 2, 1])
        tail: tuple[Expr, ...] = (Lit(width),) if width != 32 or rng.random() < 0.2 else ()
        if op in ("ballot", "any", "all"):
            return Assign(name, Call(f"dsl.{op}", (self.condition(scope),), t))
        if op == "match_any":
            source = rng.choice(INT_TYPES + (boolean,))
            return Assign(name, Call("dsl.match_any", (self.expr(source, scope, 1),), t))
        value = self.expr(t, scope, 1)
        if op == "warp_reduce":
            kind = "bool" if t == boolean else "float" if t.is_float else "int"
            reduction = Name(repr(rng.choice(REDUCTIONS[kind])), None)
            return Assign(name, Call("dsl.warp_reduce", (value, reduction) + tail, t))
        lanes = width if op in ("shfl_xor", "shfl_idx") else 32
        lane: Expr = Lit(rng.randrange(lanes)) if rng.random() < 0.5 else Bin(
            "&", self.expr(i32, scope, 2), Lit(lanes - 1), i32)
        return Assign(name, Call(f"dsl.{op}", (value, lane) + tail, t))

    # --- the whole program ---------------------------------------------------------------------

    @property
    def slots(self) -> int:
        return len(self.scalars) + LIST_LEN + 2

    @property
    def out_rank(self) -> int:
        return 2 if "out" in self.rank2 else 1

    def make_helper(self) -> Helper:
        rng = self.rng
        t = rng.choice(self.types)
        params = (("a", t), ("b", rng.choice(widening_to(t))))
        scope = Scope(dict(params), kernel=False)
        saved, self.tensors = self.tensors, ()  # a helper sees its parameters only
        try:
            a, b = self.operands(t, scope, 1)
            value = Bin(rng.choice(["+", "*", "-"] if t.is_float else ["+", "^", "*", "-"]), a, b, t)
            cond = self.condition(scope, 2) if rng.random() < 0.6 else None
            alt = self.expr(t, scope, 2) if cond is not None else None
        finally:
            self.tensors = saved
        return Helper("h0", params, t, value, cond, alt)

    def prologue(self) -> list[Stmt]:
        """The shared array and its first contents (then a barrier), each variable's first value
        (before any branch: a variable keeps its type), and `acc`."""
        rng = self.rng
        stmts: list[Stmt] = []
        for name, t in self.scalars.items():
            stmts.append(Assign(name, self.condition(Scope({})) if t == boolean else self.cast_leaf(t, Scope({}))))
        # `acc`'s initialiser is raw text (a Name): it is a Python list, not a DSL expression.
        # `[0] * 4` only for i32: a Python 0 carried into a run-time loop becomes an i32.
        lt = self.list_type
        if lt == i32 and rng.random() < 0.5:
            stmts.append(Assign("acc", Name(f"[0] * {LIST_LEN}", None)))
        elif any(tt == lt for _, tt in self.tensors) and rng.random() < 0.5:
            name = next(n for n, tt in self.tensors if tt == lt)
            row = f"{name}[g, k]" if name in self.rank2 else f"{name}[g * {WIDTH} + k]"
            stmts.append(Assign("acc", Name(f"[{row} for k in dsl.static_range({LIST_LEN})]", None)))
        else:
            stmts.append(Assign("acc", Name(f"[dsl.cast(0, dsl.{lt.name})] * {LIST_LEN}", None)))
        if self.wanted_shared is not None:
            t = self.shared = self.wanted_shared
            source, st = self.tensors[0]
            first: Expr = Load(source, st, Name("js", None), 2 if source in self.rank2 else 1)
            stmts = [Assign("sh", Name(f"dsl.SharedAllocator().array(dsl.{t.name}, ({self.block_size}, {SHARED_COLS}))",
                                       None)),
                     For("js", (Lit(SHARED_COLS),), (ShStore(Name("js", None), first if st == t else Cast(first, t)),),
                         static=True),
                     Barrier()] + stmts
            self.any_row = True
        return stmts

    def program(self) -> Program:
        rng = self.rng
        if rng.random() < 0.6:
            self.helpers.append(self.make_helper())
        base = Scope(dict(self.scalars))
        prologue = self.prologue()
        body: list[Stmt] = [self.warp_statement(base) for _ in range(rng.randint(1, 3) if self.warp else 0)]
        body += self.block(base, rng.randint(2, 6))
        if self.divergent_barrier:  # last: no warp operation may follow lanes that waited apart
            body += [If(self.condition(base), (Barrier(phase=False),)), Barrier()]
        if rng.random() < REFUSAL_RATE:  # where the tracer surely gets to (Python never runs code after a return)
            line = self.ill_typed(base)
            body.insert(rng.randrange(traced_prefix(body) + 1), line)
            self.refusal_stmt = line
        out = self.out_dtype
        epilogue: list[Stmt] = []
        for slot, (name, t) in enumerate(self.scalars.items()):
            epilogue.append(Store(slot, Name(name, t) if t == out else Cast(Name(name, t), out), self.out_rank))
        for k in range(LIST_LEN):
            value: Expr = Name(f"acc[{k}]", self.list_type)
            epilogue.append(Store(len(self.scalars) + k, value if self.list_type == out else Cast(value, out),
                                  self.out_rank))
        return Program(
            seed=self.seed, tensors=self.tensors, out_dtype=out, slots=self.slots, prologue=tuple(prologue),
            body=tuple(body + epilogue), helpers=tuple(self.helpers), n=rng.randint(-1, 5), const=rng.randint(1, 4),
            block=self.block_size, grid=self.grid, data_seed=rng.randrange(2**32), refusal=self.refusal,
            refusal_stmt=self.refusal_stmt,
            rank2=tuple(sorted(self.rank2)), hist=self.hist,
        )

    def ill_typed(self, scope: Scope) -> Stmt:
        """One line the rules refuse (DSL301), written on purpose; records why."""
        rng = self.rng
        numbers = [(n, t) for n, t in scope.scalars.items() if t != boolean]
        name, t = rng.choice(numbers) if numbers else ("v0", i32)
        floats = [s for s in self.types if s.is_float]
        kinds = ["mixed", "store", "literal", "divide", "bool"] + (["atomic"] if self.hist else [])
        kind = rng.choice(kinds + (["float_int", "float_op"] if floats else []))
        if kind == "float_int" or (kind in ("mixed", "literal", "divide") and t.is_float):
            other = rng.choice(floats if not t.is_float else INT_TYPES)
            self.refusal = f"{t.name} with {other.name}"
            if not t.is_float and rng.random() < 0.5:
                self.refusal = f"float literal beside {t.name}"
                return Assign(name, Bin("+", Name(name, t), Lit(0.5), t))
            return Assign(name, Bin("*", Name(name, t), self.expr(other, scope, 2), t))
        if kind == "float_op":
            f = rng.choice(floats)
            op = rng.choice(["//", "<<", "&", "~"])
            self.refusal = f"'{op}' on {f.name}"
            value = Unary("~", self.expr(f, scope, 2)) if op == "~" else Bin(op, self.expr(f, scope, 2), Lit(2), f)
            return Store(rng.randrange(self.slots), Cast(value, self.out_dtype), self.out_rank)
        if kind == "mixed":
            other = next(s for s in INT_TYPES if s.is_signed != t.is_signed)
            self.refusal = f"mixed signedness {t.name} with {other.name}"
            return Assign(name, Bin("+", Name(name, t), self.expr(other, scope, 2), t))
        if kind == "store":
            wrong = next(s for s in self.types if s != self.out_dtype and s.bits != 64)
            self.refusal = f"storing {wrong.name} into Tensor[{self.out_dtype.name}] without a cast"
            return Store(rng.randrange(self.slots), self.expr(wrong, scope, 2), self.out_rank)
        if kind == "literal":
            self.refusal = f"literal {2 ** t.bits} beside {t.name} does not fit"
            return Assign(name, Bin("+", Name(name, t), Lit(2**t.bits), t))
        if kind == "divide":
            self.refusal = f"'/' on {t.name}"
            return Assign(name, Bin("/", Name(name, t), Lit(2), t))
        if kind == "atomic":
            assert self.hist is not None
            wrong = next(s for s in self.types if s != self.hist)
            kind = self.hist_kind or "max"
            self.refusal = f"dsl.atomic_{kind} of {wrong.name} into Tensor[{self.hist.name}]"
            return Atomic(kind, Lit(0), self.expr(wrong, scope, 2))
        self.refusal = "arithmetic on a bool"
        return Assign(name, Cast(Bin("+", self.condition(scope, 2), Lit(1), boolean), t))


def ends_tracing(stmt: Stmt) -> bool:
    """Whether `stmt` may return while it is traced: a bare `return`, or one in a
    `static_range` body or a `const_expr` branch (each traced as straight-line code); a
    `return` under a run-time `if` or loop leaves the code after it traced."""
    if isinstance(stmt, Exit):
        return stmt.kind == "return"
    if isinstance(stmt, For) and stmt.static:
        return any(ends_tracing(s) for s in stmt.body)
    if isinstance(stmt, If) and isinstance(stmt.cond, Call) and stmt.cond.fn == "dsl.const_expr":
        return any(ends_tracing(s) for s in stmt.body + stmt.orelse)
    return False


def traced_prefix(body: list[Stmt]) -> int:
    """How many of `body`'s first statements are traced before any may end the tracing."""
    for k, stmt in enumerate(body):
        if ends_tracing(stmt):
            return k
    return len(body)


def generate(seed: int) -> Program:
    """The program for `seed` (deterministic: the same seed gives the same program and data)."""
    return Generator(seed).program()

