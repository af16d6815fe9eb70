"""Tensor cores, TMA and mbarriers in the interpreter: the inline PTX `dsl.frontend.tensor_core_ops` writes.

Each instruction is run as the PTX ISA defines its result, on the fragment layouts it
specifies (the layouts the examples' epilogues index, checked against the GPU by their tests):

- `mma.sync` m16n8k16 (f16, bf16) and m16n8k32 (s8, u8, e4m3, e5m2) and `ldmatrix`
  (x1 / x2 / x4, `.trans`): warp-collective, so every lane of a warp must execute them.
- `wgmma.mma_async` m64nNk16 (f16, bf16) and m64nNk32 (e4m3, e5m2 into f32; s8, u8 into s32)
  with A from a shared-memory descriptor or from registers and B K- or N-major (8-bit: K-major
  only): each warp computes its 16 rows of the warpgroup's 64 at
  issue, but the result registers hold poisoned values until a `wait_group` retires the
  group (`wgmma_flight`): a kernel that reads an accumulator before its wait faults here,
  where it races on the GPU (f32 accumulators only: the poison is a NaN payload, so s32
  accumulators are computed exactly but not poisoned; the compiler's DSL305 still refuses an
  early read). `commit_group` and `wait_group` count the groups per lane.
- TMA tensor loads, stores and reductions (`cp.async.bulk.tensor`, `cp.reduce.async.bulk.tensor`),
  with the map's box, bounds (zeros read outside the tensor, nothing written there) and
  swizzle; a load completes its bytes on its mbarrier at once, a store or reduction is done
  at issue.
- mbarriers (init, arrive, expect_tx, try_wait.parity) and named barriers (`bar.sync`,
  `bar.arrive`), through the block's `scheduling.BlockSync`: kernels that use them run one
  thread per warp. Fences and `setmaxnreg` change nothing the interpreter can observe.
- Clusters: a `cluster=` launch runs each cluster's blocks together (`scheduling`); the
  cluster rank, the cluster barrier, arrivals on another block's mbarrier (`mapa`) and TMA
  multicast into every block of the mask.

Products are exact and sums are taken in float64, then rounded once to the accumulator's
type (s32 sums are exact and wrap); the tensor cores add floats in an order and with internal
precision the ISA leaves to the hardware, so results agree with the GPU to within that
rounding, not bit for bit.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dsl.interpreter.lanes import WARP, Lanes
from dsl.interpreter.memory import ATOMIC_UPDATES, LaneFault, Region, swizzled
from dsl.interpreter.program import OpInfo, Step
from dsl.interpreter.scheduling import CLUSTER_BARRIER, MBarrier, mbarrier_name, waiting_at, warp_index
from dsl.interpreter.wgmma_flight import feeds_only_mma, registers

_REG = r"\$(\d+)"
_REGS = r"\{([^}]*)\}"


@dataclass(frozen=True)
class TensorMap:
    """A `dsl.tensor_map(...)` as the interpreter passes it to a kernel: the tensor's memory,
    shape and element strides (outer first), the box and the swizzle."""

    region: Region
    dtype: str
    nbytes: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]
    swizzle: int


# --- lanes of a warp ---------------------------------------------------------------------------

def _whole_warps(st: Lanes, what: str) -> tuple[np.ndarray, np.ndarray]:
    """(the warps of the batch that execute this op, their lanes' positions as a (W, 32)
    array): a warp-collective instruction needs all 32 lanes of each warp that runs it."""
    index = np.full((st.warps, WARP), -1, dtype=np.int64)
    index[st.warp, st.lane] = np.arange(st.n)
    active = st.active()
    running = np.unique(st.warp[active])
    lanes = index[running]
    bad = (lanes < 0) | ~active[np.maximum(lanes, 0)]
    if bad.any():
        w, lane = np.argwhere(bad)[0]
        first = int(lanes[w][lanes[w] >= 0][0])
        raise LaneFault(f"{what} executed by part of a warp only (lane {int(lane)} does not execute it): it needs "
                        "every lane of the warp, with no divergence", first)
    return running, lanes


def _per_lane(value: Any, n: int) -> np.ndarray:
    return np.broadcast_to(np.asarray(value), (n,))


def _words(st: Lanes, slots: list[int], lanes: np.ndarray) -> list[np.ndarray]:
    """Each operand word of each lane of the warps, as (W, 32) uint32."""
    return [_per_lane(st.v[s], st.n)[lanes].astype(np.int64).astype(np.uint32) for s in slots]


def _elements(words: np.ndarray, kind: str) -> np.ndarray:
    """The elements packed in 32-bit words (low first) as float64 or int64: (..., per word)."""
    if kind in ("f16", "bf16"):
        halves = np.stack([words & 0xFFFF, words >> 16], axis=-1).astype(np.uint16)
        if kind == "f16":
            return halves.view(np.float16).astype(np.float64)
        return (halves.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    quarter = np.stack([(words >> (8 * b)) & 0xFF for b in range(4)], axis=-1).astype(np.uint8)
    if kind == "s8":
        return quarter.view(np.int8).astype(np.int64)
    if kind == "u8":
        return quarter.astype(np.int64)
    from dsl.interpreter.llvm_ops import _fp8_tables

    return _fp8_tables(kind)[2][quarter].astype(np.float64)


def _pack_halves(values: np.ndarray, kind: str) -> np.ndarray:
    """Pairs of float64 (..., 2) rounded to f16 / bf16 and packed into int32 words."""
    if kind == "f16":
        bits = values.astype(np.float16).view(np.uint16).astype(np.uint32)
    else:
        from dsl.interpreter.values import round_to_bf16

        bits = (round_to_bf16(values).astype(np.float32).view(np.uint32) >> 16).astype(np.uint32)
    return (bits[..., 0] | (bits[..., 1] << 16)).astype(np.int64).astype(np.uint32).view(np.int32)


def _scatter(st: Lanes, lanes: np.ndarray, per_warp: list[np.ndarray], dtype: Any) -> tuple:
    """Results as (W, 32) arrays per register -> per-lane arrays of the whole batch."""
    out = []
    for reg in per_warp:
        full = np.zeros(st.n, dtype=dtype)
        full[lanes.reshape(-1)] = reg.reshape(-1)
        out.append(full)
    return tuple(out)


_LANE = np.arange(WARP)
_G, _Q = _LANE // 4, _LANE % 4


# --- mma.sync -----------------------------------------------------------------------------------

_MMA = re.compile(r"mma\.sync\.aligned\.m16n8k(16|32)\.row\.col\.(\w+)\.(\w+)\.(\w+)\.(\w+) " + _REGS + ", " + _REGS
                  + ", " + _REGS + ", " + _REGS + ";")


def _mma_sync(info: OpInfo, m: re.Match) -> Step:
    k_dim = int(m.group(1))
    d_kind, a_kind, b_kind, c_kind = m.group(2, 3, 4, 5)
    na, nb = (len(m.group(g).split(",")) for g in (7, 8))
    args = info.args
    a_slots, b_slots, c_slots = args[:na], args[na:na + nb], args[na + nb:]
    (o,) = info.outs
    what = "dsl.mma_sync"

    def step(st: Lanes) -> None:
        warps, lanes = _whole_warps(st, what)
        w = len(warps)
        a = np.zeros((w, 16, k_dim))
        b = np.zeros((w, k_dim, 8))
        per = 2 if k_dim == 16 else 4  # elements per word
        for j, word in enumerate(_words(st, a_slots, lanes)):
            e = _elements(word, a_kind)  # (W, 32, per)
            for h in range(per):
                a[:, _G + 8 * (j & 1), per * _Q + 8 * (per // 2) * (j >> 1) + h] = e[:, :, h]
        for j, word in enumerate(_words(st, b_slots, lanes)):
            e = _elements(word, b_kind)
            for h in range(per):
                b[:, per * _Q + 8 * (per // 2) * j + h, _G] = e[:, :, h]
        c = np.zeros((w, 16, 8))
        if c_kind == "f16":  # two f16x2 words: rows g and g + 8
            for j, word in enumerate(_words(st, c_slots, lanes)):
                e = _elements(word, "f16")
                for h in range(2):
                    c[:, _G + 8 * j, 2 * _Q + h] = e[:, :, h]
        else:
            for i, s in enumerate(c_slots):
                c[:, _G + 8 * (i >> 1), 2 * _Q + (i & 1)] = _per_lane(st.v[s], st.n)[lanes]
        d = a @ b + c
        if d_kind == "f16":
            words = [_pack_halves(np.stack([d[:, _G + 8 * j, 2 * _Q], d[:, _G + 8 * j, 2 * _Q + 1]], axis=-1), "f16")
                     for j in range(2)]
            st.v[o] = _scatter(st, lanes, words, np.int32)
            return
        regs = [d[:, _G + 8 * (i >> 1), 2 * _Q + (i & 1)] for i in range(4)]
        if d_kind == "s32":
            regs = [((r.astype(np.int64) + 2**31) % 2**32 - 2**31).astype(np.int32) for r in regs]
            st.v[o] = _scatter(st, lanes, regs, np.int32)
        else:
            st.v[o] = _scatter(st, lanes, [r.astype(np.float32) for r in regs], np.float32)

    return step


# --- ldmatrix -----------------------------------------------------------------------------------

_LDMATRIX = re.compile(r"ldmatrix\.sync\.aligned\.m8n8\.x([124])(\.trans)?\.shared\.b16 " + _REGS + r", \[" + _REG
                       + r"\];")


def _ldmatrix(info: OpInfo, m: re.Match) -> Step:
    count, transpose = int(m.group(1)), bool(m.group(2))
    (address,) = info.args
    (o,) = info.outs
    what = "dsl.ldmatrix"

    def step(st: Lanes) -> None:
        warps, lanes = _whole_warps(st, what)
        rows = _per_lane(st.v[address], st.n)[lanes].astype(np.int64) & 0xFFFFFFFF  # (W, 32): row addresses
        words = []
        for i in range(count):
            if not transpose:  # lane l: row l // 4 of matrix i, elements 2 (l % 4) and the next
                at = rows[:, 8 * i + _LANE // 4] + 4 * (_LANE % 4)
                words.append(_shared_read(st, lanes, at, 4, what).view(np.int32)[..., 0])
            else:  # lane l: column l // 4 of rows 2 (l % 4) and 2 (l % 4) + 1
                lo = _shared_read(st, lanes, rows[:, 8 * i + 2 * (_LANE % 4)] + 2 * (_LANE // 4), 2, what)
                hi = _shared_read(st, lanes, rows[:, 8 * i + 2 * (_LANE % 4) + 1] + 2 * (_LANE // 4), 2, what)
                words.append(np.concatenate([lo, hi], axis=-1).view(np.int32)[..., 0])
        out = _scatter(st, lanes, words, np.int32)
        st.v[o] = out if count > 1 else out[0]

    return step


def _shared_read(st: Lanes, lanes: np.ndarray, addresses: np.ndarray, nbytes: int, what: str) -> np.ndarray:
    """`nbytes` bytes at each shared address of an array, each read by the lane in the same
    place of `lanes`: (*shape, nbytes) uint8, every access checked (alignment too)."""
    flat_lanes, flat = lanes.reshape(-1), addresses.reshape(-1)
    data = np.empty((flat.size, nbytes), dtype=np.uint8)
    for region, picked, offsets in _by_region(st, flat_lanes, flat, nbytes, what):
        base = region.lane_base[flat_lanes[picked]] if region.lane_base is not None else 0
        data[picked] = region.data[(base + offsets)[:, None] + np.arange(nbytes)]
    return data.reshape(*addresses.shape, nbytes)


def _by_region(st: Lanes, lane_of: np.ndarray, addresses: np.ndarray, nbytes: int, what: str,
               window: Any = None) -> Any:
    """(region, which entries, offsets into the region) for each shared array the addresses
    fall in; an address in none, past an array's end or misaligned is a fault of its lane."""
    window = window if window is not None else st.window
    left = np.ones(addresses.size, dtype=bool)
    for region in window.regions:
        inside = left & (addresses >= region.address) & (addresses < region.address + max(region.size, 1))
        if not inside.any():
            continue
        picked = np.flatnonzero(inside)
        offsets = addresses[picked] - region.address
        bad = (offsets + nbytes > region.size) | (addresses[picked] % nbytes != 0)
        if bad.any():
            k = int(picked[int(np.argmax(bad))])
            kind = "misaligned" if addresses[k] % nbytes else "out-of-bounds"
            where = region.describe(int(addresses[k] - region.address))
            raise LaneFault(f"{kind} {what} access of {nbytes} bytes at {where}", int(lane_of[k]))
        left &= ~inside
        yield region, picked, offsets
    if left.any():
        k = int(np.argmax(left))
        raise LaneFault(f"{what} at shared address {int(addresses[k]):#x}, which is in no shared array",
                        int(lane_of[k]))


