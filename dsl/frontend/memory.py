"""Global and shared memory: element addresses, loads, stores, vector accesses, atomics.

Tensors are a base pointer plus dynamic shape and outer strides; the innermost stride is
the constant 1, so `x[i]` is one `getelementptr` and consecutive threads touch
consecutive addresses (coalesced). Shared arrays have static shapes, so their strides are
constants and static indices are bounds-checked while tracing. `view` reads either as
elements of another type (an `i8` tile as the 16-bit rows `ldmatrix` moves, or the reverse).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from mlir import ir

from dsl.frontend import arith as A
from dsl.frontend import ops
from dsl.frontend.values import DSLTypeError, Scalar, SharedArray, TensorRef, Vector, type_name
from dsl.language.types import DType, i32, i64


def ptr_type(address_space: int) -> Any:
    return ir.Type.parse(f"!llvm.ptr<{address_space}>")


def _indices(ref: Any, index: Any) -> list[Any]:
    items = list(index) if isinstance(index, tuple | list) else [index]
    if len(items) != len(ref.shape):
        raise DSLTypeError(
            f"{type_name(ref)} indexed with {len(items)} index{'es' if len(items) != 1 else ''}; "
            f"it has rank {len(ref.shape)}"
        )
    for k, item in enumerate(items):
        if isinstance(item, bool) or not isinstance(item, int | Scalar):
            raise DSLTypeError(f"index {k} is {type_name(item)}; indices must be integers")
        if isinstance(item, Scalar) and not item.dtype.is_int:
            raise DSLTypeError(f"index {k} has type {item.dtype.name}; indices must be integers")
        if isinstance(item, int):
            if item < 0:
                raise DSLTypeError(f"negative index {item} (index {k}); DSL tensors do not wrap around")
            if isinstance(ref, SharedArray) and item >= ref.shape[k]:
                raise DSLTypeError(f"index {item} out of range for dimension {k} of size {ref.shape[k]}")
    return items


def element_offset(ref: Any, index: Any) -> Scalar | int:
    """The flat element offset of `ref[index]`: Σ index_k * stride_k, folded where static."""
    items = _indices(ref, index)
    strides = ref.strides
    wide = any(isinstance(x, Scalar) and x.dtype.bits == 64 for x in items)
    dtype = i64 if wide else i32
    offset: Any = 0
    for item, stride in zip(items, strides):
        if isinstance(item, Scalar) and item.dtype != dtype:
            item = A.cast(item, dtype)
        term = A.binary("Mult", item, stride) if not (isinstance(stride, int) and stride == 1) else item
        offset = A.binary("Add", offset, term) if not (isinstance(offset, int) and offset == 0) else term
    return offset


def address(ref: Any, index: Any) -> Any:
    offset = element_offset(ref, index)
    space = ref.address_space if isinstance(ref, TensorRef) else 3
    if isinstance(ref, SharedArray) and ref.swizzle:
        return _swizzled_address(ref, offset)
    if isinstance(offset, int):
        if offset == 0:
            return ref.ptr
        offset = A.constant(offset, i32)
    return ops.llvm_gep(ptr_type(space), ref.ptr, offset.value, ref.dtype.mlir_type())


def swizzle_bytes(byte: int, swizzle: int) -> int:
    """Where byte `byte` of a `swizzle`-byte swizzled array lives: its 16-byte chunk XOR the
    row of 128 bytes within the 8-row atom (TMA's and wgmma's SWIZZLE_32B/64B/128B)."""
    return byte ^ (((byte >> 7) & (swizzle // 16 - 1)) << 4)


def _swizzled_address(ref: Any, offset: Scalar | int) -> Any:
    nbytes = ref.dtype.nbytes
    if isinstance(offset, int):
        byte: Any = swizzle_bytes(offset * nbytes, ref.swizzle)
    else:
        if offset.dtype != i32:
            offset = A.cast(offset, i32)
        plain = A.binary("Mult", offset, nbytes) if nbytes != 1 else offset
        row = A.binary("BitAnd", A.binary("RShift", plain, 7), ref.swizzle // 16 - 1)
        byte = A.binary("BitXor", plain, A.binary("LShift", row, 4))
    if isinstance(byte, int):
        if byte == 0:
            return ref.ptr
        byte = A.constant(byte, i32)
    return ops.llvm_gep(ptr_type(3), ref.ptr, byte.value, ir.IntegerType.get_signless(8))


def view(ref: Any, dtype: Any) -> TensorRef | SharedArray:
    """`t.view(dtype)`: the same bytes read as elements of another type (as `torch.Tensor.view`).

    The innermost dimension scales by the ratio of the element sizes and the outer strides with
    it, so `x.view(dsl.i16)` of an (M, K) `i8` tensor is (M, K / 2) with the same rows; the base
    pointer is the same value, so every access through a view still counts as an access of the
    parameter (the launcher's alignment and write facts, `dsl/compiler/access.py`). A shared
    array's extents are known here, so one that does not hold whole elements of `dtype` is
    refused now; a tensor's are known at launch, where the launcher checks that its pointer and
    outer strides are multiples of what the accesses through the view need (a run-time inner
    extent that is no multiple is rounded down: the elements past it are not reachable)."""
    if not isinstance(dtype, DType) or dtype.is_bool or dtype.kind == "index":
        raise DSLTypeError(f".view() takes a DSL element type (dsl.i8, dsl.u16, dsl.bf16, ...), not "
                           f"{type_name(dtype) if not isinstance(dtype, DType) else dtype.name}")
    if ref.dtype.is_bool or ref.dtype.kind == "index":
        raise DSLTypeError(f"{type_name(ref)} cannot be viewed as another type: its elements are not plain bytes")
    if dtype == ref.dtype:
        return ref
    if isinstance(ref, TensorRef):
        return _tensor_view(ref, dtype)
    return _shared_view(ref, dtype)


def _rescaled(extent: Any, old: DType, new: DType) -> Any:
    """An extent or stride in elements of `old` counted in elements of `new` (sizes are powers
    of two and extents never negative, so a shift is exact; a wider `new` rounds down)."""
    if isinstance(extent, int):
        return extent * old.nbytes // new.nbytes
    shift = abs(old.nbytes.bit_length() - new.nbytes.bit_length())
    return A.binary("LShift" if old.nbytes > new.nbytes else "RShift", extent, shift)


def _tensor_view(ref: TensorRef, dtype: DType) -> TensorRef:
    shape = [*ref.shape[:-1], _rescaled(ref.shape[-1], ref.dtype, dtype)]
    strides = [_rescaled(s, ref.dtype, dtype) for s in ref.strides[:-1]] + [1]
    return TensorRef(ref.name, ref.ptr, dtype, ref.rank, shape, strides, ref.address_space)


def _shared_view(ref: SharedArray, dtype: DType) -> SharedArray:
    inner = ref.shape[-1]
    what = f"{type_name(ref)} viewed as {dtype.name}"
    if not isinstance(inner, int):
        raise DSLTypeError(f"{what}: its run-time extent may not hold whole {dtype.name} elements; view it as a "
                           f"type of the same size, or allocate it as {dtype.name}")
    row = inner * ref.dtype.nbytes
    if row % dtype.nbytes:
        raise DSLTypeError(f"{what}: its rows are {row} bytes, not a whole number of {dtype.nbytes}-byte "
                           f"{dtype.name} elements; pad the inner extent to a multiple of "
                           f"{dtype.nbytes // ref.dtype.nbytes} elements")
    if ref.align < dtype.nbytes:
        raise DSLTypeError(f"{what}: the array is {ref.align}-byte aligned, {dtype.name} elements need "
                           f"{dtype.nbytes}; allocate it with align={dtype.nbytes}")
    shape = (*ref.shape[:-1], row // dtype.nbytes)
    return dataclasses.replace(ref, dtype=dtype, shape=shape)  # the same class (a run-time outer extent stays)


def load(ref: Any, index: Any) -> Scalar:
    return Scalar(ops.llvm_load(ref.dtype.mlir_type(), address(ref, index)), ref.dtype)


def store(ref: Any, index: Any, value: Any) -> None:
    if isinstance(value, Vector):
        raise DSLTypeError("storing a vector into one element; use .vstore(index, vector)")
    if isinstance(value, bool | int | float):
        value = A.to_scalar(value, ref.dtype)
    if not isinstance(value, Scalar):
        raise DSLTypeError(f"cannot store {type_name(value)} into {type_name(ref)}")
    if value.dtype != ref.dtype:
        raise DSLTypeError(
            f"storing {value.dtype.name} into {type_name(ref)}; cast with dsl.cast(value, dsl.{ref.dtype.name})"
        )
    ops.llvm_store(value.value, address(ref, index))


def _vector_width(ref: Any, width: Any) -> int:
    if not isinstance(width, int) or width not in (2, 4, 8, 16):
        raise DSLTypeError(f"vector width must be a compile-time 2, 4, 8 or 16, not {width!r}")
    if width * ref.dtype.nbytes > 16:
        raise DSLTypeError(
            f"{width} x {ref.dtype.name} is {width * ref.dtype.nbytes * 8} bits; vector accesses are at most 128 bits"
        )
    return width


def vload(ref: Any, index: Any, width: Any) -> Vector:
    """A `width`-element vector load; the index must be a multiple of `width` (aligned)."""
    width = _vector_width(ref, width)
    ty = ir.VectorType.get([width], ref.dtype.mlir_type())
    value = ops.llvm_load(ty, address(ref, index), alignment=width * ref.dtype.nbytes)
    return Vector(value, ref.dtype, width)


def vstore(ref: Any, index: Any, value: Any) -> None:
    if not isinstance(value, Vector):
        raise DSLTypeError(f"vstore needs a vector value, got {type_name(value)}")
    if value.dtype != ref.dtype:
        raise DSLTypeError(f"storing vector of {value.dtype.name} into {type_name(ref)}")
    _vector_width(ref, value.width)
    ops.llvm_store(value.value, address(ref, index), alignment=value.width * ref.dtype.nbytes)


_RMW = {
    ("add", "float"): "fadd", ("add", "int"): "add", ("add", "uint"): "add",
    ("min", "int"): "min", ("min", "uint"): "umin", ("max", "int"): "max", ("max", "uint"): "umax",
}


def atomic(kind: str, ref: Any, index: Any, value: Any) -> Scalar:
    if not isinstance(ref, TensorRef | SharedArray):
        raise DSLTypeError(f"atomics need a tensor or shared array, got {type_name(ref)}")
    value = A.to_scalar(value, ref.dtype)
    if value.dtype != ref.dtype:
        raise DSLTypeError(f"atomic_{kind} of {value.dtype.name} on {type_name(ref)}")
    op = _RMW.get((kind, ref.dtype.kind))
    if op is None:
        raise DSLTypeError(f"atomic_{kind} is not supported for {ref.dtype.name}")
    if ref.dtype.bits not in (32, 64):
        raise DSLTypeError(f"atomics need 32- or 64-bit elements, not {ref.dtype.name}")
    return Scalar(ops.llvm_atomicrmw(op, address(ref, index), value.value), ref.dtype)


def atomic_cas(ref: Any, index: Any, compare: Any, value: Any) -> Scalar:
    if not isinstance(ref, TensorRef | SharedArray) or not ref.dtype.is_int or ref.dtype.bits not in (32, 64):
        raise DSLTypeError("atomic_cas needs a tensor or shared array of 32- or 64-bit integers")
    cmp = A.to_scalar(compare, ref.dtype)
    new = A.to_scalar(value, ref.dtype)
    if cmp.dtype != ref.dtype or new.dtype != ref.dtype:
        raise DSLTypeError(f"atomic_cas operands must be {ref.dtype.name}")
    return Scalar(ops.llvm_cmpxchg_old(address(ref, index), cmp.value, new.value), ref.dtype)
