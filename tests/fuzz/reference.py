"""The reference semantics: a kernel's own Python source run as Python, one thread at a time.

Nothing here goes through the tracer. The module text the compiler sees is executed with
`import dsl` answered by a stand-in module (`FakeDsl`): `@dsl.kernel` keeps the function,
`.launch(grid, block)` calls it once per thread with `dsl.thread_idx` / `block_idx` / ...
set for that thread, `dsl.static_range` is `range`, `dsl.const_expr` is the value itself.
DSL scalars are `Val`s: fixed-width integers that follow the README's rules, taken from
`dsl.language.types` (the same `promote` the compiler uses) and written out again here:

- a Python literal beside a value takes the value's type; it must fit the type's bits
  (`-2**(b-1) <= lit < 2**b`, so 255 beside an i8 is -1 and -1 beside a u32 is 2**32 - 1);
- integers of one signedness widen to the wider; mixed signedness, bool arithmetic, float
  literals beside integers and `/` on integers are refused (`Refused`, the compiler's DSL301);
- results wrap at the width; `//` and `%` truncate toward zero (C); shifts by the width or
  more give PTX's clamped results (0, or -1 for a negative value shifted right);
- comparisons give bools, which order as Python orders them (False < True);
- `dsl.cast` / `.to` between integer widths wrap (sign- or zero-extend by the source's
  signedness); `range(...)` over run-time bounds yields values of the bounds' type;
- a tensor read or written out of bounds, and a division by zero, are `Fault`s.

Left out of this first step (a kernel using them raises `Refused`): floats, vectors,
barriers, shuffles and other warp operations, shared memory, atomics, `while` loops.
Threads run one after another, so only kernels whose threads touch disjoint outputs (as
the generator writes them) can be compared this way.
"""

from __future__ import annotations

import builtins
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from dsl.language import types as T
from dsl.language.types import DType, promote


class Refused(Exception):
    """The program breaks a typing rule: the compiler must refuse it (DSL301)."""


class Fault(Exception):
    """What the GPU would fault on or leave undefined: an out-of-bounds access, a division by zero."""


def wrap(t: DType, value: int) -> int:
    """`value` reduced to `t`'s width: the canonical Python int (signed or not) for its bits."""
    if t.is_bool:
        return value & 1
    value &= (1 << t.bits) - 1
    if t.is_signed and value >= 1 << (t.bits - 1):
        value -= 1 << t.bits
    return value


def unsigned(t: DType, value: int) -> int:
    return value & ((1 << t.bits) - 1)


def literal(value: Any, like: DType) -> Val:
    """A Python literal beside a `like` value (promotion rule 2)."""
    if isinstance(value, float):
        raise Refused(f"float literal {value} beside {like.name}")
    if like.is_bool:
        return Val(like, 1 if value else 0)
    value = int(value)
    if not -(2 ** (like.bits - 1)) <= value <= 2**like.bits - 1:
        raise Refused(f"literal {value} does not fit in {like.name}")
    return Val(like, wrap(like, value))


def common(a: Any, b: Any, what: str) -> tuple[Val, Val, DType]:
    """Both operands in their common type, or `Refused` where the rules say they don't mix."""
    if isinstance(a, Val) and isinstance(b, Val):
        t = promote(a.dtype, b.dtype)
        if t is None:
            raise Refused(f"mixed types {a.dtype.name} and {b.dtype.name} in '{what}'")
        return a.to(t), b.to(t), t
    if isinstance(a, Val):
        return a, literal(b, a.dtype), a.dtype
    if isinstance(b, Val):
        return literal(a, b.dtype), b, b.dtype
    raise Refused(f"'{what}' on {type(a).__name__} and {type(b).__name__}")


def _is_literal(x: Any) -> bool:
    return isinstance(x, bool | int | float)


def _truncating_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _shift(op: str, t: DType, a: int, amount: int) -> int:
    amount = unsigned(t, amount)
    if amount >= t.bits:  # PTX clamps the amount
        return -1 if (op == ">>" and a < 0) else 0
    return wrap(t, a << amount) if op == "<<" else a >> amount  # `a` is canonical: signed >> is arithmetic


