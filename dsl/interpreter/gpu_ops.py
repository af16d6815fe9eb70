"""Thread coordinates, barriers, warp shuffles, votes and reductions, `printf`, breakpoints.

Barriers and warp-wide operations run in lockstep, so a barrier needs no waiting; what the
interpreter checks is that it is reached the way the GPU needs it to be. A barrier (or a
warp operation) that some threads of the block (of the warp's member mask) skip is allowed
only if those threads never reach another one: that is how the early-`return` pattern works
on the GPU (exited threads no longer count), while a barrier in divergent code, where the
skipped threads go on to another barrier, is reported as the error it is on the GPU.

Shuffles follow PTX `shfl.sync` exactly (segment mask, clamp, the 5-bit lane operand, the
`valid` predicate); reading the value of a lane that is not executing the shuffle, whose
result the GPU leaves undefined, is an error.
"""

from __future__ import annotations

import re
import sys
from typing import Any

import numpy as np

from dsl.interpreter import stepping
from dsl.interpreter.lanes import WARP, Lanes
from dsl.interpreter.memory import LaneFault
from dsl.interpreter.program import Maker, OpInfo, Step
from dsl.interpreter.scheduling import waiting_at, warp_index
from dsl.interpreter.values import LaneType, as_unsigned

MAKERS: dict[str, Maker] = {}
_AXES = {"x": 0, "y": 1, "z": 2}


# --- coordinates --------------------------------------------------------------------------------

def _coordinate(info: OpInfo) -> Step:
    (o,) = info.outs
    axis = _AXES[info.enum("dimension")]
    kind = info.name

    def step(st: Lanes) -> None:
        if kind == "gpu.thread_id":
            st.v[o] = st.thread[axis]
        elif kind == "gpu.block_id":
            st.v[o] = st.block[axis]
        elif kind == "gpu.block_dim":
            st.v[o] = np.asarray(st.block_dim[axis], dtype=np.int64)
        else:
            st.v[o] = np.asarray(st.grid_dim[axis], dtype=np.int64)

    return step


for _name in ("gpu.thread_id", "gpu.block_id", "gpu.block_dim", "gpu.grid_dim"):
    MAKERS[_name] = _coordinate


def _lane_id(info: OpInfo) -> Step:
    (o,) = info.outs

    def step(st: Lanes) -> None:
        st.v[o] = st.lane

    return step


MAKERS["gpu.lane_id"] = _lane_id


# --- taking part in a barrier or a warp operation -------------------------------------------------

def _first(mask: np.ndarray) -> int:
    return int(np.argmax(mask))


def _take_part(st: Lanes, groups: np.ndarray, count: int, members: np.ndarray | None, what: str,
               barrier: bool) -> None:
    """Checks and records who takes part in a barrier (groups: blocks) or warp operation (warps).

    `members`: the lanes the operation names (None: every lane of the group)."""
    active = st.active()
    skipped = st.skipped_barrier if barrier else st.skipped_warp
    if skipped is not None and (skipped & active).any():
        lane = _first(skipped & active)
        earlier = "barrier of its block" if barrier else "warp-wide operation of its warp"
        raise LaneFault(f"{what} reached by a thread that skipped an earlier {earlier}: a barrier or warp "
                        "operation in divergent control flow (on the GPU this hangs or gives undefined results)", lane)
    if members is not None and (active & ~members).any():
        lane = _first(active & ~members)
        raise LaneFault(f"{what} executed by a thread that is not in its member mask (undefined on the GPU)", lane)
    if st.mask is None and members is None:
        return
    on = np.zeros(count, dtype=bool)
    on[groups[active]] = True
    left_out = on[groups] & ~active
    if members is not None:
        left_out &= members
    if left_out.any():
        if barrier:
            st.skipped_barrier = left_out if st.skipped_barrier is None else st.skipped_barrier | left_out
        else:
            st.skipped_warp = left_out if st.skipped_warp is None else st.skipped_warp | left_out


def _barrier(info: OpInfo) -> Step:
    what = waiting_at(info, "dsl.barrier()")

    def step(st: Lanes) -> None:
        _take_part(st, st.block_of, st.blocks, None, "dsl.barrier()", barrier=True)
        if st.sync is not None:  # warps run one by one: wait for the block's other warps
            st.sync.barrier(warp_index(st), _first(st.active()), 0, None, True, what)

    return step


