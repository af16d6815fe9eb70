"""Structured control flow on lanes: `scf.if`, `scf.for` and `scf.while` under active masks.

- `scf.if` runs each region for the lanes whose condition selects it (only the one taken when
  the condition is uniform) and merges the yielded values lane by lane;
- `scf.for` and `scf.while` iterate while any lane is still in the loop, each lane leaving
  when its own condition fails (a loop whose bounds are uniform is a plain Python loop).

Lanes run the regions in lockstep, then-region before else-region: one of the orders the
GPU's threads may take.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dsl.interpreter.lanes import Lanes, and_mask, select
from dsl.interpreter.program import Maker, OpInfo, Step
from dsl.interpreter.values import LaneType


def _yields(term: OpInfo | None) -> list[int]:
    return term.args if term is not None else []


def _scf_if(info: OpInfo) -> Step:
    b = info.builder
    then, _, then_term = b.region_block(info.op.regions[0])
    has_else = len(info.op.regions[1].blocks) > 0
    other, _, else_term = b.region_block(info.op.regions[1]) if has_else else (None, [], None)
    (cond,) = info.args
    outs, vector = info.outs, [t.width > 0 for t in info.out_types]
    then_y, else_y = _yields(then_term), _yields(else_term)

    def step(st: Lanes) -> None:
        v = st.v
        c = v[cond]
        if np.ndim(c) == 0:  # uniform: only the region taken runs
            if c:
                then.run(st)
                results = [v[y] for y in then_y]
            elif other is not None:
                other.run(st)
                results = [v[y] for y in else_y]
            else:
                return
            for o, r in zip(outs, results):
                v[o] = r
            return
        outer = st.mask
        taken = and_mask(outer, c, st.n)
        skipped = and_mask(outer, ~np.asarray(c), st.n)
        got_then = got_else = None
        if taken.any():
            st.mask = taken
            then.run(st)
            got_then = [v[y] for y in then_y]
        if other is not None and skipped.any():
            st.mask = skipped
            other.run(st)
            got_else = [v[y] for y in else_y]
        st.mask = outer
        for k, o in enumerate(outs):
            if got_then is not None and got_else is not None:
                v[o] = select(c, got_then[k], got_else[k], vector[k])
            else:
                v[o] = (got_then if got_then is not None else got_else)[k]  # type: ignore[index]

    return step


def _less(a: Any, b: Any, t: LaneType, unsigned: bool) -> Any:
    if unsigned:
        return np.asarray(a).view(t.unsigned) < np.asarray(b).view(t.unsigned)
    return np.asarray(a) < np.asarray(b)


def _scf_for(info: OpInfo) -> Step:
    b = info.builder
    body, arg_slots, term = b.region_block(info.op.regions[0])
    lb, ub, inc, *inits = info.args
    iv_slot, carried_slots = arg_slots[0], arg_slots[1:]
    t = info.arg_types[0]
    unsigned = "unsignedCmp" in info.op.attributes
    yields = _yields(term)
    outs, vector = info.outs, [ty.width > 0 for ty in info.out_types]
    wrap = t.np

    def step(st: Lanes) -> None:
        v = st.v
        lo, hi, by = v[lb], v[ub], v[inc]
        carried = [v[i] for i in inits]
        if np.ndim(lo) == 0 and np.ndim(hi) == 0 and np.ndim(by) == 0:  # the same trip count everywhere
            iv = lo
            while _less(iv, hi, t, unsigned):
                v[iv_slot] = iv
                for s, c in zip(carried_slots, carried):
                    v[s] = c
                body.run(st)
                carried = [v[y] for y in yields]
                iv = wrap(iv + by)
        else:
            outer = st.mask
            iv = np.broadcast_to(np.asarray(lo), (st.n,)).astype(wrap)
            active = and_mask(outer, _less(iv, hi, t, unsigned), st.n)
            while active.any():
                st.mask = active
                v[iv_slot] = iv
                for s, c in zip(carried_slots, carried):
                    v[s] = c
                body.run(st)
                carried = [select(active, v[y], c, vec) for y, c, vec in zip(yields, carried, vector)]
                iv = np.where(active, (iv + by).astype(wrap), iv)
                active = active & _less(iv, hi, t, unsigned)
            st.mask = outer
        for o, c in zip(outs, carried):
            v[o] = c

    return step


def _scf_while(info: OpInfo) -> Step:
    b = info.builder
    before, before_args, cond_term = b.region_block(info.op.regions[0])
    after, after_args, after_term = b.region_block(info.op.regions[1])
    if cond_term is None or cond_term.name != "scf.condition":
        raise info.refuse("a while loop without scf.condition")
    cond, *forwarded = cond_term.args
    yields = _yields(after_term)
    outs, vector = info.outs, [ty.width > 0 for ty in info.out_types]

    def step(st: Lanes) -> None:
        v = st.v
        values = [v[i] for i in info.args]
        outer = st.mask
        active = outer
        results: list[Any] = [None] * len(outs)
        while True:
            st.mask = active
            for s, x in zip(before_args, values):
                v[s] = x
            before.run(st)
            c = v[cond]
            fwd = [v[f] for f in forwarded]
            if np.ndim(c) == 0 and active is outer:  # every lane still in the loop decides alike
                if not c:
                    results = fwd
                    break
                go = active
            else:
                go = and_mask(active, c, st.n)
                leaving = and_mask(active, ~np.asarray(c), st.n)
                results = [f if r is None else select(leaving, f, r, vec)
                           for f, r, vec in zip(fwd, results, vector)]
                if not go.any():
                    break
            st.mask = go
            for s, x in zip(after_args, fwd):
                v[s] = x
            after.run(st)
            values = [v[y] for y in yields]
            active = go
        st.mask = outer
        for o, r in zip(outs, results):
            v[o] = r

    return step


MAKERS: dict[str, Maker] = {"scf.if": _scf_if, "scf.for": _scf_for, "scf.while": _scf_while}
