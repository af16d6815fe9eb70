"""The tracer: walks a DSL function's Python AST and emits MLIR, op by op.

Expressions evaluate to plain Python values when they are known at compile time and to
`Scalar`/`Vector` values (MLIR SSA values) otherwise; statements on run-time conditions
become `scf.if`, `scf.for` and `scf.while` with their carried values (`structured.py`). Every op is built
under the `FileLineColRange` location of the Python node that produced it; helper
functions are traced inline with `callsite` locations.

Why an AST walk rather than running the function with proxy objects: Python's `if`,
`for` and `while` cannot be overloaded, every AST node knows its exact range, and
unsupported constructs can be reported precisely (DSL302) instead of misbehaving.

This base class knows the language; `KernelTracer` and `HostTracer` add what differs
between device and host code (memory, intrinsics, launches).
"""

from __future__ import annotations

import ast
import builtins
import types
from dataclasses import dataclass, field
from typing import Any

from mlir import ir

from dsl.diagnostics import Diagnostic, DiagnosticError, DiagnosticSink, SourceRange
from dsl.frontend import arith as A
from dsl.frontend import ops, trace_facts, vector_ops
from dsl.frontend.control_flow import (
    BREAK_FLAG,
    CONTINUE_FLAG,
    EXIT_FLAGS,
    RETURN_FLAG,
    RETURN_NAME,
    assigned_names,
    fold_early_returns,
)
from dsl.frontend.debug_steps import stepping_traced, trace_step
from dsl.frontend.source import SourceFile, closure_vars, function_source, is_user_function, location
from dsl.frontend.structured import StructuredControlFlow
from dsl.frontend.values import (
    BoundMethod,
    DSLTargetError,
    DSLTypeError,
    DSLUnsupported,
    Scalar,
    ShapeView,
    Vector,
    missing_attribute,
    type_name,
)
from dsl.language import intrinsics as I
from dsl.language.types import DType, promote


class _Cascade(Exception):
    """A name whose statement already failed was used: stay quiet, the first error says it."""


POISON = object()  # what a name holds after the statement assigning it failed


@dataclass
class Frame:
    """One function being traced: the kernel itself or an inlined helper."""

    src: SourceFile
    env: dict[str, Any]
    globals: dict[str, Any]
    call_loc: Any = None  # caller location for callsite nesting
    undefined: dict[str, SourceRange] = field(default_factory=dict)  # DSL303 candidates
    undefined_why: dict[str, str] = field(default_factory=dict)  # a message other than DSL303's usual one
    loops: list[str] = field(default_factory=list)  # "static" / "dynamic", innermost last
    # per enclosing statement: can anything after it read the exit flags? (statements follow
    # it, or a loop re-tests them); flags nobody reads are not merged into `scf.if` results
    tail: list[bool] = field(default_factory=list)
    name: str = ""  # the function's name, as a debugger's stack shows it
    call_range: SourceRange | None = None  # where the caller called this helper (None: the kernel)

    def __post_init__(self) -> None:
        self.env.setdefault(RETURN_FLAG, False)

    def exited(self) -> bool:
        """Every path through the statements traced so far left the block (a flag is True)."""
        return any(self.env.get(flag) is True for flag in EXIT_FLAGS)

    def pending_exits(self) -> list[str]:
        """The exit flags that hold run-time values: some paths may have left."""
        return [flag for flag in EXIT_FLAGS if isinstance(self.env.get(flag), Scalar)]

    def flags_read_later(self) -> bool:
        return any(self.tail)



