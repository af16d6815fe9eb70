"""The reference semantics: a kernel's own Python source run as Python, thread by thread.

Nothing here goes through the tracer or the interpreter. The module text the compiler sees
is executed with `import dsl` answered by a stand-in module (`FakeDsl`): `@dsl.kernel` keeps
the function, `.launch(grid, block)` runs it for every thread of every block with
`dsl.thread_idx` / `block_idx` / ... set for that thread, `dsl.static_range` is `range`,
`dsl.const_expr` is the value itself. DSL scalars are `scalars.Val`s, whose rules (integer
wrap, truncating division, clamped shifts, IEEE floats, casts) are written out in
`scalars.py` and `floats.py`.

Threads that meet (`lockstep.py`): `dsl.barrier()` statements and `name = dsl.<warp op>(...)`
statements are turned into `yield`s before the module runs, so the threads of a block run
one after another up to a barrier and the lanes of a warp meet at each warp operation.
Global tensors, shared arrays and atomics: `memory.py`.

A kernel using what is not modelled (vectors, `%` on floats, float atomic adds, ...) raises
`Unmodelled` and is skipped, not judged.
"""

from __future__ import annotations

import ast
import builtins
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from dsl.language import types as T
from dsl.language.types import DType
from tests.fuzz import lockstep
from tests.fuzz.memory import Allocator, SharedArray, Tensor, atomic
from tests.fuzz.scalars import (
    Fault,
    Refused,
    Unmodelled,
    Val,
    absolute,
    cast,
    common,
    intrinsic,
    is_literal,
    literal,
    min_max,
    wrap,
)

__all__ = ["Fault", "Outcome", "Refused", "T", "Tensor", "Unmodelled", "Val", "run"]


def run_time_range(*args: Any) -> Iterator[Any]:
    """`range` in a kernel is a run-time loop: its index has the bounds' type (i32 for literals)."""
    if not 1 <= len(args) <= 3:
        raise Refused("range takes 1 to 3 arguments")
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else 1)
    if is_literal(step) and step <= 0:
        raise Refused("a run-time loop needs a positive step")
    typed = [b for b in (start, stop, step) if isinstance(b, Val)]
    t = typed[0].dtype if typed else T.i32
    if not t.is_int:
        raise Refused(f"range over {t.name}")
    lo, hi, st = (b if isinstance(b, Val) else literal(b, t) for b in (start, stop, step))
    t1 = common(lo, hi, "range")[2]
    t2 = common(lo, st, "range")[2]
    t = t1 if t1.bits >= t2.bits else t2
    lo, hi, st = lo.to(t), hi.to(t), st.to(t)
    i = lo.v
    while i < hi.v:  # the DSL loop compares `i < hi` in the type; bounds here are small
        yield Val(t, i)
        i = wrap(t, i + st.v)


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
        """Every block, one after another; its threads by `lockstep.run_block`."""
        fake = self.kernel.fake
        g, b = _dim3(grid), _dim3(block)
        fake.grid_dim.xyz, fake.block_dim.xyz = g, b
        coords = [(tx, ty, tz) for tz in range(b[2]) for ty in range(b[1]) for tx in range(b[0])]

        def enter(k: int) -> None:
            fake.thread_idx.xyz, fake.current = coords[k], k

        def barrier_passed() -> None:
            fake.phase += 1

        for bz in range(g[2]):
            for by in range(g[1]):
                for bx in range(g[0]):
                    fake.block_idx.xyz, fake.shared, fake.phase = (bx, by, bz), [], 0
                    lockstep.run_block(self.kernel.fn, self.args, len(coords), enter, barrier_passed)


class _Kernel:
    def __init__(self, fn: Callable[..., Any], fake: FakeDsl):
        self.fn, self.fake = fn, fake

    def __call__(self, *args: Any) -> _Launch:
        return _Launch(self, args)


def _not_here(name: str) -> Callable[..., Any]:
    def refuse(*_: Any, **__: Any) -> Any:
        raise Unmodelled(f"dsl.{name} (here)")

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
        self.current, self.phase = 0, 0
        self.shared: list[SharedArray] = []
        self.cast = cast
        self.min = lambda *a: min_max("min", *a)
        self.max = lambda *a: min_max("max", *a)
        self.abs = absolute
        for name in ("fma", "sqrt", "floor", "ceil", "trunc", "round", "isnan", "isinf"):
            setattr(self, name, intrinsic(name))
        for kind in ("add", "min", "max"):
            setattr(self, f"atomic_{kind}", atomic(kind))
        self.static_range = range
        self.const_expr = lambda c: c
        self.cdiv = lambda a, b: -(-a // b)
        self.lane_id = lambda: Val(T.i32, self.current % lockstep.WARP)
        self.SharedAllocator = lambda dynamic=False: Allocator(self, dynamic)

    def kernel(self, fn: Callable[..., Any] | None = None, **_: Any) -> Any:
        if fn is None:
            return lambda f: _Kernel(f, self)
        return _Kernel(fn, self)

    def jit(self, fn: Callable[..., Any] | None = None, **_: Any) -> Any:
        return fn if fn is not None else (lambda f: f)

    def __getattr__(self, name: str) -> Any:  # anything else (and a sync point not on its own): not modelled
        if name.startswith("__"):
            raise AttributeError(name)
        return _not_here(name)


def _dsl_call(node: ast.AST, names: Sequence[str]) -> ast.Call | None:
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in names
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "dsl"):
        return node
    return None


