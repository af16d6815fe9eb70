"""Structured control flow while tracing: `if`, conditional expressions, `for` and `while`.

On compile-time conditions and `dsl.static_range` the tracer just runs Python (one branch,
unrolled iterations). On run-time values it emits `scf.if` / `scf.for` / `scf.while`:
the names a construct assigns that existed before it become its results or loop-carried
values, a name defined on only one path is remembered for DSL303, and a loop whose body
changes a carried value's type (`acc = 0` then `acc += x[i]`) is traced once more with
the right initial type. Result types are only known after tracing a region, so regions
are traced into a draft op and moved into the final one.
"""

from __future__ import annotations

import ast
from typing import Any

from mlir import ir

from dsl.diagnostics import SourceRange
from dsl.frontend import arith as A
from dsl.frontend import ops
from dsl.frontend.control_flow import RETURN_NAME, assigned_names
from dsl.frontend.values import DSLTypeError, DSLUnsupported, Scalar, Vector, type_name
from dsl.language import intrinsics as I
from dsl.language.types import DType

MAX_STATIC_ITERATIONS = 4096


class LoopSignal(Exception):
    """`break` / `continue` while tracing: caught by the static loop being unrolled."""

    def __init__(self, node: ast.stmt):
        self.node = node


class BreakSignal(LoopSignal):
    pass


class ContinueSignal(LoopSignal):
    pass


def _like(template: Any, value: Any) -> Any:
    if isinstance(template, Vector):
        return Vector(value, template.dtype, template.width)
    return Scalar(value, template.dtype)