# --- wgmma --------------------------------------------------------------------------------------

_WGMMA = re.compile(r"\{ \.reg \.pred p; setp\.ne\.b32 p, " + _REG + r", 0; wgmma\.mma_async\.sync\.aligned\.m64n(\d+)"
                    r"k(?:16|32)\.(f32|s32)\.(bf16|f16|e4m3|e5m2|s8|u8)\.(bf16|f16|e4m3|e5m2|s8|u8) " + _REGS + r", ("
                    + _REGS + "|" + _REG + r"), " + _REG + r", p(?:, 1, 1(?:, (?:0, )?([01]))?)?; \}")
_ELEMENT_BYTES = {"f16": 2, "bf16": 2, "e4m3": 1, "e5m2": 1, "s8": 1, "u8": 1}


@dataclass(frozen=True)
class _Descriptor:
    start: int
    leading: int
    stride: int
    swizzle: int


def _descriptor(bits: int, lane: int) -> _Descriptor:
    mode = (bits >> 62) & 3
    if mode != 1:
        raise LaneFault(f"a wgmma descriptor with swizzle mode {mode}: the interpreter reads 128-byte swizzled "
                        "tiles only (the layout dsl.wgmma makes)", lane)
    return _Descriptor((bits & 0x3FFF) << 4, ((bits >> 16) & 0x3FFF) << 4, ((bits >> 32) & 0x3FFF) << 4, 128)


