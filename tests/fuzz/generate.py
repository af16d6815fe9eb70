"""A seeded generator of integer kernels: the same seed always gives the same program and data.

What it writes, and why it stays away from some corners:

- inputs `Tensor[i32 | u32 | i64 | i8 | i16]`, one output `Tensor[i32 | u32 | i64]`; each
  thread reads its own row of `WIDTH` elements and writes its own `SLOTS` outputs, so the
  order in which threads run cannot matter (the reference runs them one after another);
- `+ - * // % << >> & | ^`, unary `-` and `~`, comparisons, `dsl.min / max / abs`,
  conditional expressions, `dsl.cast` / `.to` between all integer widths of both signedness,
  literals beside values (including ones that only fit by wrapping, `x_i8 & 255`);
- scalar variables of fixed types, a per-thread list `acc` (`[0] * 4`, or a list of loads)
  updated with compile-time indices, run-time `if / elif / else`, `for` over run-time
  `range`s with `break` / `continue`, `dsl.static_range` loops, `return` at any depth, a
  helper traced inline, a `Constexpr` parameter (`C`) in unrolled loops and `dsl.const_expr`;
- divisors are kept away from 0 and -1 (`(e & 15) + 1`, `(e & 15) - 17`), and run-time
  shift amounts are masked below the width: the GPU leaves a division by zero undefined,
  `INT_MIN // -1` overflows, and LLVM treats a shift by the width or more as poison, so no
  reference could promise a value there;
- bools are compared too, ordered as Python orders them (`False < True`; the compiler ordered
  them as signed `i1` until this generator found it, see `test_fuzz.py`);
- a small share of programs (`REFUSAL_RATE`) carry one ill-typed line on purpose (mixed
  signedness, a store without its cast, a literal that does not fit, `/` on integers,
  arithmetic on a bool): the compiler must refuse those, with DSL301.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from dsl.language.types import DType, boolean, i8, i16, i32, i64, u8, u16, u32, u64
from tests.fuzz.program import (
    LIST_LEN,
    WIDTH,
    Assign,
    Bin,
    Call,
    Cast,
    Exit,
    Expr,
    For,
    Helper,
    If,
    IfExp,
    Lit,
    Load,
    Name,
    Program,
    Stmt,
    Store,
    Unary,
)

INT_TYPES = (i8, i16, i32, i64, u8, u16, u32, u64)
TENSOR_TYPES = (i32, u32, i64, i8, i16)
OUT_TYPES = (i32, u32, i64)
REFUSAL_RATE = 0.04
MAX_DEPTH = 3


def same_signed_narrower(t: DType) -> list[DType]:
    """Types that widen to `t` by the promotion rules (same signedness, no wider)."""
    return [s for s in INT_TYPES if s.is_signed == t.is_signed and s.bits <= t.bits]


def literal_for(rng: random.Random, t: DType) -> int:
    """A literal that the compiler takes beside a `t` value: small ones mostly, and the edges,
    including values that fit only as bits (255 beside an i8 is -1; -1 beside a u32 is 2**32 - 1)."""
    lo, hi = -(2 ** (t.bits - 1)), 2**t.bits - 1
    smax = 2 ** (t.bits - 1) - 1
    choice = rng.random()
    if choice < 0.6:
        return rng.randint(0, 9)
    if choice < 0.75:
        return rng.choice([-1, -2, -7]) if t.is_signed else rng.choice([-1, 1, 2])
    return rng.choice([lo, hi, smax, smax + 1 if smax + 1 <= hi else hi, 2 ** (t.bits // 2)])


@dataclass
class Scope:
    """What an expression may read here: scalar variables, loop indices, compile-time names."""

    scalars: dict[str, DType]
    loop_vars: list[tuple[str, DType]] = field(default_factory=list)
    static_vars: list[str] = field(default_factory=list)
    in_loop: bool = False
    depth: int = 0
    kernel: bool = True  # False in a helper, which sees only its parameters

    def nested(self, *, loop_var: tuple[str, DType] | None = None, static_var: str | None = None) -> Scope:
        loops = self.loop_vars + ([loop_var] if loop_var else [])
        statics = self.static_vars + ([static_var] if static_var else [])
        in_loop = self.in_loop or loop_var is not None or static_var is not None
        return Scope(self.scalars, loops, statics, in_loop, self.depth + 1, self.kernel)


class Generator:
    """Builds one `Program` from a seed; every random choice comes from that seed's `Random`."""

    def __init__(self, seed: int):
        self.seed = seed
        self.rng = random.Random(seed)
        self.counter = 0
        rng = self.rng
        self.tensors = tuple((f"x{i}", rng.choice(TENSOR_TYPES)) for i in range(rng.randint(1, 3)))
        self.out_dtype = rng.choice(OUT_TYPES)
        self.scalars = {f"v{i}": rng.choice(INT_TYPES) for i in range(rng.randint(2, 4))}
        self.list_type = rng.choice(INT_TYPES)
        self.helpers: list[Helper] = []
        self.refusal: str | None = None

    # --- expressions ---------------------------------------------------------------------------

    def expr(self, t: DType, scope: Scope, depth: int = 0) -> Expr:
        """A well-typed expression of type `t` (never a bare literal)."""
        rng = self.rng
        if depth >= 3 or rng.random() < 0.25 + 0.15 * depth:
            return self.leaf(t, scope)
        kind = rng.choices(
            ["arith", "div", "shift", "minmax", "unary", "cast", "ifexp", "helper"],
            weights=[6, 2, 2, 1.5, 1, 2, 1, 1.2 if self.helpers else 0],
        )[0]
        if kind == "arith":
            return self.binary(rng.choice(["+", "-", "*", "&", "|", "^"]), t, scope, depth)
        if kind == "div":
            divisor = self.divisor(t, scope, depth)
            return Bin(rng.choice(["//", "%"]), self.expr(t, scope, depth + 1), divisor, t)
        if kind == "shift":
            op = rng.choice(["<<", ">>"])
            if rng.random() < 0.4:
                return Bin(op, self.expr(t, scope, depth + 1), Lit(rng.randrange(t.bits)), t)
            amount_t = rng.choice(same_signed_narrower(t))
            amount = Bin("&", self.expr(amount_t, scope, depth + 1), Lit(t.bits - 1), amount_t)
            return Bin(op, self.expr(t, scope, depth + 1), amount, t)
        if kind == "minmax":
            a, b = self.operands(t, scope, depth)
            return Call(f"dsl.{rng.choice(['min', 'max'])}", (a, b), t)
        if kind == "unary":
            if t.is_signed and rng.random() < 0.4:
                return Call("dsl.abs", (self.expr(t, scope, depth + 1),), t)
            return Unary(rng.choice(["-", "~"]), self.expr(t, scope, depth + 1))
        if kind == "cast":
            source = rng.choice(INT_TYPES + (boolean,))
            inner = self.condition(scope, depth + 1) if source == boolean else self.expr(source, scope, depth + 1)
            return Cast(inner, t, method=source != boolean and rng.random() < 0.3)
        if kind == "ifexp":
            return IfExp(self.condition(scope, depth + 1), self.expr(t, scope, depth + 1),
                         self.expr(t, scope, depth + 1))
        helper = rng.choice(self.helpers)
        call = Call(helper.name, tuple(self.expr(pt, scope, depth + 1) for _, pt in helper.params), helper.dtype)
        return call if helper.dtype == t else Cast(call, t)

    def binary(self, op: str, t: DType, scope: Scope, depth: int) -> Expr:
        a, b = self.operands(t, scope, depth)
        return Bin(op, a, b, t)

    def operands(self, t: DType, scope: Scope, depth: int) -> tuple[Expr, Expr]:
        """Two operands whose promoted type is `t`: both `t`, a narrower one of the same
        signedness widened, or a literal beside a `t` value; in either order."""
        rng = self.rng
        a = self.expr(t, scope, depth + 1)
        r = rng.random()
        if r < 0.3:
            b: Expr = Lit(literal_for(rng, t))
        elif r < 0.5:
            b = self.expr(rng.choice(same_signed_narrower(t)), scope, depth + 1)
        else:
            b = self.expr(t, scope, depth + 1)
        return (a, b) if rng.random() < 0.6 else (b, a)

    def divisor(self, t: DType, scope: Scope, depth: int) -> Expr:
        """A divisor that is never 0 nor -1: `(e & 15) + 1` in 1..16, or `(e & 15) - 17` in -17..-2."""
        rng = self.rng
        s = rng.choice(same_signed_narrower(t))
        masked = Bin("&", self.expr(s, scope, depth + 1), Lit(15), s)
        if s.is_signed and rng.random() < 0.5:
            return Bin("-", masked, Lit(17), s)
        if rng.random() < 0.2:
            return Call("dsl.max", (masked, Lit(1)), s)
        return Bin("+", masked, Lit(1), s)

    def leaf(self, t: DType, scope: Scope) -> Expr:
        rng = self.rng
        names = [Name(n, nt) for n, nt in scope.scalars.items() if nt == t]
        names += [Name(n, nt) for n, nt in scope.loop_vars if nt == t]
        loads = [name for name, tt in self.tensors if tt == t]
        options: list[Expr] = list(names)
        for name in loads:
            options.append(Load(name, t, self.offset(scope)))
        if t == i32 and scope.kernel:
            options += [Name("t", i32), Name("g", i32)]
        if scope.static_vars and rng.random() < 0.3:  # a compile-time name beside a value
            return Bin(rng.choice(["+", "^", "*"]), rng.choice(options) if options else self.cast_leaf(t, scope),
                       Name(rng.choice(scope.static_vars), None), t)
        if not options or rng.random() < 0.25:
            return self.cast_leaf(t, scope)
        return rng.choice(options)

    def cast_leaf(self, t: DType, scope: Scope) -> Expr:
        """A value of another type cast to `t` (a load, a variable, or a literal)."""
        rng = self.rng
        choices: list[Expr] = [Load(name, tt, self.offset(scope)) for name, tt in self.tensors]
        choices += [Name(n, nt) for n, nt in scope.scalars.items()]
        inner = rng.choice(choices)
        if inner.type == t:
            return inner
        return Cast(inner, t, method=rng.random() < 0.3)

    def offset(self, scope: Scope) -> Expr:
        """Where in the thread's row a load reads: a constant, a static index, or a run-time value."""
        rng = self.rng
        r = rng.random()
        if r < 0.55:
            return Lit(rng.randrange(WIDTH))
        if r < 0.7 and scope.static_vars:
            return Name(rng.choice(scope.static_vars), None)
        if scope.loop_vars and r < 0.85:
            name, t = rng.choice(scope.loop_vars)
            return Name(name, t) if t == i32 else Cast(Name(name, t), i32)
        i32_vars = [Name(n, nt) for n, nt in scope.scalars.items() if nt == i32]
        if i32_vars:
            return rng.choice(i32_vars)
        return Lit(rng.randrange(WIDTH))

    def condition(self, scope: Scope, depth: int = 1) -> Expr:
        """A run-time bool: a comparison, a bit test, or `and` / `or` / `not` of conditions."""
        rng = self.rng
        r = rng.random()
        if r < 0.1 and depth < 3:
            return Bin(rng.choice(["and", "or"]), self.condition(scope, depth + 1), self.condition(scope, depth + 1),
                       boolean)
        if r < 0.15 and depth < 3:
            return Unary("not ", self.condition(scope, depth + 1))
        if r < 0.25:
            t = rng.choice(INT_TYPES)
            return Bin("!=", Bin("&", self.expr(t, scope, depth + 1), Lit(rng.choice([1, 2, 3, 4, 7])), t),
                       Lit(0), boolean)
        if r < 0.3:  # bools compared with each other, ordered as Python orders them
            return Bin(rng.choice(["<", "<=", ">", ">=", "==", "!="]), self.condition(scope, depth + 1),
                       self.condition(scope, depth + 1), boolean)
        t = rng.choice(INT_TYPES)
        a, b = self.operands(t, scope, depth + 1)
        return Bin(rng.choice(["<", "<=", ">", ">=", "==", "!="]), a, b, boolean)

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
            kinds |= {"if": 3.0, "for": 1.5, "static_for": 1.0, "const_if": 0.4}
        kind = rng.choices(list(kinds), weights=list(kinds.values()))[0]
        inner = max(1, 3 - scope.depth)
        if kind == "assign":
            name, t = rng.choice(list(scope.scalars.items()))
            aug = rng.choice(["", "", "+", "^", "-"])
            return Assign(name, self.expr(t, scope), aug)
        if kind == "list":
            k = self.list_index(scope)
            return Assign(f"acc[{k}]", self.expr(self.list_type, scope), rng.choice(["+", "", "^", "*"]))
        if kind == "store":
            return self.store(rng.randrange(self.slots), scope)
        if kind == "exit":
            exits = ["return"] + (["break", "continue"] if scope.in_loop else [])
            exit_stmt = Exit(rng.choice(exits))
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
        var = f"j{self.counter}"
        self.counter += 1
        if kind == "static_for":
            args: tuple[Expr, ...] = (Name("C", None),) if rng.random() < 0.5 else (Lit(rng.randint(1, LIST_LEN)),)
            return For(var, args, self.block(scope.nested(static_var=var), rng.randint(1, inner)), static=True)
        bound_t, args = self.range_args(scope)
        return For(var, args, self.block(scope.nested(loop_var=(var, bound_t)), rng.randint(1, inner)))

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

    def store(self, slot: int, scope: Scope) -> Store:
        t = self.rng.choice(INT_TYPES)
        value = self.expr(t, scope)
        return Store(slot, value if t == self.out_dtype else Cast(value, self.out_dtype))

    # --- the whole program ---------------------------------------------------------------------

    @property
    def slots(self) -> int:
        return len(self.scalars) + LIST_LEN + 2

    def make_helper(self) -> Helper:
        rng = self.rng
        t = rng.choice(INT_TYPES)
        params = (("a", t), ("b", rng.choice(same_signed_narrower(t))))
        scope = Scope(dict(params), kernel=False)
        saved, self.tensors = self.tensors, ()  # a helper sees its parameters only
        try:
            value = self.binary(rng.choice(["+", "^", "*", "-"]), t, scope, 1)
            cond = self.condition(scope, 2) if rng.random() < 0.6 else None
            alt = self.expr(t, scope, 2) if cond is not None else None
        finally:
            self.tensors = saved
        return Helper("h0", params, t, value, cond, alt)

    def program(self) -> Program:
        rng = self.rng
        if rng.random() < 0.6:
            self.helpers.append(self.make_helper())
        base = Scope(dict(self.scalars))
        prologue: list[Stmt] = []
        for name, t in self.scalars.items():  # each variable is given its type once, before any branch
            prologue.append(Assign(name, self.cast_leaf(t, Scope({}))))
        # `acc`'s initialiser is raw text (a Name): it is a Python list, not a DSL expression.
        # `[0] * 4` only for i32: a Python 0 carried into a run-time loop becomes an i32.
        if self.list_type == i32 and rng.random() < 0.5:
            prologue.append(Assign("acc", Name(f"[0] * {LIST_LEN}", None)))
        elif any(tt == self.list_type for _, tt in self.tensors) and rng.random() < 0.5:
            name = next(n for n, tt in self.tensors if tt == self.list_type)
            prologue.append(Assign("acc", Name(f"[{name}[g * {WIDTH} + k] for k in dsl.static_range({LIST_LEN})]",
                                               None)))
        else:
            prologue.append(Assign("acc", Name(f"[dsl.cast(0, dsl.{self.list_type.name})] * {LIST_LEN}", None)))
        body = list(self.block(base, rng.randint(2, 6)))
        if rng.random() < REFUSAL_RATE:
            body.insert(rng.randrange(len(body) + 1), self.ill_typed(base))  # never after a bare exit: none at depth 0
        out = self.out_dtype
        epilogue: list[Stmt] = []
        for slot, (name, t) in enumerate(self.scalars.items()):
            epilogue.append(Store(slot, Name(name, t) if t == out else Cast(Name(name, t), out)))
        for k in range(LIST_LEN):
            value: Expr = Name(f"acc[{k}]", self.list_type)
            epilogue.append(Store(len(self.scalars) + k, value if self.list_type == out else Cast(value, out)))
        return Program(
            seed=self.seed, tensors=self.tensors, out_dtype=out, slots=self.slots, prologue=tuple(prologue),
            body=tuple(body + epilogue), helpers=tuple(self.helpers), n=rng.randint(-1, 5), const=rng.randint(1, 4),
            block=rng.choice([32, 64]), grid=rng.choice([1, 2]), data_seed=rng.randrange(2**32), refusal=self.refusal,
        )

    def ill_typed(self, scope: Scope) -> Stmt:
        """One line the rules refuse (DSL301), written on purpose; records why."""
        rng = self.rng
        kind = rng.choice(["mixed", "store", "literal", "divide", "bool"])
        name, t = rng.choice(list(scope.scalars.items()))
        if kind == "mixed":
            other = next(s for s in INT_TYPES if s.is_signed != t.is_signed)
            self.refusal = f"mixed signedness {t.name} with {other.name}"
            return Assign(name, Bin("+", Name(name, t), self.expr(other, scope, 2), t))
        if kind == "store":
            wrong = next(s for s in INT_TYPES if s != self.out_dtype and s.bits != 64)
            self.refusal = f"storing {wrong.name} into Tensor[{self.out_dtype.name}] without a cast"
            return Store(rng.randrange(self.slots), self.expr(wrong, scope, 2))
        if kind == "literal":
            self.refusal = f"literal {2 ** t.bits} beside {t.name} does not fit"
            return Assign(name, Bin("+", Name(name, t), Lit(2**t.bits), t))
        if kind == "divide":
            self.refusal = f"'/' on {t.name}"
            return Assign(name, Bin("/", Name(name, t), Lit(2), t))
        self.refusal = "arithmetic on a bool"
        return Assign(name, Cast(Bin("+", self.condition(scope, 2), Lit(1), boolean), t))


def generate(seed: int) -> Program:
    """The program for `seed` (deterministic: the same seed gives the same program and data)."""
    return Generator(seed).program()
