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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from mlir import ir

from dsl.diagnostics import SourceRange
from dsl.frontend import arith as A
from dsl.frontend import ops, vector_ops
from dsl.frontend.carried import (
    LIST_KEY,
    CarriedState,
    LengthChanged,
    changed,
    label_of,
    reachable_lists,
    restore,
    snapshot,
)
from dsl.frontend.control_flow import (
    BREAK_FLAG,
    CONTINUE_FLAG,
    EXIT_FLAGS,
    RETURN_FLAG,
    RETURN_NAME,
    assigned_names,
    loop_exits,
)
from dsl.frontend.values import DSLTypeError, DSLUnsupported, Scalar, Vector, type_name
from dsl.language import intrinsics as I
from dsl.language.types import DType

MAX_STATIC_ITERATIONS = 4096


def _like(template: Any, value: Any) -> Any:
    if isinstance(template, Vector):
        return Vector(value, template.dtype, template.width)
    return Scalar(value, template.dtype)


def _same_python(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return a is b


def _exit_kind(env: dict[str, Any], preset: str | None) -> str | None:
    """How every path of a branch left: "return", "loop" (`break`/`continue`), or None."""
    if env.get(RETURN_FLAG) is True or preset == "return":
        return "return"
    if env.get(BREAK_FLAG) is True or env.get(CONTINUE_FLAG) is True:
        return "loop"
    return preset


def _shape_name(value: Any) -> str:
    if isinstance(value, list | tuple):
        return f"a {type(value).__name__} of {len(value)}"
    return type_name(value)


def _exit_preset(pending: list[str]) -> str:
    """The exit of the path on which one of the `pending` flags is set."""
    return "return" if pending == [RETURN_FLAG] else "loop"


class StructuredControlFlow:
    """Mixed into `Tracer`: the statements and expressions that branch or loop."""

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
        names = assigned_names(stmt.body + stmt.orelse)
        self.trace_if(stmt, cond, names, lambda: self.run_block(stmt.body), lambda: self.run_block(stmt.orelse))

    def guard_rest(self, rest: list[ast.stmt], pending: list[str]) -> None:
        """Traces `rest` under `if not (flag or ...)`: the statements after one that left the
        block on some run-time paths run only on the paths that did not."""
        frame = self.frame
        flags = [frame.env[name] for name in pending]
        stop = flags[0]
        for flag in flags[1:]:
            stop = A.logical("Or", stop, flag)
        go = A.unary("Not", stop)

        def then() -> None:
            for name in pending:
                frame.env[name] = False  # known: this path has not left
            self.run_block(rest)

        def otherwise() -> None:
            if len(pending) == 1:
                frame.env[pending[0]] = True  # the only way here is that exit

        self.trace_if(rest[0], go, assigned_names(rest), then, otherwise, else_exit=_exit_preset(pending))

    def trace_if(self, node: ast.AST, cond: Scalar, names: list[str], then: Any, otherwise: Any,
                 else_exit: str | None = None) -> None:
        """Traces `then()` and `otherwise()` into the two regions of an `scf.if` and merges what
        they assign (names, exit flags, elements of lists and tuples) into its results."""
        frame = self.frame
        before = dict(frame.env)
        names = list(names)
        if frame.flags_read_later():
            names += [flag for flag in EXIT_FLAGS if flag in before and flag not in names]
        lists = reachable_lists(before)
        saved = snapshot(lists)
        draft = ops.scf_if(cond.value, [], has_else=True)
        branches, contents = [], []
        for block, run in ((draft.regions[0].blocks[0], then), (draft.regions[1].blocks[0], otherwise)):
            frame.env = dict(before)
            with ir.InsertionPoint(block):
                run()
            branches.append((block, dict(frame.env)))
            contents.append(snapshot(lists))
            restore(lists, saved)
        frame.env = before
        in_place = self._key_list_elements(node, lists, saved, contents, before, branches, names)
        kinds = (_exit_kind(branches[0][1], None), _exit_kind(branches[1][1], else_exit))
        traced = {id(lst): k for k, lst in enumerate(lists)}

        def items_on(side: int, container: Any) -> list[Any]:
            """A container's elements as that branch left them (lists are restored after each)."""
            k = traced.get(id(container))
            return list(container) if k is None else contents[side][k]

        rebuilt = self._key_containers(node, branches, names, kinds, items_on)
        merged = self.merge_branches(node, names, before, branches, else_exit)
        results = self._rebuild_if(cond, draft, [b for b, _ in branches], [pair for _, pair in merged])
        for (name, _), value in zip(merged, results):
            frame.env[name] = value
        for lst, index, key in in_place:
            lst[index] = frame.env.pop(key)
        self._rebuild_containers(rebuilt)

    def _key_list_elements(self, node: ast.AST, lists: list[list[Any]], saved: list[list[Any]],
                           contents: list[list[list[Any]]], before: dict[str, Any],
                           branches: list[tuple[Any, dict[str, Any]]], names: list[str]) -> list[tuple]:
        """Elements of lists a branch changed in place become merge keys of their own."""
        touched = sorted(set(changed(lists, contents[0])) | set(changed(lists, contents[1])))
        keyed = []
        for k in touched:
            if len(contents[0][k]) != len(saved[k]) or len(contents[1][k]) != len(saved[k]):
                raise self.fail("DSL301", node, f"the length of {label_of(lists[k], before)} changes on one "
                                "path of this run-time 'if'; a per-thread list keeps its length")
            for i in range(len(saved[k])):
                key = f"{LIST_KEY}{k}:{i}"
                before[key] = saved[k][i]
                branches[0][1][key], branches[1][1][key] = contents[0][k][i], contents[1][k][i]
                names.append(key)
                keyed.append((lists[k], i, key))
        return keyed

    def _key_containers(self, node: ast.AST, branches: list[tuple[Any, dict[str, Any]]], names: list[str],
                        kinds: tuple[str | None, str | None],
                        items_on: Callable[[int, Any], list[Any]]) -> dict[str, tuple[type, int]]:
        """A name bound to a list or tuple that differs by path merges element by element (nested
        containers too): its elements may be values defined inside a branch."""
        (_, then_env), (_, else_env) = branches
        rebuilt: dict[str, tuple[type, int]] = {}
        work = list(names)
        while work:
            name = work.pop()
            sides = [env[name] for env, kind in ((then_env, kinds[0]), (else_env, kinds[1]))
                     if name in env and kind != "return"]
            containers = [v for v in sides if isinstance(v, list | tuple)]
            if not containers or (len(sides) == 2 and sides[0] is sides[1]):
                continue
            shape = (type(containers[0]), len(containers[0]))
            if len(containers) != len(sides) or any((type(c), len(c)) != shape for c in containers):
                a, b = sides[0], sides[-1]
                raise self.fail("DSL301", node, f"'{name}' is {_shape_name(a)} on one path and {_shape_name(b)} "
                                "on the other; both paths must agree")
            for side, env in enumerate((then_env, else_env)):
                if isinstance(env.get(name), list | tuple):
                    for i, item in enumerate(items_on(side, env[name])):
                        env[f"{name}{LIST_KEY}{i}"] = item
            keys = [f"{name}{LIST_KEY}{i}" for i in range(shape[1])]
            names[names.index(name):names.index(name) + 1] = keys
            work += keys
            rebuilt[name] = shape
        return rebuilt

    def _rebuild_containers(self, rebuilt: dict[str, tuple[type, int]]) -> None:
        """Puts merged elements back into containers, innermost first."""
        env, undefined = self.frame.env, self.frame.undefined
        for name in sorted(rebuilt, key=len, reverse=True):
            kind, length = rebuilt[name]
            keys = [f"{name}{LIST_KEY}{i}" for i in range(length)]
            if all(key in env for key in keys):
                env[name] = kind(env.pop(key) for key in keys)
                continue
            for key in keys:
                env.pop(key, None)
                if key in undefined:
                    undefined[name] = undefined.pop(key)

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

    def merge_branches(self, stmt: ast.AST, names: list[str], before: dict[str, Any],
                       branches: list[tuple[Any, dict[str, Any]]],
                       else_exit: str | None = None) -> list[tuple[str, tuple[Any, Any]]]:
        """Decides, per assigned name, the value after the `if`; emits casts in the branches.

        A branch every path of which returned contributes only its exit flags and a helper's
        return value: nothing else it assigned is read again, so the other branch's values
        are taken as they are. A branch that left by `break`/`continue` still hands its values
        to the loop (they are what the loop carries out or into the next iteration); a name
        only the other branch defines is taken from there (it cannot be carried by the loop).
        """
        merged = []
        (then_block, then_env), (else_block, else_env) = branches
        kinds = (_exit_kind(then_env, None), _exit_kind(else_env, else_exit))
        blocks, envs = (then_block, else_block), (then_env, else_env)
        for name in names:
            present = (name in then_env, name in else_env)
            flag_like = name in EXIT_FLAGS or name == RETURN_NAME or name.startswith(LIST_KEY)
            if not flag_like and "return" in kinds:
                if kinds == ("return", "return"):
                    continue  # nothing after this `if` runs
                live = 1 if kinds[0] == "return" else 0
                if present[live]:
                    merged += self._take_one_side(stmt, name, before, blocks, envs, live)
                continue
            if not (present[0] and present[1]):
                side = 0 if present[0] else 1
                if not present[side]:
                    continue
                if name == RETURN_NAME or kinds[1 - side] is not None:
                    # read only where it was assigned (a helper's return value; or the other
                    # path left the loop, and a name new in its body is not carried)
                    merged += self._take_one_side(stmt, name, before, blocks, envs, side)
                else:
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

    def _take_one_side(self, stmt: ast.AST, name: str, before: dict[str, Any], blocks: tuple[Any, Any],
                       envs: tuple[dict[str, Any], dict[str, Any]], side: int) -> list[tuple[str, tuple[Any, Any]]]:
        """`name` after the `if` is its value on `side`; the other path yields a placeholder."""
        value = envs[side][name]
        if not isinstance(value, Scalar | Vector) or value is before.get(name):
            self.frame.env[name] = value
            return []
        with ir.InsertionPoint(blocks[1 - side]):
            placeholder = self._placeholder(stmt, name, value)
        return [(name, (value, placeholder) if side == 0 else (placeholder, value))]

    def _placeholder(self, stmt: ast.AST, name: str, value: Any) -> Any:
        """A value of `value`'s type for a path on which it is never read (that path left the
        function or the loop): zeros, a scalar or a vector (a `vload`, a fragment, an
        accumulator) alike, so what is defined after an early exit merges like anything else."""
        if isinstance(value, Vector):
            return A.zero_vector(value.dtype, value.width)
        return A.constant(0.0 if value.dtype.is_float else 0, value.dtype)

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

    # ----- loops ------------------------------------------------------------------------
    @contextmanager
    def loop_scope(self, kind: str) -> Iterator[None]:
        """A loop's own `break`/`continue` flags, with the enclosing loop's put back after."""
        frame = self.frame
        saved = {flag: frame.env[flag] for flag in (BREAK_FLAG, CONTINUE_FLAG) if flag in frame.env}
        frame.env[BREAK_FLAG] = frame.env[CONTINUE_FLAG] = False
        frame.loops.append(kind)
        frame.tail.append(True)  # the loop re-tests its flags
        try:
            yield
        finally:
            frame.tail.pop()
            frame.loops.pop()
            for flag in (BREAK_FLAG, CONTINUE_FLAG):
                frame.env.pop(flag, None)
            frame.env.update(saved)

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
        if isinstance(iterable, Vector):  # its lanes, unrolled (the width is known while tracing)
            iterable = vector_ops.lanes(iterable)
        if isinstance(iterable, tuple | list | range):
            self.static_for(stmt, iterable)
            return
        raise self.fail("DSL302", it, f"cannot iterate over {type_name(iterable)}; use range or dsl.static_range")

    def static_for(self, stmt: ast.For, items: Any) -> None:
        """Unrolls the loop. An iteration that follows a `break`/`return` taken on some run-time
        paths is traced under `if not flag`, so it runs only where Python would run it."""
        if len(items) > MAX_STATIC_ITERATIONS:
            raise self.fail("DSL302", stmt.iter, f"static loop of {len(items)} iterations is too long to unroll")
        frame = self.frame
        names = assigned_names([stmt])
        with self.loop_scope("static"):
            for item in items:
                if frame.env[BREAK_FLAG] is True or frame.env[RETURN_FLAG] is True:
                    break

                def iteration(item: Any = item) -> None:
                    frame.env[CONTINUE_FLAG] = False
                    self.assign(stmt.target, item)
                    self.run_block(stmt.body)
                    frame.env[CONTINUE_FLAG] = False

                pending = [f for f in (BREAK_FLAG, RETURN_FLAG) if isinstance(frame.env[f], Scalar)]
                if not pending:
                    iteration()
                    continue
                stop = frame.env[pending[0]] if len(pending) == 1 else A.logical(
                    "Or", frame.env[pending[0]], frame.env[pending[1]])

                def then(iteration: Any = iteration, pending: list[str] = pending) -> None:
                    for flag in pending:
                        frame.env[flag] = False
                    iteration()

                def otherwise(pending: list[str] = pending) -> None:
                    if len(pending) == 1:
                        frame.env[pending[0]] = True

                self.trace_if(stmt, A.unary("Not", stop), names, then, otherwise, else_exit=_exit_preset(pending))

    def _carried(self, body: list[ast.stmt], exclude: set[str], exits: set[str]) -> list[str]:
        env = self.frame.env
        carried = [n for n in assigned_names(body) if n in env and n not in exclude and n != RETURN_NAME]
        if "break" in exits:
            carried.append(BREAK_FLAG)
        if "return" in exits:
            carried.append(RETURN_FLAG)
        return carried

    def _range_bounds(self, stmt: ast.For, args: list[Any]) -> tuple[Scalar, Scalar, Scalar, DType]:
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
        return lo, hi, st, dtype

    def dynamic_for(self, stmt: ast.For, args: list[Any]) -> None:
        """`for v in range(...)` on run-time bounds: an `scf.for`, or an `scf.while` carrying the
        index and the exit flags when the body can `break` or `return`."""
        if not isinstance(stmt.target, ast.Name):
            raise self.fail("DSL302", stmt.target, "the loop variable of a run-time loop must be one name")
        lo, hi, st, dtype = self._range_bounds(stmt, args)
        var = stmt.target.id
        exits = loop_exits(stmt.body)
        frame = self.frame
        with self.loop_scope("dynamic"):
            carried = self._carried(stmt.body, {var}, exits)

            def enter_body(state: CarriedState, index: Any, args: list[Any], inits: list[Any]) -> None:
                self.assign(stmt.target, Scalar(index, dtype))  # binds `var`
                state.write(frame.env, [_like(init, arg) for init, arg in zip(inits, args)])
                for flag in EXIT_FLAGS:
                    if flag in frame.env:
                        frame.env[flag] = False  # the loop runs this iteration only when none is set

            def build_for(state: CarriedState, inits: list[Any]) -> tuple[Any, list[Any], Any]:
                loop = ops.scf_for(lo.value, hi.value, st.value, [v.value for v in inits])
                body = loop.regions[0].blocks[0]
                saved = dict(frame.env)
                with ir.InsertionPoint(body):
                    enter_body(state, body.arguments[0], list(body.arguments)[1:], inits)
                    self.run_block(stmt.body)
                    outs = state.read(frame.env)
                self._forget_body_names(stmt, saved, {var})
                return loop, outs, lambda values: (ops.scf_yield(values), list(loop.results))[1]

            def build_while(state: CarriedState, inits: list[Any]) -> tuple[Any, list[Any], Any]:
                types_ = [lo.value.type] + [v.value.type for v in inits]
                loop = ops.scf_while(types_, [lo.value] + [v.value for v in inits])
                before = loop.regions[0].blocks.append(*types_)
                after = loop.regions[1].blocks.append(*types_)
                saved = dict(frame.env)
                with ir.InsertionPoint(before):
                    go = A.compare("Lt", Scalar(before.arguments[0], dtype), hi)
                    for label, init, arg in zip(state.labels, inits, list(before.arguments)[1:]):
                        if label in (BREAK_FLAG, RETURN_FLAG):
                            go = A.logical("And", go, A.unary("Not", _like(init, arg)))
                    ops.create("scf.condition", operands=[go.value, *before.arguments])
                with ir.InsertionPoint(after):
                    enter_body(state, after.arguments[0], list(after.arguments)[1:], inits)
                    self.run_block(stmt.body)
                    outs = state.read(frame.env)
                    next_index = A.binary("Add", Scalar(after.arguments[0], dtype), st)
                self._forget_body_names(stmt, saved, {var})

                def finish(values: list[Any]) -> list[Any]:
                    with ir.InsertionPoint(after):
                        ops.scf_yield([next_index.value, *values])
                    return list(loop.results)[1:]

                return loop, outs, finish

            self._trace_loop(stmt, carried, build_while if exits & {"break", "return"} else build_for)
        frame.env.pop(var, None)
        frame.undefined[var] = self.range(stmt.target)
        frame.undefined_why[var] = (f"the loop variable '{var}' of a run-time loop is not defined after the "
                                    "loop; copy it to another name inside the loop")

    def _forget_body_names(self, stmt: ast.stmt, saved: dict[str, Any], exclude: set[str]) -> None:
        """Restores the environment after tracing a loop body; names first assigned inside
        it are not defined after the loop (DSL303 if used)."""
        frame = self.frame
        body_env = frame.env
        frame.env = saved
        for name in assigned_names(stmt.body):
            if name not in saved and name not in exclude and name in body_env:
                frame.undefined[name] = self._assignment_range(stmt, name)

    def _trace_loop(self, stmt: ast.stmt, names: list[str], build: Any) -> None:
        """Traces a loop whose body carries `names` and whatever lists it changes in place.

        `build(state, inits)` traces the loop and returns it, the carried values at the end of
        the body and `finish(values)`, which emits the terminator and gives the loop's results.
        The loop is traced again when an iteration changes a carried value's type (`acc = 0`
        then `acc += x[i]`) or changes a list that was not carried yet."""
        frame = self.frame
        lists = reachable_lists(frame.env)
        saved = snapshot(lists)
        carried_lists: list[list[Any]] = []
        retyped: dict[str, DType] = {}
        for _attempt in range(4):
            state = CarriedState(names, frame.env, carried_lists)
            start = state.read(frame.env)
            inits = [self._materialize(stmt, label, v, retyped.get(label)) for label, v in zip(state.labels, start)]
            try:
                loop, outs, finish = build(state, inits)
            except LengthChanged as err:
                restore(lists, saved)
                raise self.fail("DSL301", stmt, f"the length of {err.label} changes inside this run-time loop; "
                                "a per-thread list keeps its length (build it before the loop)") from None
            mutated = [lists[k] for k in changed(lists, saved)]
            restore(lists, saved)
            body = loop.regions[len(loop.regions) - 1].blocks[0]
            retry = False
            for i, (label, out) in enumerate(zip(state.labels, outs)):
                init = inits[i]
                out_type = out.dtype if isinstance(out, Scalar | Vector) else None
                if out is None or out_type is None:
                    out = self._materialize(stmt, label, out, init.dtype, inside=body)
                    outs[i] = out
                    out_type = out.dtype
                if out_type != init.dtype or type(out) is not type(init):
                    if label not in retyped and not isinstance(start[i], Scalar | Vector):
                        retyped[label] = out_type
                        retry = True
                    else:
                        raise self.fail("DSL301", stmt, f"'{label}' changes type inside the loop "
                                        f"({type_name(init)} before, {type_name(out)} after an iteration)")
            new = [lst for lst in mutated if not any(lst is c for c in carried_lists)]
            if new:
                carried_lists += new
                retry = True
            if retry:
                loop.erase()
                continue
            with ir.InsertionPoint(body):
                results = finish([o.value for o in outs])
            state.write(frame.env, [_like(init, result) for init, result in zip(inits, results)])
            return
        raise self.fail("DSL301", stmt, "the values this loop carries keep changing type; give them "
                        "their type before the loop")

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
        condition a run-time value (`v = 0.0; while v < 10: v += x[i]`), or leaves the loop on
        some run-time paths only, what the iterations emitted is dropped and False says: trace
        it as a run-time loop instead."""
        frame = self.frame
        block = ir.InsertionPoint.current.block
        emitted_before = len(block.operations)
        env_before, undefined_before = dict(frame.env), dict(frame.undefined)
        lists = reachable_lists(frame.env)
        saved = snapshot(lists)
        count = 0
        with self.loop_scope("static"):
            while cond:
                count += 1
                if count > MAX_STATIC_ITERATIONS:
                    raise self.fail("DSL302", stmt, "compile-time while loop did not finish")
                frame.env[CONTINUE_FLAG] = False
                self.run_block(stmt.body)
                if frame.env[BREAK_FLAG] is True or frame.env[RETURN_FLAG] is True:
                    break
                if isinstance(frame.env[BREAK_FLAG], Scalar) or isinstance(frame.env[RETURN_FLAG], Scalar):
                    cond = None
                else:
                    cond = self.eval(stmt.test)
                if cond is None or isinstance(cond, Scalar | Vector):
                    for op in list(block.operations)[emitted_before:][::-1]:
                        op.erase()
                    frame.env, frame.undefined = env_before, undefined_before
                    restore(lists, saved)
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
        with self.loop_scope("dynamic"):
            carried = self._carried(stmt.body, set(), loop_exits(stmt.body))
            self._trace_loop(stmt, carried, self._while_builder(stmt))

    def _while_builder(self, stmt: ast.While) -> Any:
        frame = self.frame

        def build(state: CarriedState, inits: list[Any]) -> tuple[Any, list[Any], Any]:
            types_ = [v.value.type for v in inits]
            loop = ops.scf_while(types_, [v.value for v in inits])
            before = loop.regions[0].blocks.append(*types_)
            after = loop.regions[1].blocks.append(*types_)
            saved = dict(frame.env)
            with ir.InsertionPoint(before):
                state.write(frame.env, [_like(init, arg) for init, arg in zip(inits, before.arguments)])
                stops = [frame.env[f] for f in (BREAK_FLAG, RETURN_FLAG) if f in state.labels]
                test = self._loop_test(stmt, stops)
                ops.create("scf.condition", operands=[test.value, *before.arguments])
            frame.env = dict(saved)
            with ir.InsertionPoint(after):
                state.write(frame.env, [_like(init, arg) for init, arg in zip(inits, after.arguments)])
                for flag in EXIT_FLAGS:
                    if flag in frame.env:
                        frame.env[flag] = False
                self.run_block(stmt.body)
                outs = state.read(frame.env)
            self._forget_body_names(stmt, saved, set())
            return loop, outs, lambda values: (ops.scf_yield(values), list(loop.results))[1]

        return build

    def _loop_test(self, stmt: ast.While, stops: list[Scalar]) -> Scalar:
        """The `while` condition, evaluated only when no `break`/`return` was taken (Python
        does not evaluate it after one, and it may read memory that is then out of bounds)."""
        if not stops:
            return self.wrap(stmt.test, lambda: A.truth(self.eval(stmt.test)))
        stop = stops[0] if len(stops) == 1 else A.logical("Or", stops[0], stops[1])
        return self.conditional_value(stmt.test, stop, lambda: A.to_scalar(False),
                                      lambda: self.wrap(stmt.test, lambda: A.truth(self.eval(stmt.test))))

    def expr_IfExp(self, node: ast.IfExp) -> Any:
        """`a if c else b` on a run-time `c` evaluates only the chosen side, as in Python:
        `x[i] if i < n else 0.0` must not load `x[i]` out of bounds (an `scf.if`, which
        canonicalization turns into a select when both sides are cheap and safe)."""
        cond = self.eval(node.test)
        if not isinstance(cond, Scalar):
            return self.eval(node.body if cond else node.orelse)
        if self.mode == "host":
            raise DSLUnsupported("a conditional expression on a run-time host value is not supported")
        return self.conditional_value(node, A.truth(cond), lambda: self.eval(node.body),
                                      lambda: self.eval(node.orelse))

    def conditional_value(self, node: ast.AST, cond: Scalar, then: Callable[[], Any],
                          otherwise: Callable[[], Any]) -> Any:
        """The value of `then()` where `cond` holds and of `otherwise()` elsewhere, each traced
        inside its own branch so only the chosen one runs."""
        draft = ops.scf_if(cond.value, [], has_else=True)
        then_block, else_block = draft.regions[0].blocks[0], draft.regions[1].blocks[0]
        values = []
        for block, thunk in ((then_block, then), (else_block, otherwise)):
            with ir.InsertionPoint(block):
                values.append(thunk())
        a, b = values
        if not isinstance(a, Scalar | Vector) and not isinstance(b, Scalar | Vector) and type(a) is type(b) \
                and _same_python(a, b):
            draft.erase()
            return a
        dtype = self._join_type(node, "the conditional expression", a, b)
        with ir.InsertionPoint(then_block):
            a = self.wrap(node, lambda: A.cast(a, dtype))
        with ir.InsertionPoint(else_block):
            b = self.wrap(node, lambda: A.cast(b, dtype))
        (result,) = self._rebuild_if(cond, draft, [then_block, else_block], [(a, b)])
        return result
