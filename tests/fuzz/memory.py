"""The reference's memory: global tensors, shared arrays (with races caught), atomics.

- global tensors of rank 1 and 2: `t[i]`, `t[i, j]` (row-major; the element offset is
  computed in i32, or i64 with a 64-bit index, as the compiler does), `t.shape[k]` (i32);
  an access outside the tensor is a `Fault`;
- shared arrays (`dsl.SharedAllocator().array(dtype, shape)`), one per block; between two
  barriers a slot another thread writes may not be read or written (a race: the reference
  raises a `Fault`, so a generator that writes one is caught), and a slot nobody wrote may
  not be read (the GPU leaves it undefined);
- atomics `dsl.atomic_add / min / max` on global tensors of 32- and 64-bit integers (min and
  max on f32 and f64 too: NaN sticks, -0.0 < +0.0), applied in thread order; only their
  final values are compared, which no order changes; the old value they return depends on
  the order, so programs must not use it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from dsl.language import types as T
from dsl.language.types import DType
from tests.fuzz.scalars import Fault, Refused, Unmodelled, Val, arithmetic, is_literal, literal, min_max, wrap


class Threads(Protocol):
    """Who runs now, and how many barriers the block has passed (the `FakeDsl`)."""

    current: int
    phase: int
    shared: list[SharedArray]


def element_offset(dims: tuple[int, ...], index: Any, shared: bool) -> int:
    """The flat element offset of `index` into a row-major array of `dims`, in the DSL's index
    arithmetic (i32, or i64 when an index is 64 bits wide); -1 or past the end if outside."""
    if isinstance(index, Val) and len(dims) == 1 and index.dtype.is_int:  # the common case, quickly
        return index.v if index.dtype.bits <= 32 and index.dtype.is_signed else index.to(
            T.i64 if index.dtype.bits == 64 else T.i32).v
    items = list(index) if isinstance(index, tuple) else [index]
    if len(items) != len(dims):
        raise Refused(f"indexed with {len(items)} indices; it has rank {len(dims)}")
    wide = any(isinstance(x, Val) and x.dtype.bits == 64 for x in items)
    offset_type = T.i64 if wide else T.i32
    offset, stride = 0, 1
    strides = []
    for d in reversed(dims):
        strides.append(stride)
        stride *= d
    for item, stride, dim in zip(items, reversed(strides), dims):
        if isinstance(item, Val):
            if not item.dtype.is_int:
                raise Refused(f"an index of type {item.dtype.name}")
            offset += item.to(offset_type).v * stride
        elif isinstance(item, int) and not isinstance(item, bool):
            if item < 0 or (shared and item >= dim):
                raise Refused(f"index {item} out of range")
            offset += item * stride
        else:
            raise Refused(f"an index of type {type(item).__name__}")
    return wrap(offset_type, offset)


@dataclass
class Tensor:
    """A global-memory tensor: element values (canonical ints, or floats) of `dtype`, row-major."""

    name: str
    dtype: DType
    values: list[Any]
    dims: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        self.dims = self.dims or (len(self.values),)

    @property
    def shape(self) -> tuple[Val, ...]:
        return tuple(Val(T.i32, d) for d in self.dims)

    def offset(self, index: Any) -> int:
        i = element_offset(self.dims, index, shared=False)
        if not 0 <= i < len(self.values):
            raise Fault(f"out-of-bounds access of tensor '{self.name}' at element {i} (shape {self.dims})")
        return i

    def __getitem__(self, index: Any) -> Val:
        return Val(self.dtype, self.values[self.offset(index)])

    def __setitem__(self, index: Any, value: Any) -> None:
        self.values[self.offset(index)] = _stored(value, self.dtype, f"Tensor[{self.dtype.name}]")


def _stored(value: Any, dtype: DType, what: str) -> Any:
    if is_literal(value):
        value = literal(value, dtype)
    if not isinstance(value, Val) or value.dtype != dtype:
        got = value.dtype.name if isinstance(value, Val) else type(value).__name__
        raise Refused(f"storing {got} into {what}")
    return value.v


class SharedArray:
    """One block's shared array; the block's threads share it, and races are faults."""

    def __init__(self, fake: Threads, dtype: DType, dims: tuple[int, ...]):
        self.fake, self.dtype, self.dims = fake, dtype, dims
        size = 1
        for d in dims:
            size *= d
        self.values: list[Any] = [None] * size
        self.written: dict[int, tuple[int, int]] = {}  # slot -> (thread, phase)
        self.read: dict[int, tuple[int, set[int]]] = {}  # slot -> (phase, threads)

    def _slot(self, index: Any) -> int:
        i = element_offset(self.dims, index, shared=True)
        if not 0 <= i < len(self.values):
            raise Fault(f"out-of-bounds access of a shared array at element {i} (shape {self.dims})")
        return i

    def __getitem__(self, index: Any) -> Val:
        i, me, phase = self._slot(index), self.fake.current, self.fake.phase
        writer = self.written.get(i)
        if writer is not None and writer[1] == phase and writer[0] != me:
            raise Fault(f"a shared-memory race: thread {me} reads element {i}, which thread {writer[0]} wrote "
                        "since the last barrier")
        if self.values[i] is None:
            raise Fault(f"thread {me} reads element {i} of a shared array, which no thread wrote")
        seen = self.read.get(i)
        if seen is None or seen[0] != phase:
            self.read[i] = (phase, {me})
        else:
            seen[1].add(me)
        return Val(self.dtype, self.values[i])

    def __setitem__(self, index: Any, value: Any) -> None:
        i, me, phase = self._slot(index), self.fake.current, self.fake.phase
        writer, seen = self.written.get(i), self.read.get(i)
        if (writer is not None and writer[1] == phase and writer[0] != me) or (
                seen is not None and seen[0] == phase and seen[1] - {me}):
            raise Fault(f"a shared-memory race: thread {me} writes element {i}, which another thread used "
                        "since the last barrier")
        self.values[i] = _stored(value, self.dtype, "a shared array")
        self.written[i] = (me, phase)


class Allocator:
    """`dsl.SharedAllocator()` in one thread: its k-th array is the block's k-th array."""

    def __init__(self, fake: Threads, dynamic: bool = False):
        if dynamic:
            raise Unmodelled("dynamic shared memory")
        self.fake, self.count = fake, 0

    def array(self, dtype: DType, shape: Any, align: int = 16, swizzle: int = 0) -> SharedArray:
        if swizzle:
            raise Unmodelled("swizzled shared arrays")
        dims = tuple(shape) if isinstance(shape, tuple | list) else (shape,)
        if not all(isinstance(d, int) and d > 0 for d in dims):
            raise Unmodelled("a shared array of run-time shape")
        arrays = self.fake.shared
        if self.count == len(arrays):
            arrays.append(SharedArray(self.fake, dtype, dims))
        self.count += 1
        return arrays[self.count - 1]


def atomic(kind: str) -> Callable[..., Val]:
    def call(ref: Any, index: Any, value: Any, order: str = "relaxed", scope: str = "device") -> Val:
        if not isinstance(ref, Tensor):
            raise Unmodelled(f"dsl.atomic_{kind} on {type(ref).__name__}")
        t = ref.dtype
        value = literal(value, t) if is_literal(value) else value
        if not isinstance(value, Val) or value.dtype != t:
            raise Refused(f"dsl.atomic_{kind} of {getattr(value, 'dtype', value)} on Tensor[{t.name}]")
        if t.is_bool or t.bits not in (32, 64):
            raise Refused(f"dsl.atomic_{kind} on {t.name}")
        if t.is_float and kind == "add":
            raise Unmodelled("float atomic adds (their rounding depends on the order)")
        i = ref.offset(index)
        old = Val(t, ref.values[i])
        ref.values[i] = (arithmetic("+", old, value) if kind == "add" else min_max(kind, old, value)).v
        return old

    return call