class Tracer(StructuredControlFlow):
    """Shared machinery: frames, locations, expressions and structured control flow."""

    mode = "kernel"

    def __init__(self, sink: DiagnosticSink):
        self.sink = sink
        self.frames: list[Frame] = []
        self.failed = False
        self.facts = trace_facts.current()  # what the editor learns of each name (None: nobody asked)
        self._locations: dict[tuple[int, int], tuple[Any, ast.AST, Any]] = {}  # see `loc`
        self.debug_steps = self.mode == "kernel" and stepping_traced()  # a marker before each statement
        self.variables: Any = None  # `debug_info.KernelVariables` of a device-debug build (cuda-gdb)

    # ----- frames, ranges, locations ---------------------------------------------------
    @property
    def frame(self) -> Frame:
        return self.frames[-1]

    def range(self, node: ast.AST) -> SourceRange:
        return self.frame.src.range_of(node)

    def loc(self, node: ast.AST) -> Any:
        """The location of `node`, inside the innermost helper call's. Made once per node and
        call: an unrolled loop traces its body's nodes again and again (a GEMM epilogue's, 128
        times), and making a location is a fifth of tracing time. The entry keeps the node and
        the call's location alive, so their ids stay theirs while the tracer lives."""
        call_loc = next((f.call_loc for f in reversed(self.frames) if f.call_loc is not None), None)
        key = (id(node), id(call_loc))
        cached = self._locations.get(key)
        if cached is not None:
            return cached[0]
        loc = location(self.range(node))
        if call_loc is not None:
            loc = ir.Location.callsite(loc, [call_loc])
        self._locations[key] = (loc, node, call_loc)
        return loc

    def target_diagnostic(self, node: ast.AST, err: DSLTargetError) -> Diagnostic:
        """DSL207: an instruction of another target (the kernel tracer adds the fix)."""
        return Diagnostic.make("DSL207", str(err), self.range(node))

    def fail(self, code: str, node: ast.AST, message: str, **kw: Any) -> DiagnosticError:
        return DiagnosticError(Diagnostic.make(code, message, self.range(node), **kw))

    def lookup(self, name: str, node: ast.AST) -> Any:
        frame = self.frame
        if name in frame.env:
            value = frame.env[name]
            if value is POISON:
                raise _Cascade(name)
            return value
        if name in frame.undefined:
            where = frame.undefined[name]
            why = frame.undefined_why.get(name) or (
                f"'{name}' is defined on only one path of the dynamic control flow at line "
                f"{where.line}; define it before the branch or loop")
            raise self.fail("DSL303", node, why, related=[self._related(where, f"'{name}' is assigned here")])
        if name in frame.globals:
            return frame.globals[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise self.fail("DSL301", node, f"name '{name}' is not defined")

    @staticmethod
    def _related(rng: SourceRange, message: str) -> Any:
        from dsl.diagnostics import Related

        return Related(rng, message)

    # ----- statements -------------------------------------------------------------------
    def run_block(self, stmts: list[ast.stmt]) -> None:
        """Traces statements in order; after one that may have left the block on some run-time
        paths (a `return`/`break`/`continue` under a run-time `if`), the rest runs under
        `if not flag`, so it executes exactly when Python would execute it."""
        stmts = fold_early_returns(stmts)
        for index, stmt in enumerate(stmts):
            if self.frame.exited():
                return
            rest = stmts[index + 1:]
            self.frame.tail.append(bool(rest))
            try:
                self.visit_stmt(stmt)
            finally:
                self.frame.tail.pop()
            pending = self.frame.pending_exits()
            if pending and rest:
                self.guard_rest(rest, pending)
                return

    def run_recovering(self, stmts: list[ast.stmt]) -> None:
        """Runs a function's top-level statements, reporting each failing one and going on.

        A failed statement's names are poisoned so later uses stay quiet: one mistake is
        reported once, and independent mistakes further down are reported too.
        """
        stmts = fold_early_returns(stmts)
        for index, stmt in enumerate(stmts):
            if self.frame.exited():
                return
            if self.frame.pending_exits():
                self.guard_rest(stmts[index:], self.frame.pending_exits())
                return
            self.frame.tail.append(index + 1 < len(stmts))
            try:
                self.visit_stmt(stmt)
            except DiagnosticError as err:
                self.sink.add(err.diagnostic)
                self.failed = True
                for name in assigned_names([stmt]):
                    self.frame.env[name] = POISON
            except _Cascade:
                self.failed = True
                for name in assigned_names([stmt]):
                    self.frame.env[name] = POISON
            finally:
                self.frame.tail.pop()

    def visit_stmt(self, stmt: ast.stmt) -> None:
        method = getattr(self, f"stmt_{type(stmt).__name__}", None)
        if method is None:
            raise self.fail("DSL302", stmt, f"'{_describe(stmt)}' is not supported in DSL functions")
        with self.loc(stmt):
            if self.variables is not None and len(self.frames) == 1:
                self.variables.before(self.frame.env, stmt.lineno)
            if self.debug_steps and not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
                trace_step(self, stmt)  # a docstring (or a bare constant) is no place to stop
            try:
                self.wrap(stmt, lambda: method(stmt))
            except (DiagnosticError, _Cascade):
                raise
            except Exception as err:  # a compiler bug: still point at the user's statement
                raise self.fail("DSL402", stmt, f"internal error while tracing this statement: "
                                f"{type(err).__name__}: {err}") from err

    def stmt_Pass(self, stmt: ast.Pass) -> None:
        pass

    def stmt_Expr(self, stmt: ast.Expr) -> None:
        if isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
            return  # a docstring
        self.eval(stmt.value)

    def stmt_Assign(self, stmt: ast.Assign) -> None:
        value = self.eval(stmt.value)
        for target in stmt.targets:
            self.assign(target, value)

    def stmt_AnnAssign(self, stmt: ast.AnnAssign) -> None:
        if stmt.value is None:
            return
        value = self.eval(stmt.value)
        annotation = self.eval(stmt.annotation)
        if isinstance(annotation, DType):
            value = self.wrap(stmt.value, lambda: A.cast(value, annotation))
        self.assign(stmt.target, value)

    def stmt_AugAssign(self, stmt: ast.AugAssign) -> None:
        op = type(stmt.op).__name__
        if isinstance(stmt.target, ast.Name):
            current = self.lookup(stmt.target.id, stmt.target)
            self.assign(stmt.target, self.wrap(stmt, lambda: A.binary(op, current, self.eval(stmt.value))))
            return
        if isinstance(stmt.target, ast.Subscript):
            load = ast.Subscript(stmt.target.value, stmt.target.slice, ast.Load())
            ast.copy_location(load, stmt.target)
            current = self.eval(load)
            self.assign(stmt.target, self.wrap(stmt, lambda: A.binary(op, current, self.eval(stmt.value))))
            return
        raise self.fail("DSL302", stmt, "augmented assignment to this target is not supported")

    def assign(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            self.frame.env[target.id] = value
            self.frame.undefined.pop(target.id, None)
            if self.facts is not None:
                self.facts.bind(self.range(target), target.id, value, device=self.mode == "kernel")
        elif isinstance(target, ast.Tuple | ast.List):
            items = vector_ops.lanes(value) if isinstance(value, Vector) else (
                list(value) if isinstance(value, ShapeView) else value)
            if not isinstance(items, tuple | list) or len(items) != len(target.elts):
                size = f" ({len(items)} items)" if isinstance(items, tuple | list) else ""
                raise self.fail("DSL301", target, f"cannot unpack {type_name(value)}{size} into "
                                f"{len(target.elts)} names")
            for elt, item in zip(target.elts, items):
                self.assign(elt, item)
        elif isinstance(target, ast.Subscript):
            container = self._per_thread_list(target.value)
            if container is None:
                self.store_subscript(target, value)
                return
            index = self.eval(target.slice)
            self._check_list_index(target.slice, container, index)
            if isinstance(container, tuple):
                raise self.fail("DSL301", target, "a tuple cannot be assigned into; use a list")
            container[index] = value
        else:
            raise self.fail("DSL302", target, f"assignment to '{_describe(target)}' is not supported")

    def _per_thread_list(self, node: ast.expr) -> list[Any] | tuple[Any, ...] | None:
        """The list or tuple `node` names (`acc`, `tiles[i]`), when it is one; else None."""
        root = node
        while isinstance(root, ast.Subscript):
            root = root.value
        if not isinstance(root, ast.Name) or not isinstance(self.frame.env.get(root.id), list | tuple):
            return None
        value = self.eval(node)
        return value if isinstance(value, list | tuple) else None

    def _check_list_index(self, node: ast.AST, container: Any, index: Any) -> None:
        if isinstance(index, Scalar | Vector):
            raise self.fail("DSL301", node, "a per-thread list is indexed with compile-time ints (loop with "
                            "dsl.static_range to index it from a loop)")
        if not isinstance(index, int) or isinstance(index, bool):
            raise self.fail("DSL301", node, f"a list index must be an int, not {type_name(index)}")
        if not -len(container) <= index < len(container):
            raise self.fail("DSL301", node, f"index {index} is out of range for a list of {len(container)}")

    def store_subscript(self, target: ast.Subscript, value: Any) -> None:
        raise self.fail("DSL302", target, "item assignment is not supported here")

    def stmt_Return(self, stmt: ast.Return) -> None:
        frame = self.frame
        if stmt.value is not None:
            if "dynamic" in frame.loops:
                raise self.fail("DSL302", stmt, "'return' with a value inside a run-time loop is not supported; "
                                "assign the value to a name, 'break', and return it after the loop")
            frame.env[RETURN_NAME] = self.eval(stmt.value)
        frame.env[RETURN_FLAG] = True

    def stmt_Break(self, stmt: ast.Break) -> None:
        self._loop_exit(stmt, BREAK_FLAG, "break")

    def stmt_Continue(self, stmt: ast.Continue) -> None:
        self._loop_exit(stmt, CONTINUE_FLAG, "continue")

    def _loop_exit(self, stmt: ast.stmt, flag: str, word: str) -> None:
        if not self.frame.loops:
            raise self.fail("DSL302", stmt, f"'{word}' outside a loop")
        self.frame.env[flag] = True

    def stmt_Assert(self, stmt: ast.Assert) -> None:
        cond = self.eval(stmt.test)
        if isinstance(cond, Scalar | Vector):
            raise self.fail("DSL302", stmt, "assert on a run-time value is not supported; use dsl.const_expr")
        if not cond:
            msg = self.eval(stmt.msg) if stmt.msg else "assertion failed while tracing"
            raise self.fail("DSL301", stmt, str(msg))

    # ----- expressions ------------------------------------------------------------------
    def wrap(self, node: ast.AST, thunk: Any) -> Any:
        """Runs `thunk`, turning the DSL's user errors into diagnostics at `node`: a type
        mistake is DSL301, a construct the DSL cannot lower DSL302 (the one place that says so)."""
        try:
            return thunk()
        except DSLTargetError as err:
            raise DiagnosticError(self.target_diagnostic(node, err)) from None
        except DSLTypeError as err:
            raise self.fail("DSL301", node, str(err)) from None
        except DSLUnsupported as err:
            raise self.fail("DSL302", node, str(err)) from None

    def eval(self, node: ast.expr) -> Any:
        method = getattr(self, f"expr_{type(node).__name__}", None)
        if method is None:
            raise self.fail("DSL302", node, f"'{_describe(node)}' is not supported in DSL functions")
        with self.loc(node):
            return self.wrap(node, lambda: method(node))

    def expr_Constant(self, node: ast.Constant) -> Any:
        return node.value

    def expr_Name(self, node: ast.Name) -> Any:
        return self.lookup(node.id, node)

    def expr_Tuple(self, node: ast.Tuple) -> Any:
        return tuple(self.elements(node.elts))

    def expr_List(self, node: ast.List) -> Any:
        return self.elements(node.elts)

    def expr_BinOp(self, node: ast.BinOp) -> Any:
        a, b = self.eval(node.left), self.eval(node.right)
        return A.binary(type(node.op).__name__, a, b)

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Any:
        return A.unary(type(node.op).__name__, self.eval(node.operand))

    def expr_Compare(self, node: ast.Compare) -> Any:
        result = None
        left = self.eval(node.left)
        for op, comparator in zip(node.ops, node.comparators):
            right = self.eval(comparator)
            name = type(op).__name__
            if name in ("Is", "IsNot", "In", "NotIn"):
                if isinstance(left, Scalar | Vector) or isinstance(right, Scalar | Vector):
                    raise DSLTypeError(f"'{name}' comparisons need compile-time values")
                value = {"Is": lambda a, b: a is b, "IsNot": lambda a, b: a is not b,
                         "In": lambda a, b: a in b, "NotIn": lambda a, b: a not in b}[name](left, right)
            else:
                value = A.compare(name, left, right)
            result = value if result is None else self._and(result, value)
            left = right
        return result

    def _and(self, a: Any, b: Any) -> Any:
        if isinstance(a, Scalar) or isinstance(b, Scalar):
            if not isinstance(a, Scalar) and not a:
                return a
            if not isinstance(b, Scalar) and b:
                return a
            return A.logical("And", a, b)
        return a and b

    def expr_BoolOp(self, node: ast.BoolOp) -> Any:
        """`and` / `or` short-circuit as in Python: on a run-time left side, the right side is
        traced in a branch when it reads memory or may trap (`i < n and x[i] > 0` must not load
        `x[i]` out of bounds); when it is plain arithmetic it is computed beside the left."""
        op = type(node.op).__name__
        result = self.eval(node.values[0])
        for value_node in node.values[1:]:
            if not isinstance(result, Scalar):
                # Python short-circuit on compile-time values
                if (op == "And" and not result) or (op == "Or" and result):
                    return result
                result = self.eval(value_node)
                continue
            value = self._short_circuit(node, op, result, value_node)
            if not isinstance(value, Scalar):
                if (op == "And" and not value) or (op == "Or" and value):
                    return value
                continue
            result = value
        return result

    def _short_circuit(self, node: ast.BoolOp, op: str, left: Scalar, right: ast.expr) -> Any:
        """The right operand of `left and right` / `left or right`, joined with `left`."""
        cond = A.truth(left)
        draft = ops.scf_if(cond.value, [], has_else=True)
        block = draft.regions[0 if op == "And" else 1].blocks[0]
        with ir.InsertionPoint(block):
            value = self.eval(right)
        emitted = list(block.operations)
        if not isinstance(value, Scalar) or all(_speculatable(o) for o in emitted):
            for o in emitted:
                o.move_before(draft)
            draft.erase()
            return A.logical(op, left, value) if isinstance(value, Scalar) else value
        with ir.InsertionPoint(block):
            taken = self.wrap(right, lambda: A.truth(value))
        other = draft.regions[1 if op == "And" else 0].blocks[0]
        with ir.InsertionPoint(other):
            skipped = A.to_scalar(op == "Or")
        pair = (taken, skipped) if op == "And" else (skipped, taken)
        (joined,) = self._rebuild_if(cond, draft, [draft.regions[0].blocks[0], draft.regions[1].blocks[0]], [pair])
        return joined

    def expr_IfExp(self, node: ast.IfExp) -> Any:
        """`a if cond else b`: a compile-time condition picks one side while tracing; on a
        run-time one both sides are traced in branches, and become a select when they are
        plain arithmetic (no memory, no trap), else an `scf.if` that runs only the side taken."""
        cond = self.eval(node.test)
        if not isinstance(cond, Scalar | Vector):
            return self.eval(node.body if cond else node.orelse)
        if isinstance(cond, Vector):
            raise self.fail("DSL301", node.test, "the condition of `a if cond else b` must be a scalar")
        truth = A.truth(cond)
        draft = ops.scf_if(truth.value, [], has_else=True)
        blocks = [draft.regions[0].blocks[0], draft.regions[1].blocks[0]]
        sides = []
        for block, side in zip(blocks, (node.body, node.orelse)):
            with ir.InsertionPoint(block):
                sides.append(self.eval(side))
        dtypes = [v.dtype if isinstance(v, Scalar | Vector) else None for v in sides]
        widths = {v.width for v in sides if isinstance(v, Vector)}
        if len(widths) > 1 or (widths and not all(isinstance(v, Vector) for v in sides)):
            raise self.fail("DSL301", node, f"`a if cond else b` with {type_name(sides[0])} and "
                            f"{type_name(sides[1])}: both sides need one type")
        known = [d for d in dtypes if d is not None] or [A.literal_type(v) for v in sides]
        dtype = known[0] if len(known) == 1 or known[0] == known[1] else promote(known[0], known[1])
        if dtype is None:
            raise self.fail("DSL301", node, f"`a if cond else b` mixes {known[0].name} and {known[1].name}; "
                            "cast one side")
        values = []
        for block, value, side in zip(blocks, sides, (node.body, node.orelse)):
            with ir.InsertionPoint(block), self.loc(side):
                values.append(self.wrap(side, lambda v=value: A.cast(A.to_scalar(v, dtype), dtype)
                                        if not isinstance(v, Vector) else A.cast(v, dtype)))
        if all(_speculatable(o) for block in blocks for o in block.operations):
            for block in blocks:
                for o in list(block.operations):
                    o.move_before(draft)
            draft.erase()
            chosen = ops.value("arith.select", values[0].value.type, truth.value, values[0].value, values[1].value)
            return Vector(chosen, dtype, values[0].width) if isinstance(values[0], Vector) else Scalar(chosen, dtype)
        (joined,) = self._rebuild_if(truth, draft, blocks, [(values[0], values[1])])
        return joined

    def expr_Attribute(self, node: ast.Attribute) -> Any:
        base = self.eval(node.value)
        return self.get_attribute(node, base, node.attr)

    def get_attribute(self, node: ast.Attribute, base: Any, attr: str) -> Any:
        if isinstance(base, Vector) and attr in vector_ops.REDUCTIONS:
            return BoundMethod(attr, base)
        if isinstance(base, Scalar | Vector):
            if attr == "to":
                return BoundMethod("to", base)
            if attr == "dtype":
                return base.dtype
            raise DSLTypeError(f"{type_name(base)} has no attribute '{attr}'")
        try:
            return getattr(base, attr)
        except AttributeError:
            raise self.fail("DSL301", node, missing_attribute(node, base, attr)) from None

    def expr_Subscript(self, node: ast.Subscript) -> Any:
        base = self.eval(node.value)
        index = self.eval(node.slice)
        return self.subscript(node, base, index)

    def subscript(self, node: ast.Subscript, base: Any, index: Any) -> Any:
        if isinstance(base, ShapeView):
            if not isinstance(index, int):
                raise self.fail("DSL301", node.slice, f"{base.what} must be indexed by a compile-time int")
            if not -len(base.items) <= index < len(base.items):
                raise self.fail("DSL301", node.slice, f"{base.what}[{index}] is out of range for rank "
                                f"{len(base.items)}")
            return base.items[index]
        if isinstance(base, Vector) and isinstance(index, slice):  # lanes of a fragment: v[0:4]
            lanes = range(*index.indices(base.width)) if all(
                isinstance(i, int | None) for i in (index.start, index.stop, index.step)) else None
            if not lanes:
                raise self.fail("DSL301", node.slice, "a vector slice needs compile-time bounds that select lanes")
            elements = [ops.vector_extract(base.value, k) for k in lanes]
            ty = ir.VectorType.get([len(elements)], base.dtype.mlir_type())
            return Vector(ops.vector_from_elements(ty, elements), base.dtype, len(elements))
        if isinstance(base, Vector):
            self._check_lane(node, base, index)
            return Scalar(ops.vector_extract(base.value, index), base.dtype)
        if isinstance(base, Scalar):
            raise DSLTypeError(f"{type_name(base)} is not indexable")
        if isinstance(base, list | tuple) and not isinstance(index, slice):
            self._check_list_index(node.slice, base, index)
        try:
            return base[index]
        except TypeError:  # Python's message would name the compiler's classes
            raise self.fail("DSL301", node, f"{type_name(base)} cannot be indexed here") from None
        except (IndexError, KeyError) as err:
            raise self.fail("DSL301", node, f"bad index: {err}") from None

    def _check_lane(self, node: ast.Subscript, vec: Vector, index: Any) -> None:
        """A lane is a register of its own: it is named by a compile-time int. A run-time one
        is refused with the select that picks a lane at run time, in the user's own names."""
        if isinstance(index, Scalar) and index.dtype.is_int:
            v, k = ast.unparse(node.value), ast.unparse(node.slice)
            raise self.fail("DSL301", node.slice, f"a vector lane must be a compile-time int (a literal, a "
                            f"Constexpr or a dsl.static_range index); '{k}' is a run-time {type_name(index)}. To "
                            f"pick a lane at run time, select: `lane = {v}[0]` then `for j in dsl.static_range(1, "
                            f"{vec.width}): lane = {v}[j] if {k} == j else lane`")
        if not isinstance(index, int) or isinstance(index, bool):
            raise self.fail("DSL301", node.slice, f"a vector lane is an int, not {type_name(index)}")
        if not 0 <= index < vec.width:
            raise self.fail("DSL301", node.slice, f"vector lane {index} out of range 0..{vec.width - 1} "
                            f"({type_name(vec)})")

    def expr_ListComp(self, node: ast.ListComp) -> Any:
        """`[f(k) for k in dsl.static_range(n) if cond]`: built while tracing, so the iterables
        and conditions are compile-time values; the loop names do not leak, as in Python."""
        out: list[Any] = []
        env = self.frame.env
        targets = assigned_names([ast.Assign(targets=[g.target for g in node.generators], value=node.elt)])
        saved = {name: env[name] for name in targets if name in env}

        def generate(level: int) -> None:
            if level == len(node.generators):
                out.append(self.eval(node.elt))
                return
            gen = node.generators[level]
            items = self.eval(gen.iter)
            if isinstance(items, Vector):
                items = vector_ops.lanes(items)
            if not isinstance(items, range | list | tuple):
                raise self.fail("DSL302", gen.iter, "a comprehension in a DSL function iterates over "
                                "dsl.static_range, range of ints, a list, a tuple or a vector's lanes")
            if len(items) > 4096:
                raise self.fail("DSL302", gen.iter, f"a comprehension of {len(items)} items is too long to unroll")
            for item in items:
                self.assign(gen.target, item)
                keep = True
                for test in gen.ifs:
                    verdict = self.eval(test)
                    if isinstance(verdict, Scalar | Vector):
                        raise self.fail("DSL302", test, "a comprehension's condition must be a compile-time value")
                    keep = keep and bool(verdict)
                if keep:
                    generate(level + 1)

        try:
            generate(0)
        finally:
            for name in targets:
                env.pop(name, None)
            env.update(saved)
        return out

    def expr_Slice(self, node: ast.Slice) -> Any:
        return slice(*(self.eval(p) if p is not None else None for p in (node.lower, node.upper, node.step)))

    def expr_Call(self, node: ast.Call) -> Any:
        fn = self.eval(node.func)
        args = self.elements(node.args)
        kwargs: dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg is not None:
                kwargs[kw.arg] = self.eval(kw.value)
                continue
            mapping = self.eval(kw.value)
            if not isinstance(mapping, dict) or not all(isinstance(k, str) for k in mapping):
                raise self.fail("DSL301", kw.value, f"'**' needs a dict with str keys, not {type_name(mapping)}")
            kwargs.update(mapping)
        return self.call(node, fn, args, kwargs)

    def elements(self, nodes: list[ast.expr]) -> list[Any]:
        """The values of a call's arguments or a display's items, `*x` unpacked."""
        out: list[Any] = []
        for item in nodes:
            if isinstance(item, ast.Starred):
                out.extend(self.unpacked(item.value, self.eval(item.value), "'*'"))
            else:
                out.append(self.eval(item))
        return out

    def unpacked(self, node: ast.AST, value: Any, how: str) -> list[Any]:
        """What Python iterates in `value`: a vector's lanes (its width is known while tracing),
        the items of a list, tuple or range, or DSL301 at `node` for anything else."""
        if isinstance(value, Vector):
            return list(vector_ops.lanes(value))
        if isinstance(value, list | tuple | range | str | dict | ShapeView):
            return list(value)
        why = " (a run-time scalar is one value)" if isinstance(value, Scalar) else ""
        raise self.fail("DSL301", node, f"cannot unpack {type_name(value)} with {how}{why}")

    def call(self, node: ast.Call, fn: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if isinstance(fn, BoundMethod) and isinstance(fn.receiver, Scalar | Vector):
            return self.call_value_method(fn, args, kwargs)
        if isinstance(fn, DType):
            if len(args) != 1 or kwargs:
                raise DSLTypeError(f"{fn.name}(...) takes one value")
            return A.cast(args[0], fn)
        if _is_one_of(fn, (sum, len, list, tuple, min, max)) and len(args) == 1 and not kwargs:
            sequence = self.call_on_sequence(fn, args[0])
            if sequence is not None:
                return sequence
        if fn is print:  # kernels trace it (`KernelTracer.call`); a jit body is traced, not run
            raise DSLUnsupported("print() in a @jit function is not supported: its body is traced once per "
                                 "specialization, not run per call; print in a kernel, or before the call")
        if _is_one_of(fn, (min, max, abs)) and any(isinstance(a, Scalar | Vector) for a in args):
            return self.call_intrinsic(node, {min: I.minimum, max: I.maximum, abs: I.abs_}[fn], args, kwargs)
        if self.is_intrinsic(fn):
            return self.call_intrinsic(node, fn, args, kwargs)
        if isinstance(fn, types.FunctionType) and self.is_user_function(fn):
            return self.inline(node, fn, args, kwargs)
        if isinstance(fn, types.BuiltinMethodType) and isinstance(fn.__self__, list):
            return fn(*args, **kwargs)  # a per-thread list's own method (`acc.append(v)`)
        if any(isinstance(a, Scalar | Vector) for a in list(args) + list(kwargs.values())):
            raise DSLUnsupported(f"cannot call {getattr(fn, '__name__', fn)!r} on run-time values")
        if not callable(fn):
            raise DSLTypeError(f"{type_name(fn)} is not callable")
        try:
            return fn(*args, **kwargs)
        except Exception as err:  # a compile-time call that failed is the user's error
            name = getattr(fn, "__name__", "call")
            if _holds_runtime([*args, *kwargs.values()]):
                raise self.fail("DSL302", node, f"{name}(...) cannot run on the run-time values inside its "
                                "arguments: Python functions run while tracing, where those values are not "
                                "known") from None
            raise self.fail("DSL301", node, f"{name}(...) failed while tracing: {err}") from None

    def call_value_method(self, method: BoundMethod, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """`x.to(dtype)`, `v.sum()`, `v.max()`, `v.min()`."""
        value, name = method.receiver, method.name
        if name == "to":
            if len(args) != 1 or kwargs or not isinstance(args[0], DType):
                raise DSLTypeError(f"{type_name(value)}.to(dtype) takes one DSL scalar type, e.g. x.to(dsl.f32)")
            return A.cast(value, args[0])
        if args or kwargs:
            raise DSLTypeError(f"v.{name}() takes no arguments")
        return vector_ops.reduce_lanes(value, name, f"v.{name}()")

    def call_on_sequence(self, fn: Any, value: Any) -> Any:
        """Python's builtins on one sequence argument: a vector's lanes behave as a tuple of
        scalars (`len(v)`, `list(v)`, `sum(v)` left to right from 0 as Python adds), and
        `max` / `min` of a vector or of a per-thread list reduce with `dsl.max` / `dsl.min`."""
        if isinstance(value, Vector):
            if fn is len:
                return value.width
            if fn in (min, max):
                return vector_ops.reduce_lanes(value, fn.__name__, f"{fn.__name__}(v)")
            return fn(vector_ops.lanes(value))
        if fn in (min, max) and isinstance(value, list | tuple) and value \
                and any(isinstance(v, Scalar | Vector) for v in value):
            acc = value[0]
            for other in value[1:]:
                acc = A.min_max(fn.__name__, acc, other)
            return acc
        return None

    def is_intrinsic(self, fn: Any) -> bool:
        return False

    def call_intrinsic(self, node: ast.Call, fn: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        raise DSLUnsupported(f"{fn!r} is not available here")

    @staticmethod
    def is_user_function(fn: types.FunctionType) -> bool:
        """Helpers from user code are traced inline; library functions run in Python."""
        return is_user_function(fn)

    def inline(self, node: ast.Call, fn: types.FunctionType, args: list[Any], kwargs: dict[str, Any]) -> Any:
        try:
            src = function_source(fn)
        except OSError as err:
            raise self.fail("DSL302", node, f"cannot trace helper {fn.__name__}: {err}") from None
        import inspect

        try:
            bound = inspect.signature(fn).bind(*args, **kwargs)
        except TypeError as err:
            raise self.fail("DSL301", node, f"{fn.__name__}(): {err}") from None
        bound.apply_defaults()
        if len(self.frames) > 64:
            raise self.fail("DSL302", node, "helper calls nest too deeply (recursion is not supported)")
        env = dict(bound.arguments)
        globals_ = {**fn.__globals__, **closure_vars(fn)}
        frame = Frame(src.file, env, globals_, call_loc=self.loc(node), tail=[True],  # inline() reads the flag
                      name=fn.__name__, call_range=self.range(node))
        self.frames.append(frame)
        try:
            self.run_block(src.node.body)
        finally:
            self.frames.pop()
        if RETURN_NAME in frame.env and frame.env[RETURN_FLAG] is not True:
            raise self.fail("DSL303", node, f"{fn.__name__}() returns a value on some run-time paths and "
                            "falls off its end (None) on others; return a value on every path")
        return frame.env.get(RETURN_NAME)

    # Unsupported expression kinds get DSL302 through `eval`'s fallback.

    # ----- facts for the editor ------------------------------------------------------------
    def record_parameters(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """Each parameter's value in this specialization, at its name in the `def` (for the editor)."""
        if self.facts is None:
            return
        env = self.frame.env
        for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
            if arg.arg in env:
                start = self.range(arg)
                rng = SourceRange(start.file, start.line, start.column, start.line, start.column + len(arg.arg))
                self.facts.bind(rng, arg.arg, env[arg.arg], device=self.mode == "kernel", parameter=True)

    def _trace_loop(self, stmt: ast.stmt, names: list[str], build: Any) -> None:
        super()._trace_loop(stmt, names, build)
        if self.facts is not None:
            self.facts.carried_by(self.range(stmt), names)


def _is_one_of(fn: Any, functions: tuple[Any, ...]) -> bool:
    """Identity, not `in`: a called object may compare elementwise (a NumPy array) or as a DSL value."""
    return any(fn is f for f in functions)


def _holds_runtime(values: list[Any]) -> bool:
    """Whether run-time values sit in `values`, inside lists and tuples too."""
    stack = list(values)
    while stack:
        value = stack.pop()
        if isinstance(value, Scalar | Vector):
            return True
        if isinstance(value, list | tuple):
            stack.extend(value)
    return False


_TRAPPING = {"arith.divsi", "arith.divui", "arith.remsi", "arith.remui", "arith.ceildivsi", "arith.ceildivui",
             "arith.floordivsi"}


def _speculatable(op: Any) -> bool:
    """Arithmetic that can run on a path Python would not take: no memory, no trap."""
    name = op.name
    return name.startswith(("arith.", "math.")) and name not in _TRAPPING


def _describe(node: ast.AST) -> str:
    names = {
        "Try": "try", "TryStar": "try", "With": "with", "AsyncWith": "async with", "Raise": "raise",
        "Yield": "yield", "YieldFrom": "yield from", "Await": "await", "Lambda": "lambda",
        "FunctionDef": "nested def", "ClassDef": "class", "Global": "global", "Nonlocal": "nonlocal",
        "Delete": "del", "Import": "import", "ImportFrom": "import",
        "DictComp": "dict comprehension", "SetComp": "set comprehension", "GeneratorExp": "generator",
        "JoinedStr": "f-string", "Match": "match", "AsyncFor": "async for", "NamedExpr": ":=",
        "Dict": "dict display", "Set": "set display",
    }
    return names.get(type(node).__name__, type(node).__name__)
