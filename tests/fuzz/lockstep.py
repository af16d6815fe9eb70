"""Threads that meet: a block's threads run between barriers, a warp's meet at warp operations.

The kernel's source is run as Python with each `dsl.barrier()` statement and each statement
`name = dsl.<warp op>(...)` turned into a `yield` (`reference.load_module`), so a thread is a
generator that stops where it must wait for others. `run_block` advances every thread of a
block to its next stop, then:

- a warp whose threads all stopped at one warp operation gets its results, computed across
  the warp by the operations' documented meaning (below), and runs on;
- when every thread that has not returned waits at a barrier, they go on together, if it is
  one barrier (the same line): threads that returned no longer count, as on the GPU; threads
  waiting at different barriers are a `Fault`, a barrier in divergent control flow (DSL601);
- a warp operation that some thread of the warp does not reach (it waits elsewhere or has
  returned) is a `Fault`: "every lane named in `mask` must reach the call".

Warp operations, for whole warps of 32 lanes (`width` splits them into segments):

- shuffles follow PTX `shfl.sync` (CUDA's `__shfl_*_sync`): the lane operand is read as i32
  and its low 5 bits used; `xor` reads lane `lane ^ m`, `down` lane `lane + d`, `up` lane
  `lane - d`, `idx` lane `i` of the segment; a lane whose source falls outside its segment
  (past its end, before its start) keeps its own value;
- `ballot` (u32 of the lanes whose predicate holds), `any`, `all`, `match_any` (u32 of the
  lanes holding the same bits; integers and bools only here);
- `warp_reduce(v, op, width)` combines by butterflies: `v = combine(v, shfl_xor(v, k))` for
  k = width/2 .. 1, each step rounded in the value's type (this order is the documented one
  for floats; for integers and bools any order gives the same).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from dsl.language import types as T
from tests.fuzz.scalars import Fault, Refused, Unmodelled, Val, arithmetic, literal, min_max

WARP = 32
WARP_OPS = ("shfl_xor", "shfl_down", "shfl_up", "shfl_idx", "ballot", "any", "all", "match_any", "warp_reduce")
Request = tuple[str, int, tuple[Any, ...], dict[str, Any]]  # (op or "barrier", line, args, keywords)


def _as_value(value: Any) -> Val:
    if isinstance(value, Val):
        return value
    if isinstance(value, bool):
        return Val(T.boolean, int(value))
    if isinstance(value, int):
        return literal(value, T.i32)
    if isinstance(value, float):
        return literal(value, T.f32)
    raise Refused(f"a warp operation on {type(value).__name__}")


def _lane_operand(b: Any) -> int:
    v = _as_value(b)
    if not (v.dtype.is_int or v.dtype.is_bool):
        raise Refused(f"a shuffle's lane of type {v.dtype.name}")
    return v.to(T.i32).v & 31


def _width(width: Any) -> int:
    if not isinstance(width, int) or isinstance(width, bool) or not 1 <= width <= 32 or width & (width - 1):
        raise Refused(f"shuffle width must be a power of two from 1 to 32, not {width!r}")
    return width


def shuffle_source(mode: str, lane: int, b: int, width: int) -> int:
    """The lane whose value `lane` receives, by PTX's `shfl.sync` with CUDA's segments."""
    segmask = 32 - width
    clamp = 0 if mode == "up" else 31
    max_lane = (lane & segmask) | (clamp & ~segmask)
    min_lane = lane & segmask
    if mode == "up":
        j = lane - b
        valid = j >= max_lane
    elif mode == "down":
        j = lane + b
        valid = j <= max_lane
    elif mode == "xor":
        j = lane ^ b
        valid = j <= max_lane
    else:
        j = min_lane | (b & ~segmask & 31)
        valid = j <= max_lane
    return j if valid else lane


def _predicate(p: Any) -> bool:
    if isinstance(p, Val):
        if p.dtype.is_float:
            raise Unmodelled("a float predicate in a vote")
        return p.v != 0
    return bool(p)


def _combine(op: str, a: Val, b: Val) -> Val:
    if op in ("max", "min"):
        return min_max(op, a, b)
    return arithmetic({"sum": "+", "and": "&", "or": "|", "xor": "^"}[op], a, b)


def _warp_reduce(values: list[Val], op: str, width: Any) -> list[Val]:
    if op not in ("sum", "max", "min", "and", "or", "xor"):
        raise Refused(f"dsl.warp_reduce op {op!r}")
    w = _width(width)
    t = values[0].dtype
    if op in ("and", "or", "xor") and t.is_float:
        raise Refused(f"dsl.warp_reduce '{op}' on {t.name}")
    if op in ("sum", "max", "min") and t.is_bool:
        raise Refused(f"dsl.warp_reduce '{op}' on bool values")
    k = w // 2
    while k >= 1:
        values = [_combine(op, values[lane], values[lane ^ k]) for lane in range(WARP)]
        k //= 2
    return values


def _no_keywords(op: str, kwargs: dict[str, Any], allowed: Sequence[str] = ()) -> None:
    extra = set(kwargs) - set(allowed)
    if extra:
        raise Unmodelled(f"dsl.{op} with {sorted(extra)[0]}=")


def warp_results(op: str, requests: list[Request]) -> list[Any]:
    """Each lane's result of warp operation `op`, from every lane's arguments."""
    args = [r[2] for r in requests]
    kwargs = requests[0][3]
    if op.startswith("shfl_"):
        _no_keywords(op, kwargs, ("width",))
        width = _width(args[0][2] if len(args[0]) > 2 else kwargs.get("width", 32))
        values = [_as_value(a[0]) for a in args]
        mode = op.removeprefix("shfl_")
        return [values[shuffle_source(mode, lane, _lane_operand(a[1]), width)] for lane, a in enumerate(args)]
    if op in ("ballot", "any", "all"):
        _no_keywords(op, kwargs)
        votes = [_predicate(a[0]) for a in args]
        if op == "ballot":
            return [Val(T.u32, sum(1 << k for k, p in enumerate(votes) if p))] * WARP
        return [Val(T.boolean, int(any(votes) if op == "any" else all(votes)))] * WARP
    if op == "match_any":
        _no_keywords(op, kwargs)
        values = [_as_value(a[0]) for a in args]
        if values[0].dtype.is_float:
            raise Unmodelled("match_any of floats (NaN bits)")
        return [Val(T.u32, sum(1 << k for k, w in enumerate(values) if w.v == v.v)) for v in values]
    if op == "warp_reduce":
        _no_keywords(op, kwargs, ("width",))
        width = args[0][2] if len(args[0]) > 2 else kwargs.get("width", 32)
        return _warp_reduce([_as_value(a[0]) for a in args], args[0][1], width)
    raise Unmodelled(f"dsl.{op}")


def run_block(fn: Callable[..., Any], args: tuple[Any, ...], count: int, enter: Callable[[int], None],
              barrier_passed: Callable[[], None]) -> None:
    """Runs the `count` threads of one block; `enter(k)` makes thread k the current one."""
    if not inspect.isgeneratorfunction(fn):  # no barrier and no warp operation: one after another
        for k in range(count):
            enter(k)
            fn(*args)
        return
    if count % WARP:
        raise Unmodelled("a block that is not whole warps")
    threads = []
    for k in range(count):
        enter(k)
        threads.append(fn(*args))
    requests: list[Request | None] = [None] * count
    replies: list[Any] = [None] * count
    moving = list(range(count))
    while True:
        for k in moving:
            enter(k)
            try:
                requests[k] = threads[k].send(replies[k])
            except StopIteration:
                requests[k] = None
        live = [k for k in range(count) if requests[k] is not None]
        if not live:
            return
        moving = []
        for w in range(count // WARP):
            lanes = range(w * WARP, (w + 1) * WARP)
            at_op = [k for k in lanes if requests[k] is not None and requests[k][0] != "barrier"]  # type: ignore[index]
            if not at_op:
                continue
            first = requests[at_op[0]]
            assert first is not None
            same = [requests[k] is not None and requests[k][:2] == first[:2] for k in lanes]  # type: ignore[index]
            if not all(same):
                raise Fault(f"dsl.{first[0]} at line {first[1]} not reached by every lane of warp {w} "
                            "(a warp operation in divergent control flow, or after some lanes returned)")
            results = warp_results(first[0], [requests[k] for k in lanes])  # type: ignore[misc]
            for k, result in zip(lanes, results):
                replies[k] = result
                moving.append(k)
        if moving:
            continue
        lines = sorted({requests[k][1] for k in live})  # type: ignore[index]
        if len(lines) > 1:
            raise Fault(f"threads of one block wait at barriers on different lines {lines} "
                        "(a barrier in divergent control flow)")
        barrier_passed()
        for k in live:
            replies[k] = None
        moving = live