def _same_python(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return a is b


class StructuredControlFlow:
    """Mixed into `Tracer`: the statements and expressions that branch or loop."""

    def stmt_Break(self, stmt: ast.Break) -> None:
        raise BreakSignal(stmt)

    def stmt_Continue(self, stmt: ast.Continue) -> None:
        raise ContinueSignal(stmt)

    # ----- if ---------------------------------------------------------------------------
    def stmt_If(self, stmt: ast.If) -> None:
        cond = self.eval(stmt.test)
        if not isinstance(cond, Scalar | Vector):
            self.run_block(stmt.body if cond else stmt.orelse)
            return
        cond = self.wrap(stmt.test, lambda: A.truth(cond))
        if self.mode == "host":
            raise self.fail("DSL302", stmt.test, "host control flow on run-time values is not supported; "
                            "use Constexpr parameters or Python values")
        self.dynamic_if(stmt, cond)

    def dynamic_if(self, stmt: ast.If, cond: Scalar) -> None:
        names = assigned_names(stmt.body + stmt.orelse)
        frame = self.frame
        before = dict(frame.env)
        draft = ops.scf_if(cond.value, [], has_else=True)
        branches = []
        for block, body in ((draft.regions[0].blocks[0], stmt.body), (draft.regions[1].blocks[0], stmt.orelse)):
            frame.env = dict(before)
            frame.returned = False
            with ir.InsertionPoint(block):
                self.run_guarded(body, "an 'if' on a run-time condition")
            branches.append((block, dict(frame.env)))
        frame.returned = False
        frame.env = before
        merged = self.merge_branches(stmt, names, before, branches)
        results = self._rebuild_if(cond, draft, [b for b, _ in branches], [pair for _, pair in merged])
        for (name, _), value in zip(merged, results):
            frame.env[name] = value

    def _rebuild_if(self, cond: Scalar, draft: Any, blocks: list[Any], yields: list[tuple[Any, Any]]) -> list[Any]:
        """Moves a traced draft `scf.if` into one that yields `yields` (then, else) pairs.

        The result types are known only after both branches are traced, and an op's
        result types are fixed when it is built, so tracing happens in a draft first.
        """
        has_else = bool(yields) or len(blocks[1].operations) > 0
        final = ops.scf_if(cond.value, [a.value.type for a, _ in yields], has_else=has_else)
        targets = [region.blocks[0] for region in list(final.regions)[:1 + has_else]]
        for side, (old, new) in enumerate(zip(blocks, targets)):
            for op in list(old.operations):
                new.append(op)
            with ir.InsertionPoint(new):
                ops.scf_yield([pair[side].value for pair in yields])
        draft.erase()
        return [_like(a, result) for (a, _), result in zip(yields, final.results)]

    def merge_branches(self, stmt: ast.stmt, names: list[str], before: dict[str, Any],
                       branches: list[tuple[Any, dict[str, Any]]]) -> list[tuple[str, tuple[Any, Any]]]:
        """Decides, per assigned name, the value after the `if`; emits casts in the branches."""
        merged = []
        (then_block, then_env), (else_block, else_env) = branches
        for name in names:
            if name not in then_env or name not in else_env:
                side_env = then_env if name in then_env else else_env
                if name in side_env:
                    self.frame.undefined[name] = self._assignment_range(stmt, name)
                continue
            a, b = then_env[name], else_env[name]
            if a is b or (not isinstance(a, Scalar | Vector) and not isinstance(b, Scalar | Vector)
                          and type(a) is type(b) and _same_python(a, b)):
                self.frame.env[name] = a
                continue
            if a is None or b is None:
                raise self.fail("DSL303", stmt, f"'{name}' is None on one path of this dynamic 'if'; "
                                "None cannot be carried through run-time control flow")
            if not (isinstance(a, Scalar | Vector | bool | int | float)
                    and isinstance(b, Scalar | Vector | bool | int | float)):
                raise self.fail("DSL301", stmt, f"'{name}' holds {type_name(a)} on one path and "
                                f"{type_name(b)} on the other; only scalars can differ by path")
            dtype = self._join_type(stmt, name, a, b)
            with ir.InsertionPoint(then_block):
                a = self.wrap(stmt, lambda a=a, t=dtype: A.cast(a, t))
            with ir.InsertionPoint(else_block):
                b = self.wrap(stmt, lambda b=b, t=dtype: A.cast(b, t))
            merged.append((name, (a, b)))
        return merged

    def _join_type(self, stmt: ast.AST, name: str, a: Any, b: Any) -> DType:
        ta = a.dtype if isinstance(a, Scalar | Vector) else None
        tb = b.dtype if isinstance(b, Scalar | Vector) else None
        if isinstance(a, Vector) or isinstance(b, Vector):
            if not (isinstance(a, Vector) and isinstance(b, Vector) and a.width == b.width and ta == tb):
                raise self.fail("DSL301", stmt, f"'{name}' has different vector types on the two paths")
            return ta
        if ta and tb:
            if ta != tb:
                raise self.fail("DSL301", stmt, f"'{name}' is {ta.name} on one path and {tb.name} on "
                                "the other; cast so both paths agree")
            return ta
        if ta or tb:
            known = ta or tb
            literal = b if ta else a
            if isinstance(literal, float) and not known.is_float:
                raise self.fail("DSL301", stmt, f"'{name}' is {known.name} on one path and a float "
                                "literal on the other")
            return known
        return A.literal_type(a if isinstance(a, float) else b)

    def _assignment_range(self, stmt: ast.stmt, name: str) -> SourceRange:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store):
                return self.range(node)
        return self.range(stmt)

    def run_guarded(self, body: list[ast.stmt], where: str) -> None:
        """Runs a block inside run-time control flow, where break/continue cannot escape."""
        try:
            self.run_block(body)
        except LoopSignal as sig:
            kind = "break" if isinstance(sig, BreakSignal) else "continue"
            raise self.fail("DSL302", sig.node, f"'{kind}' inside {where} is not supported") from None

    # ----- loops ------------------------------------------------------------------------
    def stmt_For(self, stmt: ast.For) -> None:
        if stmt.orelse:
            raise self.fail("DSL302", stmt, "for-else is not supported")
        it = stmt.iter
        if isinstance(it, ast.Call):
            fn = self.eval(it.func)
            if fn is I.static_range:
                args = [self.eval(a) for a in it.args]
                if not all(isinstance(a, int) for a in args):
                    raise self.fail("DSL301", it, "dsl.static_range needs compile-time int bounds")
                self.static_for(stmt, range(*args))
                return
            if fn is range:
                args = [self.eval(a) for a in it.args]
                if all(isinstance(a, int) for a in args) and self.mode == "host":
                    self.static_for(stmt, range(*args))
                    return
                if self.mode == "host":
                    raise self.fail("DSL302", it, "host loops over run-time bounds are not supported")
                self.dynamic_for(stmt, args)
                return
        iterable = self.eval(it)
        if isinstance(iterable, tuple | list | range):
            self.static_for(stmt, iterable)
            return
        raise self.fail("DSL302", it, f"cannot iterate over {type_name(iterable)}; use range or dsl.static_range")

    def static_for(self, stmt: ast.For, items: Any) -> None:
        if len(items) > MAX_STATIC_ITERATIONS:
            raise self.fail("DSL302", stmt.iter, f"static loop of {len(items)} iterations is too long to unroll")
        for item in items:
            self.assign(stmt.target, item)
            try:
                self.run_block(stmt.body)
            except BreakSignal:
                break
            except ContinueSignal:
                continue

    def _carried(self, body: list[ast.stmt], exclude: set[str]) -> list[str]:
        env = self.frame.env
        return [n for n in assigned_names(body) if n in env and n not in exclude and n != RETURN_NAME]

    def dynamic_for(self, stmt: ast.For, args: list[Any]) -> None:
        if not isinstance(stmt.target, ast.Name):
            raise self.fail("DSL302", stmt.target, "the loop variable of a run-time loop must be one name")
        if not 1 <= len(args) <= 3:
            raise self.fail("DSL301", stmt.iter, "range takes 1 to 3 arguments")
        start, stop, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else 1)
        if isinstance(step, int) and step <= 0:
            raise self.fail("DSL301", stmt.iter, "a run-time loop needs a positive step; "
                            "count up and index backwards instead")
        bounds = [b for b in (start, stop, step) if isinstance(b, Scalar)]
        dtype = bounds[0].dtype if bounds else A.literal_type(0)
        for b in bounds:
            if not b.dtype.is_int:
                raise self.fail("DSL301", stmt.iter, f"range bounds must be integers, not {b.dtype.name}")
        try:
            lo, hi, st = (A.to_scalar(v, dtype) for v in (start, stop, step))
            common = [A.common(lo, hi, "range")[2], A.common(lo, st, "range")[2]]
            dtype = common[0] if common[0].bits >= common[1].bits else common[1]
            lo, hi, st = (A.cast(v, dtype) for v in (lo, hi, st))
        except DSLTypeError as err:
            raise self.fail("DSL301", stmt.iter, str(err)) from None
        var = stmt.target.id
        carried = self._carried(stmt.body, {var})

        def build(inits: list[Any]) -> tuple[Any, list[Any]]:
            loop = ops.scf_for(lo.value, hi.value, st.value, [v.value for v in inits])
            body = loop.regions[0].blocks[0]
            frame = self.frame
            saved = dict(frame.env)
            with ir.InsertionPoint(body):
                frame.env[var] = Scalar(body.arguments[0], dtype)
                for name, init, arg in zip(carried, inits, list(body.arguments)[1:]):
                    frame.env[name] = _like(init, arg)
                self.run_guarded(stmt.body, "a run-time loop")
                outs = [frame.env.get(name) for name in carried]
            body_env = frame.env
            frame.env = saved
            for name in assigned_names(stmt.body):
                if name not in saved and name != var and name in body_env:
                    frame.undefined[name] = self._assignment_range(stmt, name)
            return loop, outs, body

        self._trace_loop(stmt, carried, build)

    def _trace_loop(self, stmt: ast.stmt, carried: list[str], build: Any) -> None:
        """Traces a loop body, re-tracing once when the body changes a carried value's type."""
        frame = self.frame
        inits = [self._materialize(stmt, name, frame.env[name], None) for name in carried]
        for attempt in range(2):
            loop, outs, body = build(inits)
            retry = False
            for i, (name, out) in enumerate(zip(carried, outs)):
                init = inits[i]
                out_type = out.dtype if isinstance(out, Scalar | Vector) else None
                if out is None or out_type is None:
                    out = self._materialize(stmt, name, out, init.dtype, inside=body)
                    outs[i] = out
                    out_type = out.dtype
                if out_type != init.dtype or type(out) is not type(init):
                    original = frame.env[name]
                    if attempt == 0 and not isinstance(original, Scalar | Vector):
                        inits[i] = self._materialize(stmt, name, original, out_type)
                        retry = True
                    else:
                        raise self.fail("DSL301", stmt, f"'{name}' changes type inside the loop "
                                        f"({type_name(init)} before, {type_name(out)} after an iteration)")
            if retry:
                loop.erase()
                continue
            with ir.InsertionPoint(body):
                ops.scf_yield([o.value for o in outs])
            for name, init, result in zip(carried, inits, loop.results):
                frame.env[name] = _like(init, result)
            return

    def _materialize(self, stmt: ast.stmt, name: str, value: Any, dtype: DType | None, inside: Any = None) -> Any:
        if isinstance(value, Scalar | Vector):
            return value
        if value is None:
            raise self.fail("DSL303", stmt, f"'{name}' is None when it enters this run-time loop")
        if not isinstance(value, bool | int | float):
            raise self.fail("DSL301", stmt, f"'{name}' ({type_name(value)}) cannot be carried by a run-time loop")
        try:
            if inside is not None:
                with ir.InsertionPoint(inside):
                    return A.to_scalar(value, dtype)
            return A.to_scalar(value, dtype)
        except DSLTypeError as err:
            raise self.fail("DSL301", stmt, f"'{name}': {err}") from None

    def _static_while(self, stmt: ast.While, cond: Any) -> bool:
        """Runs a loop on a compile-time condition while tracing. When an iteration makes the
        condition a run-time value (`v = 0.0; while v < 10: v += x[i]`), what the iterations
        emitted is dropped and False says: trace it as a run-time loop instead."""
        frame = self.frame
        block = ir.InsertionPoint.current.block
        emitted_before = len(block.operations)
        env_before, undefined_before = dict(frame.env), dict(frame.undefined)
        count = 0
        while cond:
            count += 1
            if count > MAX_STATIC_ITERATIONS:
                raise self.fail("DSL302", stmt, "compile-time while loop did not finish")
            try:
                self.run_block(stmt.body)
            except BreakSignal:
                break
            except ContinueSignal:
                pass
            cond = self.eval(stmt.test)
            if isinstance(cond, Scalar | Vector):
                for op in list(block.operations)[emitted_before:][::-1]:
                    op.erase()
                frame.env, frame.undefined = env_before, undefined_before
                return False
        return True

    def stmt_While(self, stmt: ast.While) -> None:
        if stmt.orelse:
            raise self.fail("DSL302", stmt, "while-else is not supported")
        cond = self.eval(stmt.test)
        if not isinstance(cond, Scalar | Vector) and self._static_while(stmt, cond):
            return
        if self.mode == "host":
            raise self.fail("DSL302", stmt, "host loops on run-time conditions are not supported")
        carried = self._carried(stmt.body, set())
        frame = self.frame

        def build(inits: list[Any]) -> tuple[Any, list[Any]]:
            types_ = [v.value.type for v in inits]
            loop = ops.scf_while(types_, [v.value for v in inits])
            before = loop.regions[0].blocks.append(*types_)
            after = loop.regions[1].blocks.append(*types_)
            saved = dict(frame.env)
            with ir.InsertionPoint(before):
                for name, init, arg in zip(carried, inits, before.arguments):
                    frame.env[name] = _like(init, arg)
                test = self.wrap(stmt.test, lambda: A.truth(self.eval(stmt.test)))
                ops.create("scf.condition", operands=[test.value, *before.arguments])
            frame.env = dict(saved)
            with ir.InsertionPoint(after):
                for name, init, arg in zip(carried, inits, after.arguments):
                    frame.env[name] = _like(init, arg)
                self.run_guarded(stmt.body, "a run-time loop")
                outs = [frame.env.get(name) for name in carried]
            frame.env = saved
            return loop, outs, after

        self._trace_loop(stmt, carried, build)

    def expr_IfExp(self, node: ast.IfExp) -> Any:
        """`a if c else b` on a run-time `c` evaluates only the chosen side, as in Python:
        `x[i] if i < n else 0.0` must not load `x[i]` out of bounds (an `scf.if`, which
        canonicalization turns into a select when both sides are cheap and safe)."""
        cond = self.eval(node.test)
        if not isinstance(cond, Scalar):
            return self.eval(node.body if cond else node.orelse)
        if self.mode == "host":
            raise DSLUnsupported("a conditional expression on a run-time host value is not supported")
        cond = A.truth(cond)
        draft = ops.scf_if(cond.value, [], has_else=True)
        then_block, else_block = draft.regions[0].blocks[0], draft.regions[1].blocks[0]
        values = []
        for block, expr in ((then_block, node.body), (else_block, node.orelse)):
            with ir.InsertionPoint(block):
                values.append(self.eval(expr))
        a, b = values
        if not isinstance(a, Scalar | Vector) and not isinstance(b, Scalar | Vector) and type(a) is type(b) \
                and _same_python(a, b):
            draft.erase()
            return a
        dtype = self._join_type(node, "the conditional expression", a, b)
        with ir.InsertionPoint(then_block):
            a = self.wrap(node.body, lambda: A.cast(a, dtype))
        with ir.InsertionPoint(else_block):
            b = self.wrap(node.orelse, lambda: A.cast(b, dtype))
        (result,) = self._rebuild_if(cond, draft, [then_block, else_block], [(a, b)])
        return result