def _tile_addresses(d: _Descriptor, rows: np.ndarray, k: np.ndarray, k_major: bool, nbytes: int = 2) -> np.ndarray:
    """Byte addresses of elements (row or column of M / N, K) of a tile of `nbytes`-byte
    elements in a descriptor's canonical 128-byte swizzled layout (MN-major: 16-bit only)."""
    if k_major:  # rows of 128 bytes (64 16-bit or 128 8-bit elements), 8-row atoms `stride` apart
        plain = d.start + (rows // 8) * d.stride + (rows % 8) * 128 + nbytes * k
    else:  # K rows of 64 columns, 8-row atoms `stride` apart, 64-column chunks `leading` apart
        plain = d.start + (rows // 64) * d.leading + (k // 8) * d.stride + (k % 8) * 128 + 2 * (rows % 64)
    return swizzled(plain, d.swizzle)


def _wgmma(info: OpInfo, m: re.Match) -> Step:
    regs = len(m.group(6).split(","))  # the accumulators: outputs $0.., so input $k is operand k - regs
    scale_slot, n = int(m.group(1)) - regs, int(m.group(2))
    integer = m.group(3) == "s32"
    a_kind, b_kind = m.group(4), m.group(5)
    nbytes = _ELEMENT_BYTES[b_kind]
    k_step = 32 // nbytes  # 32 bytes of a K-major row per instruction: k16 or k32
    per_word = 4 // nbytes  # A elements in each 32-bit register
    a_in_registers = m.group(8) is not None
    b_slot = int(m.group(10)) - regs
    trans_b = m.group(11) == "1"
    args = info.args
    (o,) = info.outs
    acc_slots = args[-regs:]  # the tied accumulators come after the inputs
    what = "dsl.wgmma"
    rows16 = np.arange(16)
    tracker = info.builder.in_flight
    instruction = tracker.instruction(info, regs)
    # a step of K whose result only the next step reads needs no tickets; nor do s32 accumulators,
    # which a NaN payload cannot stand for
    ticketed = not integer and not feeds_only_mma(info.op)

    def step(st: Lanes) -> None:
        warps, lanes = _whole_warps(st, what)
        first = lanes[:, 0]
        warp_in_group = (st.linear[first] // WARP) % 4
        desc_b = _per_lane(st.v[args[b_slot]], st.n).astype(np.int64)
        scale = _per_lane(st.v[args[scale_slot]], st.n)
        if integer:
            current = np.stack([_per_lane(st.v[s], st.n) for s in acc_slots], axis=1).astype(np.int64)
        else:  # an accumulator still in flight is read as its product: MMAs into one accumulator are ordered
            current = tracker.redeem_rows(st, registers([st.v[s] for s in acc_slots], st.n)).astype(np.float64)
        acc = current[lanes]  # (W, 32, R)
        out = np.zeros_like(acc)
        if a_in_registers:
            a_words = _words(st, args[:4], lanes)
        for wi in range(len(warps)):
            lead = int(first[wi])
            db = _descriptor(int(desc_b[lead]), lead)
            kk, nn = np.meshgrid(np.arange(k_step), np.arange(n), indexing="ij")
            b_at = _tile_addresses(db, nn, kk, k_major=not trans_b, nbytes=nbytes)  # (k, n) for B[k][n]
            b = _tile(st, lead, b_at, b_kind)
            if a_in_registers:  # the m16kK A fragment of this warp's 16 rows (mma.sync's A layout)
                a = np.zeros((16, k_step), dtype=b.dtype)
                for j, word in enumerate(a_words):
                    e = _elements(word[wi], a_kind)
                    for h in range(per_word):
                        a[_G + 8 * (j & 1), per_word * _Q + 4 * per_word * (j >> 1) + h] = e[:, h]
            else:
                da = _descriptor(int(_per_lane(st.v[args[0]], st.n).astype(np.int64)[lead]), lead)
                rr, kk2 = np.meshgrid(16 * int(warp_in_group[wi]) + rows16, np.arange(k_step), indexing="ij")
                a = _tile(st, lead, _tile_addresses(da, rr, kk2, k_major=True, nbytes=nbytes), a_kind)
            d = a @ b  # (16, n)
            r = np.arange(regs)
            lane_rows = _G[:, None] + 8 * ((r[None, :] >> 1) & 1)
            lane_cols = 8 * (r[None, :] >> 2) + 2 * _Q[:, None] + (r[None, :] & 1)
            keep = _per_lane(scale, st.n)[lanes[wi]].astype(np.int64) != 0
            out[wi] = d[lane_rows, lane_cols] + np.where(keep[:, None], acc[wi], 0)
        if integer:  # s32 sums wrap
            wrapped = ((out + 2**31) % 2**32 - 2**31).astype(np.int32)
            st.v[o] = _scatter(st, lanes, [wrapped[:, :, i] for i in range(regs)], np.int32)
            return
        products = _scatter(st, lanes, [out[:, :, i].astype(np.float32) for i in range(regs)], np.float32)
        st.v[o] = tracker.issue(st, instruction, list(products)) if ticketed else products  # in flight until a wait

    return step


def _tile(st: Lanes, lead: int, addresses: np.ndarray, kind: str) -> np.ndarray:
    """The elements of `kind` at shared `addresses` (any shape), read for lane `lead`'s block:
    float64, or int64 for s8 / u8 (so integer products are exact)."""
    at = addresses.astype(np.int64)
    nbytes = _ELEMENT_BYTES[kind]
    raw = _shared_read(st, np.full(at.shape, lead), at, nbytes, "dsl.wgmma").reshape(-1, nbytes)
    if nbytes == 1:
        word = raw[:, 0].astype(np.uint32)  # one element in the low byte of a word
        return _elements(word, kind)[:, 0].reshape(addresses.shape)
    bits = raw.view(np.uint16)[:, 0]
    if kind == "f16":
        values = bits.view(np.float16).astype(np.float64)
    else:
        values = (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return values.reshape(addresses.shape)


def _wgmma_wait(info: OpInfo, m: re.Match) -> Step:
    """`wgmma.wait_group N`: the accumulators come out redeemed where the wait retires their group
    (`wgmma_flight`), still in flight where it does not."""
    args, pending = info.args, int(m.group(1))
    (o,) = info.outs if info.outs else (None,)
    tracker = info.builder.in_flight

    # s32 accumulators carry no tickets (`_wgmma`): they pass through as they are
    floats = [k for k, v in enumerate(info.op.operands) if str(v.type) != "i32"]

    def step(st: Lanes) -> None:
        values = [st.v[a] for a in args]
        out = list(values)
        if tracker is not None:  # no wgmma: nothing to wait for
            # the wait retires groups for the lanes even when it passes no f32 register
            held = [values[k] for k in floats] or [np.zeros(st.n, dtype=np.float32)]
            redeemed = tracker.wait(st, pending, held)
            for k, v in zip(floats, redeemed):
                out[k] = v
        if o is not None:
            st.v[o] = tuple(out) if len(args) > 1 else out[0]

    return step


def _wgmma_commit(info: OpInfo, m: re.Match) -> Step:
    tracker = info.builder.in_flight

    def step(st: Lanes) -> None:
        if tracker is not None:
            tracker.commit(st)

    return step


def _nothing(info: OpInfo, m: re.Match) -> Step:
    def step(st: Lanes) -> None:
        return None

    return step


# --- mbarriers and named barriers ----------------------------------------------------------------

def _independent(info: OpInfo) -> None:
    info.builder.independent_warps = True


def _each_active(st: Lanes) -> np.ndarray:
    return np.flatnonzero(st.active())


def _mbarrier_address(st: Lanes, value: Any, lane: int) -> int:
    return int(_per_lane(value, st.n)[lane]) & 0xFFFFFFFF


def _mbarrier_init(info: OpInfo, m: re.Match) -> Step:
    _independent(info)
    address, count = info.args

    def step(st: Lanes) -> None:
        with st.sync.lock:
            for lane in _each_active(st):
                _check_barrier_word(st, _mbarrier_address(st, st.v[address], lane), lane)
                c = int(_per_lane(st.v[count], st.n)[lane])
                st.sync.mbarriers[(st.rank, _mbarrier_address(st, st.v[address], lane))] = MBarrier(c, c)
            st.sync.changed()

    return step


def _check_barrier_word(st: Lanes, address: int, lane: int) -> None:
    region = st.window.region_at(address)
    if region is None or address + 8 > region.address + region.size or address % 8:
        raise LaneFault(f"an mbarrier at shared address {address:#x}, which is not an 8-byte aligned word of a "
                        "shared array", lane)


def _mbarrier_arrive(info: OpInfo, m: re.Match) -> Step:
    _independent(info)
    expect = "expect_tx" in m.group(0)
    address = info.args[0]
    nbytes = info.args[1] if expect else None

    def step(st: Lanes) -> None:
        with st.sync.lock:
            for lane in _each_active(st):
                bar = st.sync.mbarrier(_mbarrier_address(st, st.v[address], lane), int(lane), st.rank)
                tx = int(_per_lane(st.v[nbytes], st.n)[lane]) if nbytes is not None else 0
                bar.arrive(int(lane), 1, tx)
            st.sync.changed()

    return step


def _mbarrier_wait(info: OpInfo, m: re.Match) -> Step:
    _independent(info)
    address, parity = info.args
    where = waiting_at(info, "dsl.mbarrier_wait")

    def step(st: Lanes) -> None:
        sync = st.sync
        with sync.lock:
            waits = []
            for lane in _each_active(st):
                bar = sync.mbarrier(_mbarrier_address(st, st.v[address], lane), int(lane), st.rank)
                waits.append((bar, int(_per_lane(st.v[parity], st.n)[lane]) & 1))
            if not waits:
                return
            first = int(_each_active(st)[0])
            at = _mbarrier_address(st, st.v[address], first)
            barrier = mbarrier_name(info, at, st.window)
            sync.wait_until(warp_index(st), first, lambda: all(b.done(p) for b, p in waits),
                            f"{where} for {barrier} to complete its phase of parity {waits[0][1]}")

    return step


_NAMED_BARRIER = re.compile(r"bar\.(sync|arrive) (\d+|\$0), (\d+);")


def _named_barrier(info: OpInfo, m: re.Match) -> Step:
    _independent(info)
    wait = m.group(1) == "sync"
    fixed = None if m.group(2) == "$0" else int(m.group(2))
    threads = int(m.group(3))
    name = "dsl.named_barrier" if wait else "dsl.named_barrier_arrive"
    where = waiting_at(info, name)

    def step(st: Lanes) -> None:
        active = _each_active(st)
        if not active.size:
            return
        first = int(active[0])
        if fixed is None:
            ids = _per_lane(st.v[info.args[0]], st.n)[active]
            if (ids != ids[0]).any():
                raise LaneFault(f"{name}: the lanes of one warp give different barrier ids", first)
            barrier_id = int(ids[0])
        else:
            barrier_id = fixed
        if not 0 <= barrier_id <= 15:
            raise LaneFault(f"{name}: barrier id {barrier_id} is not 0 to 15", first)
        st.sync.barrier(warp_index(st), first, barrier_id, threads // WARP, wait,
                        f"{where} (barrier {barrier_id}, {threads} threads)")

    return step


# --- TMA ------------------------------------------------------------------------------------------

_TMA_LOAD = re.compile(r"cp\.async\.bulk\.tensor\.(\d)d\.shared::cluster\.global\.mbarrier::complete_tx::bytes"
                       r"(\.multicast::cluster)? \[\$0\], \[\$1, \{[^}]*\}\], \[" + _REG + r"\](?:, \$\d+)?;")
_TMA_STORE = re.compile(r"cp\.async\.bulk\.tensor\.(\d)d\.global\.shared::cta\.bulk_group \[\$0, \{[^}]*\}\], \["
                        + _REG + r"\];")
_TMA_REDUCE = re.compile(r"cp\.reduce\.async\.bulk\.tensor\.(\d)d\.global\.shared::cta\.(add|min|max)"
                         r"\.tile\.bulk_group \[\$0, \{[^}]*\}\], \[" + _REG + r"\];")
_REDUCE_TYPES = {"f32": np.float32, "i32": np.int32, "u32": np.uint32}
_REDUCE_OPS = {"add": np.add, "min": np.minimum, "max": np.maximum}


def _box_elements(tmap: TensorMap, coords: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(element offsets into the tensor, in-bounds mask) of every element of the box at
    `coords` (outer first), in the box's row-major order."""
    grids = np.meshgrid(*[c + np.arange(b) for c, b in zip(coords, tmap.box)], indexing="ij")
    inside = np.ones(grids[0].shape, dtype=bool)
    offset = np.zeros(grids[0].shape, dtype=np.int64)
    for axis, (idx, extent) in enumerate(zip(grids, tmap.shape)):
        inside &= (idx >= 0) & (idx < extent)
        offset += np.clip(idx, 0, max(extent - 1, 0)) * tmap.strides[axis]
    return offset.reshape(-1), inside.reshape(-1)


def _box_shared(st: Lanes, tmap: TensorMap, start: int, lane: int, what: str,
                window: Any = None) -> tuple[Region, np.ndarray]:
    """(region, byte offsets in this lane's block slot) of each element of the box written
    at shared address `start`, swizzled as the map says."""
    count = int(np.prod(tmap.box))
    plain = start + np.arange(count, dtype=np.int64)[:, None] * tmap.nbytes + np.arange(tmap.nbytes)
    at = swizzled(plain, tmap.swizzle).reshape(-1)
    regions = list(_by_region(st, np.full(at.size, lane), at, 1, what, window))
    if len(regions) != 1:
        raise LaneFault(f"{what}: the box at shared address {start:#x} crosses shared arrays", lane)
    region, _, offsets = regions[0]
    base = region.lane_base[lane] if region.lane_base is not None else 0
    return region, base + offsets.reshape(count, tmap.nbytes)


def _tma(info: OpInfo, m: re.Match, load: bool, reduce: str | None = None) -> Step:
    rank = int(m.group(1))
    multicast = load and m.group(2) is not None
    if load:
        _independent(info)
        dst, tmap_slot, *coord_slots = info.args[:2 + rank]
        bar_slot = info.args[2 + rank]
        mask_slot = info.args[3 + rank] if multicast else None
    else:
        tmap_slot, *coord_slots = info.args[:1 + rank]
        src = info.args[1 + rank]
    what = "dsl.tma_load" if load else "dsl.tma_reduce" if reduce else "dsl.tma_store"

    def step(st: Lanes) -> None:
        for lane in _each_active(st):
            lane = int(lane)
            tmap = st.v[tmap_slot]
            if not isinstance(tmap, TensorMap):
                raise LaneFault(f"{what} of a value that is not a tensor map", lane)
            coords = [int(_per_lane(st.v[c], st.n)[lane]) for c in reversed(coord_slots)]  # PTX: innermost first
            coords = [c - (1 << 32) if c >= 1 << 31 else c for c in coords]
            elements, inside = _box_elements(tmap, coords)
            shared = int(_per_lane(st.v[dst if load else src], st.n)[lane]) & 0xFFFFFFFF
            tensor = tmap.region
            global_bytes = elements[:, None] * tmap.nbytes + np.arange(tmap.nbytes)
            if not load:
                region, at = _box_shared(st, tmap, shared, lane, what)
                if not tensor.writable:
                    raise LaneFault(f"{what} into {tensor.name}, which is a read-only array", lane)
                if reduce is None:
                    tensor.data[global_bytes[inside]] = region.data[at[inside]]
                    continue
                kind = _REDUCE_TYPES[tmap.dtype]  # the frontend allows these only
                new = region.data[at[inside]].reshape(-1).view(kind)
                # atomic per element on the GPU: another warp's reduction into the box must not be lost
                with ATOMIC_UPDATES, np.errstate(over="ignore", invalid="ignore"):  # wraps / rounds as the GPU does
                    old = tensor.data[global_bytes[inside]].reshape(-1).view(kind)
                    tensor.data[global_bytes[inside]] = _REDUCE_OPS[reduce](old, new).astype(kind).view(
                        np.uint8).reshape(-1, tmap.nbytes)
                continue
            data = np.zeros((elements.size, tmap.nbytes), dtype=np.uint8)
            data[inside] = tensor.data[global_bytes[inside]]
            ranks = [st.rank]
            if multicast:  # the same box into the same place of each block the mask names
                mask = int(_per_lane(st.v[mask_slot], st.n)[lane]) & 0xFFFF
                ranks = [r for r in range(16) if mask >> r & 1]
                if any(r >= st.sync.blocks for r in ranks):
                    raise LaneFault(f"dsl.tma_load multicast mask {mask:#x} names blocks outside the cluster of "
                                    f"{st.sync.blocks}", lane)
            bar_address = int(_per_lane(st.v[bar_slot], st.n)[lane]) & 0xFFFFFFFF
            for r in ranks:
                region, at = _box_shared(st, tmap, shared, lane, what, st.sync.windows[r] if multicast else None)
                region.data[at] = data
                with st.sync.lock:
                    st.sync.mbarrier(bar_address, lane, r).complete_tx(data.size)
                    st.sync.changed()

    return step


def _cluster_rank(info: OpInfo, m: re.Match) -> Step:
    """`%cluster_ctarank`: the block's rank in its cluster (0 without one)."""
    (o,) = info.outs

    def step(st: Lanes) -> None:
        st.v[o] = np.asarray(st.rank, dtype=np.int32)

    return step


def _cluster_barrier(info: OpInfo, m: re.Match) -> Step:
    _independent(info)
    where = waiting_at(info, "dsl.cluster_barrier")

    def step(st: Lanes) -> None:
        active = _each_active(st)
        if active.size:
            st.sync.barrier(warp_index(st), int(active[0]), CLUSTER_BARRIER, None, True, where)

    return step


def _remote_arrive(info: OpInfo, m: re.Match) -> Step:
    """`mapa` to block `cta`'s copy of an mbarrier, and an arrival there."""
    _independent(info)
    address, cta = info.args

    def step(st: Lanes) -> None:
        with st.sync.lock:
            for lane in _each_active(st):
                rank = int(_per_lane(st.v[cta], st.n)[lane])
                st.sync.mbarrier(_mbarrier_address(st, st.v[address], lane), int(lane), rank).arrive(int(lane))
            st.sync.changed()

    return step


# --- the table --------------------------------------------------------------------------------------

_NO_EFFECT = re.compile(r"wgmma\.fence\.sync\.aligned;|"
                        r"fence\.mbarrier_init\.release\.cluster;|fence\.proxy\.async\.shared::cta;|"
                        r"setmaxnreg\.(?:inc|dec)\.sync\.aligned\.u32 \d+;|cp\.async\.bulk\.commit_group;|"
                        r"cp\.async\.bulk\.wait_group\.read \d+;")

HANDLERS: list[tuple[re.Pattern, Callable[[OpInfo, re.Match], Step]]] = [
    (_MMA, _mma_sync),
    (_LDMATRIX, _ldmatrix),
    (_WGMMA, _wgmma),
    (re.compile(r"wgmma\.wait_group\.sync\.aligned (\d+);"), _wgmma_wait),
    (re.compile(r"wgmma\.commit_group\.sync\.aligned;"), _wgmma_commit),
    (_NO_EFFECT, _nothing),
    (re.compile(r"mbarrier\.init\.shared::cta\.b64 \[\$0\], \$1;"), _mbarrier_init),
    (re.compile(r"mbarrier\.arrive(?:\.expect_tx)?\.shared::cta\.b64 _, \[\$0\](?:, \$1)?;"), _mbarrier_arrive),
    (re.compile(r"\{ \.reg \.pred done; wait: mbarrier\.try_wait\.parity\.shared::cta\.b64 done, \[\$0\], \$1; "
                r"@!done bra wait; \}"), _mbarrier_wait),
    (_NAMED_BARRIER, _named_barrier),
    (_TMA_LOAD, lambda info, m: _tma(info, m, load=True)),
    (re.compile(r"mov\.u32 \$0, %cluster_ctarank;"), _cluster_rank),
    (re.compile(r"barrier\.cluster\.arrive\.release; barrier\.cluster\.wait\.acquire;"), _cluster_barrier),
    (re.compile(r"\{ \.reg \.b32 remote; mapa\.shared::cluster\.u32 remote, \$0, \$1; "
                r"mbarrier\.arrive\.release\.cluster\.shared::cluster\.b64 _, \[remote\]; \}"), _remote_arrive),
    (_TMA_STORE, lambda info, m: _tma(info, m, load=False)),
    (_TMA_REDUCE, lambda info, m: _tma(info, m, load=False, reduce=m.group(2))),
]


def inline_asm_step(info: OpInfo, text: str) -> Step | None:
    """The step for one of these instructions (`text`: its PTX, whitespace collapsed), or None."""
    for pattern, make in HANDLERS:
        m = pattern.fullmatch(text)
        if m is not None:
            return make(info, m)
    return None
