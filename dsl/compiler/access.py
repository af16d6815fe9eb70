"""How a traced kernel touches the memory of its tensor parameters: a fact for the launcher.

The launcher refuses, before anything launches, a pointer the kernel would fault on or an
array it must not write: so it needs to know, per tensor parameter, the widest access's
alignment (a 128-bit `vload`/`vstore` needs 16-byte aligned addresses; a scalar access
its element size) and whether the kernel stores to it or updates it atomically.

Read from the traced `gpu.func` rather than recorded while tracing, so every way of
reaching memory counts (subscripts, vector accesses, atomics, helpers, inline PTX): each
tensor pointer (an entry block argument) is followed through its uses, and the uses of the
`llvm.getelementptr`s based on it, to the memory ops that take the address. A vector
access's `alignment` attribute is what the lowering promises the hardware; an index that is
a multiple of the width (the `vload` contract) keeps it only when the base pointer and the
outer strides are multiples of it too, which is what `TensorAccess.align` asks of the
argument. A pointer reaching any other op (inline PTX, a call, a store of the pointer
itself) counts as written: what that op does is not known here. A TMA tensor map parameter
stands for its tensor: the bulk copies through it read it, `dsl.tma_store` writes it. Following uses touches
only the ops that reach memory, not the whole kernel.
"""

from __future__ import annotations

from typing import Any

from mlir import ir

from dsl.compiler.artifacts import TensorAccess

_READS = {"llvm.load": 0, "nvvm.cp.async.shared.global": 1}  # op name -> operand index of the address
_WRITES = {"llvm.store": 1, "llvm.atomicrmw": 0, "llvm.cmpxchg": 0}


def tensor_access(func: Any, params: list[Any]) -> dict[str, TensorAccess]:
    """{tensor parameter name: TensorAccess} of the tensors the `gpu.func` `func` touches."""
    entry = func.regions[0].blocks[0]
    found: dict[str, TensorAccess] = {}
    position = 0
    for p in params:
        if p.kind == "tensor":
            access = _follow(entry.arguments[position], p, None)
            if access is not None:
                found[p.name] = access
        elif p.kind == "tensor_map":
            access = _tensor_map_access(entry.arguments[position])
            if access is not None:
                found[p.name] = access
        position += len(p.flat_types())
    return found


TMA_ALIGN = 16  # the global address of a TMA tensor map's tensor


def _tensor_map_access(tmap: Any) -> TensorAccess | None:
    """What the TMA copies through a tensor map parameter do to its tensor: a bulk tensor copy
    from global to shared memory reads it, one from shared to global (`dsl.tma_store`) writes
    it; the map reaching any other op counts as written."""
    access = None
    for use in tmap.uses:
        op = use.owner
        text = ir.StringAttr(op.attributes["asm_string"]).value if op.name == "llvm.inline_asm" else ""
        written = not (text.startswith(("cp.async.bulk.tensor", "prefetch.tensormap"))
                       and ".global.shared" not in text)
        found = TensorAccess(TMA_ALIGN, written)
        access = found if access is None else access.merge(found)
    return access


def _follow(pointer: Any, p: Any, access: TensorAccess | None) -> TensorAccess | None:
    """`access` merged with what the uses of `pointer` (based on parameter `p`) do."""
    for use in pointer.uses:
        op = use.owner
        name = op.name
        where = use.operand_number
        if name == "llvm.getelementptr" and where == 0:  # an element address: what its uses do
            access = _follow(op.result, p, access)
            continue
        if _READS.get(name) == where:
            found = TensorAccess(_alignment(op, p), False)
        elif _WRITES.get(name) == where:
            found = TensorAccess(_alignment(op, p), True)
        else:  # the pointer stored, passed to inline PTX or a call
            found = TensorAccess(p.dtype.nbytes, True)
        access = found if access is None else access.merge(found)
    return access


def _alignment(op: Any, p: Any) -> int:
    attrs = op.attributes
    for name in ("alignment", "size"):  # a load's promise; an async copy's bytes (it needs them aligned)
        if name in attrs:
            return max(int(ir.IntegerAttr(attrs[name]).value), p.dtype.nbytes)
    return max(_natural_alignment(op), p.dtype.nbytes)


_VALUE = {"llvm.store": 0, "llvm.atomicrmw": 1, "llvm.cmpxchg": 1}  # op name -> operand index of the value


def _natural_alignment(op: Any) -> int:
    """The bytes of the value an unannotated access moves, which LLVM aligns it to: wider than the
    parameter's element when the kernel reads the tensor through a `view` (`x.view(dsl.i32)` of
    an `i8` tensor loads 4 bytes at a time)."""
    value = op.results[0] if op.name == "llvm.load" else op.operands[_VALUE.get(op.name, 0)]
    ty = value.type
    if isinstance(ty, ir.IntegerType | ir.FloatType):  # the bindings give each type its own class
        return max(1, ty.width // 8)
    return 1