def arithmetic(op: str, a: Any, b: Any) -> Val:
    if op == "/":
        raise Refused("'/' on integers")
    x, y, t = common(a, b, op)
    if t.is_bool and op not in ("&", "|", "^"):
        raise Refused(f"'{op}' on bool values")
    if not (t.is_int or t.is_bool):
        raise Refused(f"'{op}' on {t.name} (the reference has integers only)")
    p, q = x.v, y.v
    if op in ("//", "%"):
        if q == 0:
            raise Fault("integer division by zero")
        quotient = _truncating_div(p, q)
        return Val(t, wrap(t, quotient if op == "//" else p - q * quotient))
    if op in ("<<", ">>"):
        return Val(t, _shift(op, t, p, q))
    result = {"+": p + q, "-": p - q, "*": p * q, "&": p & q, "|": p | q, "^": p ^ q}[op]
    return Val(t, wrap(t, result))


_COMPARE: dict[str, Callable[[int, int], bool]] = {
    "<": lambda p, q: p < q, "<=": lambda p, q: p <= q, ">": lambda p, q: p > q,
    ">=": lambda p, q: p >= q, "==": lambda p, q: p == q, "!=": lambda p, q: p != q,
}


def compare(op: str, a: Any, b: Any) -> Val:
    x, y, _ = common(a, b, op)
    return Val(T.boolean, int(_COMPARE[op](x.v, y.v)))  # canonical values compare by the type's signedness


class Val:
    """A DSL integer or bool scalar: its type and its canonical value (see `wrap`)."""

    __slots__ = ("dtype", "v")
    __hash__ = None  # type: ignore[assignment]  # `==` gives a Val, as in the DSL

    def __init__(self, dtype: DType, v: int):
        self.dtype = dtype
        self.v = v

    def __repr__(self) -> str:
        return f"{self.dtype.name}({self.v})"

    def to(self, t: DType) -> Val:
        """A conversion (`dsl.cast`, `.to`): integers wrap; to bool is `!= 0`."""
        if t == self.dtype:
            return self
        if not (t.is_int or t.is_bool) or t.kind == "index":
            raise Refused(f"cast to {t.name} (the reference has integers only)")
        return Val(t, int(self.v != 0) if t.is_bool else wrap(t, self.v))

    def __bool__(self) -> bool:  # a run-time condition: numbers compared with zero
        return self.v != 0

    def __index__(self) -> int:
        raise Refused("a run-time value used where a compile-time index is needed")

    # binary operators, in both orders (a literal on the left comes through the reflected one)
    def __add__(self, o: Any) -> Val: return arithmetic("+", self, o)
    def __radd__(self, o: Any) -> Val: return arithmetic("+", o, self)
    def __sub__(self, o: Any) -> Val: return arithmetic("-", self, o)
    def __rsub__(self, o: Any) -> Val: return arithmetic("-", o, self)
    def __mul__(self, o: Any) -> Val: return arithmetic("*", self, o)
    def __rmul__(self, o: Any) -> Val: return arithmetic("*", o, self)
    def __floordiv__(self, o: Any) -> Val: return arithmetic("//", self, o)
    def __rfloordiv__(self, o: Any) -> Val: return arithmetic("//", o, self)
    def __truediv__(self, o: Any) -> Val: return arithmetic("/", self, o)
    def __rtruediv__(self, o: Any) -> Val: return arithmetic("/", o, self)
    def __mod__(self, o: Any) -> Val: return arithmetic("%", self, o)
    def __rmod__(self, o: Any) -> Val: return arithmetic("%", o, self)
    def __lshift__(self, o: Any) -> Val: return arithmetic("<<", self, o)
    def __rlshift__(self, o: Any) -> Val: return arithmetic("<<", o, self)
    def __rshift__(self, o: Any) -> Val: return arithmetic(">>", self, o)
    def __rrshift__(self, o: Any) -> Val: return arithmetic(">>", o, self)
    def __and__(self, o: Any) -> Val: return arithmetic("&", self, o)
    def __rand__(self, o: Any) -> Val: return arithmetic("&", o, self)
    def __or__(self, o: Any) -> Val: return arithmetic("|", self, o)
    def __ror__(self, o: Any) -> Val: return arithmetic("|", o, self)
    def __xor__(self, o: Any) -> Val: return arithmetic("^", self, o)
    def __rxor__(self, o: Any) -> Val: return arithmetic("^", o, self)
    def __lt__(self, o: Any) -> Val: return compare("<", self, o)
    def __le__(self, o: Any) -> Val: return compare("<=", self, o)
    def __gt__(self, o: Any) -> Val: return compare(">", self, o)
    def __ge__(self, o: Any) -> Val: return compare(">=", self, o)
    def __eq__(self, o: Any) -> Val: return compare("==", self, o)  # type: ignore[override]
    def __ne__(self, o: Any) -> Val: return compare("!=", self, o)  # type: ignore[override]

    def __neg__(self) -> Val:
        if self.dtype.is_bool:
            raise Refused("unary '-' on a bool")
        return Val(self.dtype, wrap(self.dtype, -self.v))

    def __pos__(self) -> Val:
        return self

    def __invert__(self) -> Val:
        if self.dtype.is_bool:
            raise Refused("'~' on a bool (the reference leaves it out)")
        return Val(self.dtype, wrap(self.dtype, ~self.v))