def _request(call: ast.Call, line: int) -> ast.Yield:
    """`yield (op, line, (args...), {keywords})`: where the thread waits, and what it brings."""
    name = call.func.attr if isinstance(call.func, ast.Attribute) else ""
    keywords = ast.Dict(keys=[ast.Constant(k.arg) for k in call.keywords], values=[k.value for k in call.keywords])
    return ast.Yield(ast.Tuple([ast.Constant(name), ast.Constant(line), ast.Tuple(list(call.args), ast.Load()),
                                keywords], ast.Load()))


class _SyncPoints(ast.NodeTransformer):
    """In a kernel: `dsl.barrier()` and `x = dsl.<warp op>(...)` statements become `yield`s."""

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        call = _dsl_call(node.value, ("barrier", *lockstep.WARP_OPS))
        if call is not None:
            op = call.func.attr  # type: ignore[attr-defined]
            return ast.Expr(_request(call, node.lineno)) if op != "barrier" else ast.Expr(ast.Yield(ast.Tuple(
                [ast.Constant("barrier"), ast.Constant(node.lineno), ast.Tuple([], ast.Load()),
                 ast.Dict(keys=[], values=[])], ast.Load())))
        return node

    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        call = _dsl_call(node.value, lockstep.WARP_OPS)
        if call is not None and len(node.targets) == 1:
            node.value = _request(call, node.lineno)
        return node


class _DslNot(ast.NodeTransformer):
    """`not x` becomes `__kdsl_not__(x)`: on a DSL value it is a DSL bool, as in the language
    (Python's own `not` would give a Python bool, which has no `.to`)."""

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.Call(ast.Name("__kdsl_not__", ast.Load()), [node.operand], [])
        return node


def dsl_not(x: Any) -> Any:
    return Val(T.boolean, int(not x)) if isinstance(x, Val) else not x


def _with_sync_points(tree: ast.Module) -> ast.Module:
    tree = _DslNot().visit(tree)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any(
                "kernel" in ast.unparse(d) for d in node.decorator_list):
            node.body = [_SyncPoints().visit(s) for s in node.body]
    return ast.fix_missing_locations(tree)


def load_module(source: str, filename: str = "<reference>") -> dict[str, Any]:
    """Executes the module source with `import dsl` answered by a fresh `FakeDsl`."""
    fake = FakeDsl()
    real_import = builtins.__import__

    def fake_import(name: str, globals: Any = None, locals: Any = None, fromlist: Sequence[str] = (),
                    level: int = 0) -> Any:
        if name == "dsl":
            return fake
        if name.startswith("dsl."):
            raise Unmodelled(f"import {name} (the reference models the top-level dsl only)")
        return real_import(name, globals, locals, fromlist, level)

    scope_builtins = dict(vars(builtins))
    scope_builtins["__import__"] = fake_import
    scope_builtins["range"] = run_time_range  # a `range` in a kernel is a run-time loop
    scope: dict[str, Any] = {"__builtins__": scope_builtins, "__name__": "reference_module", "__kdsl_not__": dsl_not}
    tree = _with_sync_points(ast.parse(source, filename))
    exec(compile(tree, filename, "exec", dont_inherit=True), scope)
    return scope


@dataclass
class Outcome:
    """What the reference makes of one call: the tensors after it, or why there is no result."""

    tensors: dict[str, list[Any]] | None = None
    refused: str | None = None
    fault: str | None = None
    unmodelled: str | None = None


def run(source: str, function: str, tensors: Sequence[Tensor], scalars: Sequence[Val], **constexprs: int) -> Outcome:
    """Calls the jit `function` of `source` on `tensors` (updated in place) then `scalars`."""
    try:
        scope = load_module(source)
        scope[function](*tensors, *scalars, **constexprs)
    except Refused as err:
        return Outcome(refused=str(err))
    except Fault as err:
        return Outcome(fault=str(err))
    except Unmodelled as err:
        return Outcome(unmodelled=str(err))
    return Outcome(tensors={t.name: list(t.values) for t in tensors})