MAKERS["gpu.barrier"] = _barrier


def _members(st: Lanes, mask: Any) -> np.ndarray:
    """Which lanes a member mask names, per warp (the mask its active lanes give)."""
    bits = np.broadcast_to((np.asarray(mask).astype(np.int64) & 0xFFFFFFFF).astype(np.uint64), (st.n,))
    active = st.active()
    per_warp = np.zeros(st.warps, dtype=np.uint64)
    per_warp[st.warp[active]] = bits[active]
    if (bits[active] != per_warp[st.warp[active]]).any():
        lane = _first(active & (bits != per_warp[st.warp]))
        raise LaneFault("threads of one warp give different member masks to one warp operation", lane)
    return ((per_warp[st.warp] >> st.lane.astype(np.uint64)) & 1).astype(bool)


# --- shuffles ---------------------------------------------------------------------------------

def shuffle(st: Lanes, value: Any, mode: str, b: Any, c: Any, member_mask: Any, what: str) -> tuple[Any, Any]:
    """PTX `shfl.sync.<mode>` of `value` (per lane) with lane operand `b` and clamp word `c`."""
    members = _members(st, member_mask)
    _take_part(st, st.warp, st.warps, members, what, barrier=False)
    lane = st.lane
    bval = np.asarray(b).astype(np.int64) & 31
    cword = np.asarray(c).astype(np.int64)
    cval, segmask = cword & 31, (cword >> 8) & 31
    max_lane = (lane & segmask) | (cval & ~segmask)
    min_lane = lane & segmask
    if mode == "up":
        j = lane - bval
        valid = j >= max_lane
    elif mode == "down":
        j = lane + bval
        valid = j <= max_lane
    elif mode == "bfly":
        j = lane ^ bval
        valid = j <= max_lane
    else:
        j = min_lane | (bval & ~segmask)
        valid = j <= max_lane
    j = np.where(valid, j, lane)
    source_linear = st.linear - lane + j
    exists = (source_linear < st.threads) & (j < WARP) & (j >= 0)
    source = np.where(exists, np.arange(st.n) - lane + j, np.arange(st.n))
    active = st.active()
    unreadable = active & (~exists | ~active[source] | ~members[source])
    if unreadable.any():
        k = _first(unreadable)
        raise LaneFault(f"{what} reads lane {int(j[k])} of the warp, which is not executing it (its value is "
                        "undefined on the GPU)", k)
    data = np.asarray(value)
    if data.ndim == 0:
        return data, np.broadcast_to(valid, (st.n,)).copy()
    return data[source], np.broadcast_to(valid, (st.n,)).copy()


def _gpu_shuffle(info: OpInfo) -> Step:
    """`gpu.shuffle`, as its NVVM lowering makes it: member mask of the first `width` lanes."""
    (value, offset, width), (out, ok) = info.args, info.outs
    mode = {"xor": "bfly", "up": "up", "down": "down", "idx": "idx"}[info.enum("mode")]

    def step(st: Lanes) -> None:
        w = np.asarray(st.v[width]).astype(np.int64)
        member = np.where(w >= 32, -1, (1 << np.minimum(w, 31)) - 1)
        clamp = 32 - w if mode == "up" else w - 1
        st.v[out], st.v[ok] = shuffle(st, st.v[value], mode, st.v[offset], clamp, member, "a warp shuffle")

    return step


def _nvvm_shuffle(info: OpInfo) -> Step:
    mask, value, offset, clamp = info.args
    mode = info.enum("kind")
    pair = info.out_types[0].kind == "struct"
    (out,) = info.outs

    def step(st: Lanes) -> None:
        result, valid = shuffle(st, st.v[value], mode, st.v[offset], st.v[clamp], st.v[mask], "a warp shuffle")
        st.v[out] = (result, valid) if pair else result

    return step


MAKERS["gpu.shuffle"] = _gpu_shuffle
MAKERS["nvvm.shfl.sync"] = _nvvm_shuffle


# --- votes, match, reductions -----------------------------------------------------------------

def _voters(st: Lanes, mask: Any, what: str) -> np.ndarray:
    members = _members(st, mask)
    _take_part(st, st.warp, st.warps, members, what, barrier=False)
    return members & st.active()


