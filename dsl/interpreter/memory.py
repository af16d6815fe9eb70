"""Global and shared memory for the interpreter: regions, pointers, checked loads, stores, atomics.

A `Region` is one allocation a kernel can reach: a tensor argument (the caller's own array,
read and written in place) or a shared array (one slot per block of the batch, filled with
0xFF bytes at the start of each block: NaN for floats, -1 for integers, since shared memory
starts with whatever the last kernel left there). A `Pointer` is a region and one byte offset
per lane. Every access is checked against its region and its alignment, lane by lane, for
the lanes that execute it; the first offending lane (in thread order) raises `LaneFault`,
which the executor turns into an error naming the thread, the block and the source line.

Shared arrays also have addresses (`SharedWindow`): each its own range of one block's shared
window, 1024-byte aligned as the GPU's dynamic shared memory is, so that the instructions
that take a 32-bit shared address (mbarriers, `ldmatrix`, TMA, wgmma descriptors) and the
swizzle patterns computed from address bits see what they see on the GPU.

Atomics apply lane by lane in thread order (vectorized when no two lanes share an address),
with the hardware's rounding: `atom.add.f32` flushes subnormal inputs and results to zero.
Where a block's warps run in threads of their own (`scheduling`), each read-modify-write, an
atomic's or a TMA reduction's, holds `ATOMIC_UPDATES`: otherwise a warp preempted between
the read and the write would lose the updates other warps made meanwhile.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from dsl.interpreter.values import LaneType, as_unsigned, flush_subnormal, from_bits, round_float, to_bits

UNINITIALIZED = 0xFF  # what a fresh shared array holds


class LaneFault(Exception):
    """An access (or another operation) one lane cannot perform; `lane` is its index in the batch."""

    def __init__(self, message: str, lane: int):
        super().__init__(message)
        self.message = message
        self.lane = lane


class Region:
    """One allocation: its bytes, how to name it, and how to describe an offset into it."""

    def __init__(self, data: np.ndarray, size: int, name: str, address: int = 0, space: int = 1,
                 element: str | None = None, shape: tuple[int, ...] = (), strides: tuple[int, ...] = (),
                 itemsize: int = 1, array: Any = None, writable: bool = True):
        self.data = data  # uint8, every slot of a shared region one after another
        self.size = size  # bytes one lane may reach (one block's slot)
        self.name = name  # "tensor 'x'", "shared array __smem_softmax_0 (softmax.py:14)"
        self.address = address  # of byte 0: alignment is checked on real addresses
        self.space = space
        self.element = element  # the tensor's element type name, for messages
        self.shape, self.strides, self.itemsize = shape, strides, itemsize
        self.array = array  # the caller's array (breakpoints show it)
        self.writable = writable
        self.lane_base: np.ndarray | None = None  # per lane: the byte where its block's slot starts
        self._views: dict[Any, np.ndarray] = {}

    def view(self, storage: Any) -> np.ndarray:
        """The whole region as an array of `storage` elements."""
        view = self._views.get(storage)
        if view is None:
            itemsize = np.dtype(storage).itemsize
            view = self._views[storage] = self.data[: len(self.data) // itemsize * itemsize].view(storage)
        return view

    def describe(self, offset: int) -> str:
        """Where an offset is, as the user counts: elements of the tensor or shared array."""
        if self.element is not None:
            element, rest = divmod(offset, self.itemsize)
            count = 1
            for extent in self.shape:
                count *= extent
            extra = f" + {rest} bytes" if rest else ""
            return f"{self.name} at element offset {element}{extra} (shape {tuple(self.shape)}, {count} elements)"
        return f"{self.name} at byte {offset} (it has {self.size} bytes)"

    @classmethod
    def of_array(cls, array: np.ndarray, name: str, element: str, shape: tuple, strides: tuple,
                 itemsize: int, writable: bool) -> Region:
        """The memory of a host array (NumPy, or a CPU tensor's NumPy view), in place."""
        span = itemsize
        for extent, stride in zip(shape, strides):
            if extent > 1:
                span += (extent - 1) * stride * itemsize
        if not all(shape):
            span = 0
        address = int(array.__array_interface__["data"][0])
        if span:
            data = np.ctypeslib.as_array((ctypes.c_uint8 * span).from_address(address))  # the array's own bytes
        else:
            data = np.zeros(0, dtype=np.uint8)
        return cls(data, span, name, address, 1, element, tuple(shape), tuple(strides), itemsize, array, writable)


@dataclass
class Pointer:
    """A region and one byte offset per lane (an int64 array, or a 0-d one when uniform)."""

    region: Region
    offset: Any

    def advanced(self, delta: Any) -> Pointer:
        return Pointer(self.region, self.offset + delta)


def merge_pointers(cond: Any, a: Pointer, b: Pointer) -> Pointer:
    """`select` of two pointers: they must point into the same allocation."""
    if a.region is not b.region:
        raise NotImplementedError("a value that points into different allocations in different threads "
                                  f"({a.region.name} and {b.region.name})")
    return Pointer(a.region, np.where(cond, a.offset, b.offset))


SHARED_BASE = 1024  # the first shared array's address (0 is never a valid one)
SHARED_ALIGN = 1024


class SharedWindow:
    """One block's shared memory by address: which array each address falls in."""

    def __init__(self, regions: list[Region]):
        self.regions = sorted(regions, key=lambda r: r.address)

    def region_at(self, address: int) -> Region | None:
        for region in self.regions:
            if region.address <= address < region.address + max(region.size, 1):
                return region
        return None


def swizzled(address: Any, swizzle: int) -> Any:
    """Where byte `address` of a `swizzle`-byte swizzled shared tile lives: its 16-byte chunk
    XOR the 128-byte row within the pattern (the layout TMA writes, wgmma reads and
    `smem.array(..., swizzle=)` indexes; `dsl.frontend.memory.swizzle_bytes`)."""
    if not swizzle:
        return address
    return address ^ (((address >> 7) & (swizzle // 16 - 1)) << 4)


# --- checked addressing -----------------------------------------------------------------------

def _active(mask: np.ndarray | None, lanes: int) -> np.ndarray | None:
    """Indices of the active lanes, or None for all of them."""
    return None if mask is None else np.flatnonzero(mask)


def _addresses(ptr: Pointer, sel: np.ndarray | None, lanes: int, nbytes: int, align: int, what: str) -> Any:
    """Byte offsets into the region's data for the active lanes (after checking each of them)."""
    region = ptr.region
    offset = np.asarray(ptr.offset, dtype=np.int64)
    if offset.ndim == 0 and region.lane_base is None:
        rel = offset
        lane = 0 if sel is None else int(sel[0])
        _check_one(region, int(rel), nbytes, align, what, lane)
        return rel
    rel = np.broadcast_to(offset, (lanes,))
    base = region.lane_base
    if sel is not None:
        rel = rel[sel]
        base = base[sel] if base is not None else None
    bad = (rel < 0) | (rel + nbytes > region.size) | ((region.address + rel) % align != 0)
    if bad.any():
        k = int(np.argmax(bad))
        lane = int(sel[k]) if sel is not None else k
        _check_one(region, int(rel[k]), nbytes, align, what, lane)
    return rel + base if base is not None else rel


def _check_one(region: Region, rel: int, nbytes: int, align: int, what: str, lane: int) -> None:
    if rel < 0 or rel + nbytes > region.size:
        raise LaneFault(f"out-of-bounds {what} of {nbytes} bytes at {region.describe(rel)}", lane)
    if (region.address + rel) % align:
        raise LaneFault(f"misaligned {what} of {nbytes} bytes at {region.describe(rel)}: the address must be a "
                        f"multiple of {align}", lane)


def load(ptr: Pointer, t: LaneType, align: int, mask: np.ndarray | None, lanes: int) -> Any:
    """`llvm.load` of a scalar or vector of `t` for the active lanes (others read zeros)."""
    count = t.width or 1
    nbytes = t.nbytes * count
    sel = _active(mask, lanes)
    if sel is not None and not sel.size:
        return np.zeros((lanes, count) if t.width else (lanes,), dtype=t.np)
    at = _addresses(ptr, sel, lanes, nbytes, max(align, t.nbytes), "load")
    view = ptr.region.view(t.storage)
    index = at // t.nbytes
    raw = view[index[..., None] + np.arange(count)] if t.width else view[index]
    value = from_bits(raw, t)
    if np.ndim(at) == 0:  # one address for every lane
        return value[None, :] if t.width else value
    if sel is None:
        return value
    out = np.zeros((lanes, count) if t.width else (lanes,), dtype=value.dtype)
    out[sel] = value
    return out


def store(ptr: Pointer, value: Any, t: LaneType, align: int, mask: np.ndarray | None, lanes: int) -> None:
    """`llvm.store` for the active lanes; where two lanes store to one address the later wins."""
    count = t.width or 1
    nbytes = t.nbytes * count
    sel = _active(mask, lanes)
    if sel is not None and not sel.size:
        return
    if not ptr.region.writable:
        lane = 0 if sel is None else int(sel[0])
        raise LaneFault(f"store into {ptr.region.name}, which is a read-only array", lane)
    at = _addresses(ptr, sel, lanes, nbytes, max(align, t.nbytes), "store")
    raw = to_bits(value, t)
    raw = np.broadcast_to(raw, (lanes, count) if t.width else (lanes,))
    if sel is not None:
        raw = raw[sel]
    view = ptr.region.view(t.storage)
    index = np.asarray(at // t.nbytes)
    if index.ndim == 0:  # every lane stores to one address: the last one's value stays
        view[int(index) + np.arange(count)] = raw[-1] if t.width else raw.reshape(-1)[-1]
    elif t.width:
        view[index[:, None] + np.arange(count)] = raw
    else:
        view[index] = raw


def copy(dst: Pointer, src: Pointer, nbytes: int, mask: np.ndarray | None, lanes: int) -> None:
    """`cp.async`: `nbytes` from global to shared memory, done at once (a valid schedule of it)."""
    t = LaneType("int", "i8", 8, nbytes) if nbytes > 1 else LaneType("int", "i8", 8)
    data = load(src, t, nbytes, mask, lanes)
    store(dst, data, t, nbytes, mask, lanes)


# --- atomics ----------------------------------------------------------------------------------

def _combine(kind: str, old: Any, operand: Any, t: LaneType) -> Any:
    """The value an atomic read-modify-write leaves in memory."""
    if kind == "xchg":
        return operand
    if kind == "add":
        return old + operand
    if kind == "sub":
        return old - operand
    if kind == "and":
        return old & operand
    if kind == "or":
        return old | operand
    if kind == "xor":
        return old ^ operand
    if kind == "max":
        return np.maximum(old, operand)
    if kind == "min":
        return np.minimum(old, operand)
    if kind in ("umax", "umin"):
        u_old, u_op = as_unsigned(old, t), as_unsigned(operand, t)
        pick = np.maximum(u_old, u_op) if kind == "umax" else np.minimum(u_old, u_op)
        return np.asarray(pick).view(t.np)
    if kind == "fadd":
        if t.name == "f32":  # atom.add.f32 flushes subnormal inputs and results
            return flush_subnormal(flush_subnormal(old) + flush_subnormal(operand))
        return round_float(np.asarray(old) + np.asarray(operand), t)
    raise NotImplementedError(f"atomic {kind}")


ATOMIC_UPDATES = threading.Lock()  # one read-modify-write at a time, across warp threads


def atomic(ptr: Pointer, kind: str, operand: Any, t: LaneType, mask: np.ndarray | None, lanes: int,
           compare: Any = None) -> Any:
    """An atomic update for the active lanes, in thread order; returns each lane's old value.

    With `compare` it is a compare-and-swap: `operand` is stored where the old bits equal it."""
    with ATOMIC_UPDATES:
        return _atomic(ptr, kind, operand, t, mask, lanes, compare)


def _atomic(ptr: Pointer, kind: str, operand: Any, t: LaneType, mask: np.ndarray | None, lanes: int,
            compare: Any) -> Any:
    count = t.width or 1
    nbytes = t.nbytes * count
    sel = _active(mask, lanes)
    shape = (lanes, count) if t.width else (lanes,)
    out = np.zeros(shape, dtype=t.np)
    if sel is not None and not sel.size:
        return out
    if not ptr.region.writable:
        raise LaneFault(f"atomic update of {ptr.region.name}, which is a read-only array",
                        0 if sel is None else int(sel[0]))
    at = np.broadcast_to(_addresses(ptr, sel, lanes, nbytes, nbytes, "atomic"), (lanes if sel is None else sel.size,))
    lanes_ = np.arange(lanes) if sel is None else sel
    operand = np.broadcast_to(np.asarray(operand), shape)[lanes_]
    cmp = np.broadcast_to(np.asarray(compare), shape)[lanes_] if compare is not None else None
    view = ptr.region.view(t.storage)
    index = at // t.nbytes
    if t.width:
        index = index[:, None] + np.arange(count)
    unique = np.unique(at).size == at.size
    if unique:
        old = from_bits(view[index], t)
        if cmp is None:
            new = _combine(kind, old, operand, t)
        else:
            new = np.where(to_bits(old, t) == to_bits(cmp, t), operand, old)
        view[index] = to_bits(new, t)
        out[lanes_] = old
        return out
    olds = np.empty_like(operand)
    for k in range(at.size):  # one lane after another: the order threads are numbered in
        where = index[k]
        old = from_bits(view[where], t)
        if cmp is None:
            new = _combine(kind, old, operand[k], t)
        else:
            new = operand[k] if np.array_equal(to_bits(old, t), to_bits(cmp[k], t)) else old
        view[where] = to_bits(new, t)
        olds[k] = old
    out[lanes_] = olds
    return out