def cast(value: Any, t: DType) -> Val:
    if isinstance(value, Val):
        return value.to(t)
    if _is_literal(value):
        return literal(value, t) if not t.is_bool else Val(t, int(bool(value)))
    raise Refused(f"cannot cast {type(value).__name__}")


def min_max(kind: str, *args: Any) -> Any:
    if len(args) < 2:
        raise Refused(f"dsl.{kind} of fewer than two values (the reference has no vectors)")
    if all(_is_literal(a) for a in args):
        return builtins.min(args) if kind == "min" else builtins.max(args)
    acc = args[0]
    for other in args[1:]:
        x, y, t = common(acc, other, kind)
        if t.is_bool:
            raise Refused(f"dsl.{kind} on bool values")
        acc = Val(t, builtins.min(x.v, y.v) if kind == "min" else builtins.max(x.v, y.v))
    return acc


def absolute(value: Any) -> Any:
    if _is_literal(value):
        return builtins.abs(value)
    if value.dtype.is_bool:
        raise Refused("dsl.abs on a bool")
    return Val(value.dtype, wrap(value.dtype, builtins.abs(value.v))) if value.dtype.is_signed else value


def run_time_range(*args: Any) -> Iterator[Any]:
    """`range` in a kernel is a run-time loop: its index has the bounds' type (i32 for literals)."""
    if not 1 <= len(args) <= 3:
        raise Refused("range takes 1 to 3 arguments")
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else 1)
    if _is_literal(step) and step <= 0:
        raise Refused("a run-time loop needs a positive step")
    typed = [b for b in (start, stop, step) if isinstance(b, Val)]
    t = typed[0].dtype if typed else T.i32
    lo, hi, st = (b if isinstance(b, Val) else literal(b, t) for b in (start, stop, step))
    t1 = common(lo, hi, "range")[2]
    t2 = common(lo, st, "range")[2]
    t = t1 if t1.bits >= t2.bits else t2
    lo, hi, st = lo.to(t), hi.to(t), st.to(t)
    i = lo.v
    while i < hi.v:  # the DSL loop compares `i < hi` in the type; bounds here are small
        yield Val(t, i)
        i = wrap(t, i + st.v)


@dataclass
class Tensor:
    """A global-memory tensor (rank 1): element values as canonical ints of `dtype`."""

    name: str
    dtype: DType
    values: list[int]
    shape: tuple[int, ...] = field(init=False)

    def __post_init__(self) -> None:
        self.shape = (len(self.values),)

    def _offset(self, index: Any) -> int:
        if isinstance(index, tuple):
            raise Refused("multi-dimensional index (the reference has rank-1 tensors only)")
        i = index.v if isinstance(index, Val) else index
        if isinstance(index, Val) and not index.dtype.is_int:
            raise Refused(f"index of type {index.dtype.name}")
        if not 0 <= i < len(self.values):
            raise Fault(f"out-of-bounds access of tensor '{self.name}' at element {i} (shape {self.shape})")
        return i

    def __getitem__(self, index: Any) -> Val:
        return Val(self.dtype, self.values[self._offset(index)])

    def __setitem__(self, index: Any, value: Any) -> None:
        if _is_literal(value):
            value = literal(value, self.dtype)
        if not isinstance(value, Val) or value.dtype != self.dtype:
            got = value.dtype.name if isinstance(value, Val) else type(value).__name__
            raise Refused(f"storing {got} into Tensor[{self.dtype.name}]")
        self.values[self._offset(index)] = value.v


class _Dim3:
    """`dsl.thread_idx` and friends: `.x .y .z` of the thread now running, as i32."""

    def __init__(self) -> None:
        self.xyz = (0, 0, 0)

    @property
    def x(self) -> Val: return Val(T.i32, self.xyz[0])
    @property
    def y(self) -> Val: return Val(T.i32, self.xyz[1])
    @property
    def z(self) -> Val: return Val(T.i32, self.xyz[2])