def _vote(info: OpInfo) -> Step:
    mask, pred = info.args
    (o,) = info.outs
    kind = info.enum("kind")

    def step(st: Lanes) -> None:
        voting = _voters(st, st.v[mask], f"dsl.{'any' if kind == 'any' else kind}()")
        p = np.broadcast_to(np.asarray(st.v[pred], dtype=bool), (st.n,))
        yes = voting & p
        if kind == "ballot":
            acc = np.zeros(st.warps, dtype=np.uint64)
            np.add.at(acc, st.warp[yes], np.left_shift(np.uint64(1), st.lane[yes].astype(np.uint64)))
            st.v[o] = acc[st.warp].astype(np.uint32).view(np.int32)
            return
        count_yes = np.bincount(st.warp[yes], minlength=st.warps)
        count_all = np.bincount(st.warp[voting], minlength=st.warps)
        if kind == "any":
            st.v[o] = (count_yes > 0)[st.warp]
        elif kind == "all":
            st.v[o] = (count_yes == count_all)[st.warp]
        else:  # uni: every voter agrees
            st.v[o] = ((count_yes == 0) | (count_yes == count_all))[st.warp]

    return step


def _match_any(info: OpInfo) -> Step:
    mask, operand = info.args
    (o,) = info.outs

    def step(st: Lanes) -> None:
        voting = _voters(st, st.v[mask], "dsl.match_any()")
        value = np.broadcast_to(np.asarray(st.v[operand]), (st.n,))
        out = np.zeros(st.n, dtype=np.uint64)
        base = np.arange(st.n) - st.lane
        for d in range(WARP):
            other = base + d
            real = (st.linear - st.lane + d < st.threads)
            other = np.where(real, other, 0)
            same = real & voting[other] & (value[other] == value)
            out |= np.where(same, np.uint64(1) << np.uint64(d), np.uint64(0))
        st.v[o] = out.astype(np.uint32).view(np.int32)

    return step


def _redux(info: OpInfo) -> Step:
    operand, mask = info.args
    (o,) = info.outs
    kind = info.enum("kind")
    t = info.out_types[0]

    def step(st: Lanes) -> None:
        voting = _voters(st, st.v[mask], "dsl.warp_reduce()")
        value = np.broadcast_to(np.asarray(st.v[operand]), (st.n,))
        if kind in ("umin", "umax"):
            value = as_unsigned(value, t)
        groups, values = st.warp[voting], value[voting].astype(np.int64)
        if kind == "add":
            acc = np.zeros(st.warps, dtype=np.int64)
            np.add.at(acc, groups, values)
        elif kind in ("min", "umin"):
            acc = np.full(st.warps, np.iinfo(np.int64).max)
            np.minimum.at(acc, groups, values)
        elif kind in ("max", "umax"):
            acc = np.full(st.warps, np.iinfo(np.int64).min)
            np.maximum.at(acc, groups, values)
        else:
            ufunc = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[kind]
            acc = np.full(st.warps, -1 if kind == "and" else 0, dtype=np.int64)
            ufunc.at(acc, groups, values)
        st.v[o] = (acc[st.warp] & 0xFFFFFFFF).astype(np.uint32).view(np.int32)

    return step


MAKERS["nvvm.vote.sync"] = _vote
MAKERS["nvvm.match.sync"] = _match_any
MAKERS["nvvm.redux.sync"] = _redux


# --- printf -----------------------------------------------------------------------------------

_SPEC = re.compile(r"%([-+ #0]*)(\d+|\*)?(?:\.(\d+|\*))?(hh|h|ll|l|j|z|t|L)?([diouxXeEfFgGaAcsp%])")


