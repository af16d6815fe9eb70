"""Well-typed random expressions for the generator: integers, floats, bools, loads.

Every expression is built for a wanted DSL type and is well typed by the promotion rules
(operands of one kind and signedness, narrower ones widened, literals that fit beside their
partner). Integer divisors are never 0 (`(e & 15) + 1`), the one corner without a value;
they are -1 at times (`(e & 15) - 16`, the literal -1): `INT_MIN // -1` is `INT_MIN` by the
README. Shift amounts are mostly masked below the width, and past it at times (`x << 40`,
`x >> (e | 32)`), which the README also gives a value (0, or the sign). Floats meet every
IEEE corner (NaN, infinities, -0.0, subnormals) through the data and the literals; `%` on
floats (NVPTX's expansion rounds more than once) and transcendental functions (the GPU
approximates them) are left out: only correctly rounded operations are compared bit for bit.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from dsl.language.types import DType, bf16, boolean, f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64
from tests.fuzz.program import SHARED_COLS, WIDTH, Bin, Call, Cast, Expr, Helper, IfExp, Lit, Load, Name, ShLoad, Unary

INT_TYPES = (i8, i16, i32, i64, u8, u16, u32, u64)
FLOAT_TYPES = (f16, bf16, f32, f64)
FLOAT_LITERALS = (0.0, 1.0, 2.0, 0.5, -1.5, 3.0, 0.25, -2.0, 0.1, -0.0, 1e-3, 7.0)
FLOAT_EDGES = (65504.0, 1e-5, 3.0e38, 1e-40, 1e300, 6e-8, -1e10, 2.0**24 + 2.0, 1.0 + 2.0**-12)


def widening_to(t: DType) -> list[DType]:
    """Types that widen to `t` by the promotion rules (same kind and signedness, no wider)."""
    if t.is_float:
        return [s for s in FLOAT_TYPES if s.bits < t.bits or s == t]
    return [s for s in INT_TYPES if s.is_signed == t.is_signed and s.bits <= t.bits]


def literal_for(rng: random.Random, t: DType) -> int | float:
    """A literal that the compiler takes beside a `t` value: small ones mostly, and the edges,
    including integers that fit only as bits (255 beside an i8 is -1; -1 beside a u32 is 2**32 - 1)."""
    if t.is_float:
        r = rng.random()
        if r < 0.2:
            return rng.randint(-3, 9)
        return rng.choice(FLOAT_LITERALS) if r < 0.8 else rng.choice(FLOAT_EDGES)
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


class Expressions:
    """The expression half of the generator; `generate.Generator` adds statements and programs."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.tensors: tuple[tuple[str, DType], ...] = ()
        self.rank2: set[str] = set()
        self.helpers: list[Helper] = []
        self.shared: DType | None = None  # the shared array's element type
        self.any_row = False  # between barriers where every row of `sh` may be read
        self.block_size = 32
        self.types: tuple[DType, ...] = INT_TYPES

    def expr(self, t: DType, scope: Scope, depth: int = 0) -> Expr:
        """A well-typed expression of type `t` (never a bare literal)."""
        rng = self.rng
        if t == boolean:
            return self.condition(scope, depth + 1)
        if depth >= 3 or rng.random() < 0.25 + 0.15 * depth:
            return self.leaf(t, scope)
        helper = [h for h in self.helpers if (h.dtype.is_float == t.is_float)]
        if t.is_float:
            kinds = {"arith": 6, "div": 1.5, "minmax": 1.5, "unary": 1, "cast": 2, "ifexp": 1, "fma": 0.7,
                     "integral": 0.8, "helper": 1.2 if helper else 0}
        else:
            kinds = {"arith": 6, "div": 2, "shift": 2, "minmax": 1.5, "unary": 1, "cast": 2, "ifexp": 1,
                     "helper": 1.2 if helper else 0}
        kind = rng.choices(list(kinds), weights=list(kinds.values()))[0]
        down = depth + 1
        if kind == "arith":
            ops = ["+", "-", "*"] if t.is_float else ["+", "-", "*", "&", "|", "^"]
            a, b = self.operands(t, scope, depth)
            return Bin(rng.choice(ops), a, b, t)
        if kind == "div":
            if t.is_float:
                a, b = self.operands(t, scope, depth)
                return Bin("/", a, b, t)
            return Bin(rng.choice(["//", "%"]), self.expr(t, scope, down), self.divisor(t, scope, depth), t)
        if kind == "shift":
            return self.shift(t, scope, depth)
        if kind == "minmax":
            a, b = self.operands(t, scope, depth)
            return Call(f"dsl.{rng.choice(['min', 'max'])}", (a, b), t)
        if kind == "unary":
            if (t.is_signed or t.is_float) and rng.random() < 0.4:
                return Call("dsl.abs", (self.expr(t, scope, down),), t)
            return Unary("-" if t.is_float else rng.choice(["-", "~"]), self.expr(t, scope, down))
        if kind == "cast":
            source = rng.choice(self.types + (boolean,))
            inner = self.expr(source, scope, down)
            return Cast(inner, t, method=source != boolean and rng.random() < 0.3)
        if kind == "ifexp":
            return IfExp(self.condition(scope, down), self.expr(t, scope, down), self.expr(t, scope, down))
        if kind == "fma":
            a, b = self.operands(t, scope, depth)
            c = self.expr(t, scope, down) if rng.random() < 0.7 else Lit(literal_for(rng, t))
            return Call("dsl.fma", (a, b, c), t) if a.type is not None else Call("dsl.fma", (b, a, c), t)
        if kind == "integral":
            name = rng.choice(["sqrt", "floor", "ceil", "trunc", "round"])
            return Call(f"dsl.{name}", (self.expr(t, scope, down),), t)
        h = rng.choice(helper)
        call = Call(h.name, tuple(self.expr(pt, scope, down) for _, pt in h.params), h.dtype)
        return call if h.dtype == t else Cast(call, t)

    def shift(self, t: DType, scope: Scope, depth: int) -> Expr:
        """`<<` / `>>` by a literal, a masked run-time amount, or (rarely) one past the width."""
        rng = self.rng
        op = rng.choice(["<<", ">>"])
        value = self.expr(t, scope, depth + 1)
        r = rng.random()
        if r < 0.35:
            return Bin(op, value, Lit(rng.randrange(t.bits)), t)
        amount_t = rng.choice(widening_to(t))
        amount = self.expr(amount_t, scope, depth + 1)
        if r < 0.45:  # past the width: the README's clamped result
            if rng.random() < 0.5:
                return Bin(op, value, Lit(rng.choice([t.bits, t.bits + 3, 2 * t.bits])), t)
            return Bin(op, value, Bin("|", amount, Lit(t.bits), amount_t), t)
        return Bin(op, value, Bin("&", amount, Lit(t.bits - 1), amount_t), t)

    def operands(self, t: DType, scope: Scope, depth: int) -> tuple[Expr, Expr]:
        """Two operands whose promoted type is `t`: both `t`, a narrower one widened, or a literal
        beside a `t` value; in either order (f16 with bf16 for f32 too)."""
        rng = self.rng
        if t == f32 and rng.random() < 0.08:
            return self.expr(f16, scope, depth + 1), self.expr(bf16, scope, depth + 1)
        a = self.expr(t, scope, depth + 1)
        r = rng.random()
        if r < 0.3:
            b: Expr = Lit(literal_for(rng, t))
        elif r < 0.5:
            b = self.expr(rng.choice(widening_to(t)), scope, depth + 1)
        else:
            b = self.expr(t, scope, depth + 1)
        return (a, b) if rng.random() < 0.6 else (b, a)

    def divisor(self, t: DType, scope: Scope, depth: int) -> Expr:
        """Never 0: `(e & 15) + 1` in 1..16, `(e & 15) - 16` in -16..-1, or the literal -1
        (`INT_MIN // -1` is INT_MIN by the README)."""
        rng = self.rng
        s = rng.choice(widening_to(t))
        masked = Bin("&", self.expr(s, scope, depth + 1), Lit(15), s)
        r = rng.random()
        if s.is_signed and r < 0.4:
            return Bin("-", masked, Lit(16), s)
        if t.is_signed and r < 0.5:
            return Lit(-1)
        if r < 0.6:
            return Call("dsl.max", (masked, Lit(1)), s)
        return Bin("+", masked, Lit(1), s)

    def leaf(self, t: DType, scope: Scope) -> Expr:
        rng = self.rng
        options: list[Expr] = [Name(n, nt) for n, nt in scope.scalars.items() if nt == t]
        options += [Name(n, nt) for n, nt in scope.loop_vars if nt == t]
        for name, tt in self.tensors:
            if tt == t:
                options.append(self.load(name, tt, scope))
        if scope.kernel and self.shared == t:
            options.append(self.shared_load(scope))
        if t == i32 and scope.kernel:
            options += [Name("t", i32), Name("g", i32)]
            if self.rank2 & {n for n, _ in self.tensors} and rng.random() < 0.2:
                options.append(Name(f"{min(self.rank2 & {n for n, _ in self.tensors})}.shape[{rng.randrange(2)}]",
                                    i32))
            if rng.random() < 0.1:
                options.append(Call("dsl.lane_id", (), i32))
        if scope.static_vars and not t.is_float and rng.random() < 0.3:  # a compile-time name beside a value
            return Bin(rng.choice(["+", "^", "*"]), rng.choice(options) if options else self.cast_leaf(t, scope),
                       Name(rng.choice(scope.static_vars), None), t)
        if not options or rng.random() < 0.25:
            return self.cast_leaf(t, scope)
        return rng.choice(options)

    def load(self, name: str, t: DType, scope: Scope) -> Load:
        return Load(name, t, self.offset(scope), 2 if name in self.rank2 else 1)

    def shared_load(self, scope: Scope) -> ShLoad:
        """`sh[t, col]`, or any row where the phase allows it (see `generate`)."""
        dtype = self.shared
        assert dtype is not None
        rng = self.rng
        col: Expr = Lit(rng.randrange(SHARED_COLS)) if rng.random() < 0.6 else self.index(scope)
        if not self.any_row or rng.random() < 0.3:
            return ShLoad(dtype, col)
        row = rng.choice([Bin("+", Name("t", i32), Lit(rng.randint(1, 33)), i32), Bin("^", Name("t", i32),
                          Lit(rng.choice([1, 2, 5, 16, 31])), i32), self.index(scope)])
        return ShLoad(dtype, col, row, self.block_size)

    def index(self, scope: Scope) -> Expr:
        """A small run-time i32 expression for an index (masked where it is used), reading no
        shared memory itself."""
        saved, self.shared = self.shared, None
        try:
            return self.expr(i32, scope, 2)
        finally:
            self.shared = saved

    def cast_leaf(self, t: DType, scope: Scope) -> Expr:
        """A value of another type cast to `t` (a load, a variable, or a literal)."""
        rng = self.rng
        if rng.random() < 0.08:  # a literal converted: floats to integers saturate
            value = rng.choice(FLOAT_LITERALS + FLOAT_EDGES + (-1e10, 300.0, -300.5, 1e20) if rng.random() < 0.5
                               else (0, 1, 7, 100, -1, -100))
            if isinstance(value, float) or t.is_float or -(2 ** (t.bits - 1)) <= value < 2 ** (t.bits - 1):
                return Cast(Lit(value), t)
        choices: list[Expr] = [self.load(name, tt, scope) for name, tt in self.tensors]
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
        """A run-time bool: a comparison, a bit test, a NaN test, a bool variable, or `and` /
        `or` / `not` of conditions."""
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
        floats = [t for t in self.types if t.is_float]
        if r < 0.34 and floats:
            return Call(f"dsl.{rng.choice(['isnan', 'isinf'])}", (self.expr(rng.choice(floats), scope, depth + 1),),
                        boolean)
        bools = [Name(n, nt) for n, nt in scope.scalars.items() if nt == boolean]
        if r < 0.4 and bools:
            return rng.choice(bools)
        t = rng.choice(self.types)
        a, b = self.operands(t, scope, depth + 1)
        return Bin(rng.choice(["<", "<=", ">", ">=", "==", "!="]), a, b, boolean)