def _dim3(value: Any) -> tuple[int, int, int]:
    dims = tuple(value) if isinstance(value, tuple | list) else (value,)
    dims = tuple(int(d) for d in dims) + (1,) * (3 - len(dims))
    return dims[0], dims[1], dims[2]


class _Launch:
    def __init__(self, kernel: _Kernel, args: tuple[Any, ...]):
        self.kernel, self.args = kernel, args

    def launch(self, grid: Any = 1, block: Any = 1, **_: Any) -> None:
        """Every thread of every block, one after another (threads must not share outputs)."""
        fake = self.kernel.fake
        g, b = _dim3(grid), _dim3(block)
        fake.grid_dim.xyz, fake.block_dim.xyz = g, b
        for bz in range(g[2]):
            for by in range(g[1]):
                for bx in range(g[0]):
                    fake.block_idx.xyz = (bx, by, bz)
                    for tz in range(b[2]):
                        for ty in range(b[1]):
                            for tx in range(b[0]):
                                fake.thread_idx.xyz = (tx, ty, tz)
                                self.kernel.fn(*self.args)


class _Kernel:
    def __init__(self, fn: Callable[..., Any], fake: FakeDsl):
        self.fn, self.fake = fn, fake

    def __call__(self, *args: Any) -> _Launch:
        return _Launch(self, args)


def _not_here(name: str) -> Callable[..., Any]:
    def refuse(*_: Any, **__: Any) -> Any:
        raise Refused(f"dsl.{name} is not in the reference yet")

    return refuse


class FakeDsl(types.ModuleType):
    """What `import dsl` gives the executed source: the types, and the intrinsics above."""

    def __init__(self) -> None:
        super().__init__("dsl")
        for name in dir(T):
            value = getattr(T, name)
            if isinstance(value, DType) or name in ("Tensor", "Constexpr"):
                setattr(self, name, value)
        self.thread_idx, self.block_idx = _Dim3(), _Dim3()
        self.block_dim, self.grid_dim = _Dim3(), _Dim3()
        self.cast = cast
        self.min = lambda *a: min_max("min", *a)
        self.max = lambda *a: min_max("max", *a)
        self.abs = absolute
        self.static_range = range
        self.const_expr = lambda c: c
        self.cdiv = lambda a, b: -(-a // b)

    def kernel(self, fn: Callable[..., Any] | None = None, **_: Any) -> Any:
        if fn is None:
            return lambda f: _Kernel(f, self)
        return _Kernel(fn, self)

    def jit(self, fn: Callable[..., Any] | None = None, **_: Any) -> Any:
        return fn if fn is not None else (lambda f: f)

    def __getattr__(self, name: str) -> Any:  # anything else: not modelled yet
        if name.startswith("__"):
            raise AttributeError(name)
        return _not_here(name)


def load_module(source: str, filename: str = "<reference>") -> dict[str, Any]:
    """Executes the module source with `import dsl` answered by a fresh `FakeDsl`."""
    fake = FakeDsl()
    real_import = builtins.__import__

    def fake_import(name: str, globals: Any = None, locals: Any = None, fromlist: Sequence[str] = (),
                    level: int = 0) -> Any:
        if name == "dsl":
            return fake
        if name.startswith("dsl."):
            raise Refused(f"import {name} (the reference models the top-level dsl only)")
        return real_import(name, globals, locals, fromlist, level)

    scope_builtins = dict(vars(builtins))
    scope_builtins["__import__"] = fake_import
    scope_builtins["range"] = run_time_range  # a `range` in a kernel is a run-time loop
    scope: dict[str, Any] = {"__builtins__": scope_builtins, "__name__": "reference_module"}
    exec(compile(source, filename, "exec", dont_inherit=True), scope)
    return scope


@dataclass
class Outcome:
    """What the reference makes of one call: the tensors after it, or why there is no result."""

    tensors: dict[str, list[int]] | None = None
    refused: str | None = None
    fault: str | None = None


def run(source: str, function: str, tensors: Sequence[Tensor], scalars: Sequence[Val], **constexprs: int) -> Outcome:
    """Calls the jit `function` of `source` on `tensors` (updated in place) then `scalars`."""
    try:
        scope = load_module(source)
        scope[function](*tensors, *scalars, **constexprs)
    except Refused as err:
        return Outcome(refused=str(err))
    except Fault as err:
        return Outcome(fault=str(err))
    return Outcome(tensors={t.name: list(t.values) for t in tensors})