def c_format(fmt: str, values: list[Any], types: list[LaneType]) -> str:
    """`printf(fmt, values...)` as C formats it (one lane's values)."""
    out, k, pos = [], 0, 0
    for m in _SPEC.finditer(fmt):
        out.append(fmt[pos:m.start()])
        pos = m.end()
        flags, width, precision, _length, conv = m.groups()
        if conv == "%":
            out.append("%")
            continue
        if width == "*" or precision == "*":
            width = str(int(values[k])) if width == "*" else width
            k += width == "*"
            precision = str(int(values[k])) if precision == "*" else precision
            k += precision == "*"
        if k >= len(values):
            out.append(m.group(0))
            continue
        value, t = values[k], types[k]
        k += 1
        spec = "%" + flags + (width or "") + (f".{precision}" if precision is not None else "")
        if conv in "di":
            out.append((spec + "d") % int(value))
        elif conv in "ouxX":
            out.append((spec + ("d" if conv == "u" else conv)) % int(as_unsigned(value, t)))
        elif conv == "c":
            out.append(chr(int(value) & 0xFF))
        elif conv in "aA":
            out.append(float(value).hex())
        elif conv == "p":
            out.append(hex(int(value)))
        elif conv == "s":
            out.append(str(value))
        else:
            out.append((spec + conv) % float(value))
    out.append(fmt[pos:])
    return "".join(out)


def _printf(info: OpInfo) -> Step:
    fmt = info.attr("format").value
    args, types = info.args, info.arg_types

    def step(st: Lanes) -> None:
        lanes = np.flatnonzero(st.active())
        if not lanes.size:
            return
        columns = [np.broadcast_to(np.asarray(st.v[a]), (st.n,)) for a in args]
        out = st.out or sys.stdout
        text = "".join(c_format(fmt, [c[g] for c in columns], types) for g in lanes)  # in thread order
        out.write(text)

    return step


MAKERS["gpu.printf"] = _printf


# --- breakpoint() -----------------------------------------------------------------------------

def _marker(info: OpInfo) -> Step:
    """The cast `breakpoint()` traces to (`dsl.frontend.intrinsic_ops`), or a debugger's step
    marker (`dsl.frontend.debug_steps`); any other is refused."""
    names = info.attr("kdsl.breakpoint")
    if names is None:
        raise info.refuse("an unresolved conversion cast")
    if info.attr("kdsl.step") is not None:
        return _step_marker(info)
    names = [n.value for n in names]
    constants = info.attr("kdsl.constants")
    known = {n.name: _attribute_value(n.attr) for n in constants} if constants is not None else {}
    tensors = info.attr("kdsl.tensors")
    tensor_names = {n.name: n.attr.value for n in tensors} if tensors is not None else {}
    args, types = info.args, info.arg_types

    def step(st: Lanes) -> None:
        active = st.active()
        if not active.any() or st.breakpoints is None:
            return
        values = {name: st.v[a] for name, a in zip(names, args)}
        st.breakpoints(info, values, dict(zip(names, types)), known, tensor_names, st)

    return step


def _step_marker(info: OpInfo) -> Step:
    """A statement's step marker: handed to the attached debugger, if one is (`stepping`)."""
    marker = _decode_step(info)

    def step(st: Lanes) -> None:
        hook = stepping.current()
        if hook is not None and st.active().any():
            hook.step(marker, st)

    return step


def _decode_step(info: OpInfo) -> stepping.StepMarker:
    def split(key: str) -> tuple[int, str]:
        depth, _, name = key.partition(":")
        return int(depth), name

    dtypes = {n.name: n.attr.value for n in info.attr("kdsl.types")}
    shared = {}
    for n in info.attr("kdsl.shared"):
        dtype, shape, swizzle = n.attr.value.split(";")
        shared[n.name] = (dtype, tuple(int(d) for d in shape.split("x") if d), int(swizzle))
    values = []
    for attr, slot, t in zip(info.attr("kdsl.breakpoint"), info.args, info.arg_types):
        key = attr.value
        depth, name = split(key)
        values.append(stepping.NamedValue(depth, name, slot, t, dtypes.get(key, "ptr"), shared.get(key)))
    stack = []
    for entry in info.attr("kdsl.step"):
        function, file, line = entry.value.split("\t")
        stack.append(stepping.StackEntry(function, file, int(line)))
    constants = {n.name: _attribute_value(n.attr) for n in info.attr("kdsl.constants")}
    tensors = {n.name: n.attr.value for n in info.attr("kdsl.tensors")}
    return stepping.StepMarker(info.where, tuple(stack), tuple(values), constants, tensors)


def _attribute_value(attr: Any) -> Any:
    for cls in ("BoolAttr", "IntegerAttr", "FloatAttr", "StringAttr"):
        if type(attr).__name__ == cls:
            return attr.value
    return str(attr)


MAKERS["builtin.unrealized_conversion_cast"] = _marker
