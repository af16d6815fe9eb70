"""Rewrites before lowering, so that what LLVM's NVPTX backend makes of bf16 is what the
language means (each found by generated programs, `tests/fuzz`, disagreeing on the GPU):

- `math.fma` on bf16 and f16 is a single rounding. LLVM promotes a 16-bit `llvm.fma` to an
  f32 FMA and rounds its result: two roundings, 1 ulp off near ties. It becomes
  `llvm.nvvm.fma.rn.bf16` / `.f16` (PTX `fma.rn.bf16`, sm_80 and later; `fma.rn.f16`), which
  round once.
- Widening a bf16 (`arith.extf`) is written as its bits moved into the top of an f32. LLVM
  narrows `fptrunc(op(fpext x, ...)) to half` into an f16 operation when the operands'
  *significands* fit in f16, and a bf16's does; its exponent does not. So `x - x` of a large
  bf16 `x`, computed in f64 and stored as f16, became `inf - inf` = NaN, and an f16 / bf16
  quotient stored as f16 divided by a bf16 that overflowed f16. Written as integer
  operations the widening is not an `fpext` that LLVM could see through; it is exact either way
  (a bf16 is the top half of an f32).

The rewrites are made on the copy of the module that is lowered; the traced view and the
interpreter keep the ops as traced.
"""

from __future__ import annotations

from typing import Any

from mlir import ir


def make_bf16_exact(module: Any) -> None:
    """Applies both rewrites to every function of the module's `gpu.module`s."""
    fmas: list[Any] = []
    widenings: list[Any] = []
    to_integer: list[Any] = []
    inexact: list[Any] = []
    compared_abs: list[Any] = []

    def visit(op: Any) -> Any:
        if op.name == "math.fma" and _half_kind(op.results[0].type) is not None:
            fmas.append(op)
        elif op.name == "arith.extf" and _is_bf16(op.operands[0].type):
            widenings.append(op)
        elif op.name in ("arith.fptosi", "arith.fptoui") and _is_bf16(op.operands[0].type):
            to_integer.append(op)
        elif op.name in ("arith.sitofp", "arith.uitofp") and _inexact_conversion(op):
            inexact.append(op)
        elif op.name == "math.absf" and str(op.results[0].type) in _ABS_BITS and any(
                use.owner.name == "arith.cmpf" for use in op.results[0].uses):
            compared_abs.append(op)
        return ir.WalkResult.ADVANCE

    for top in module.body.operations:
        if top.operation.name == "gpu.module":
            top.operation.walk(visit)
    for op in fmas:
        with ir.InsertionPoint(op), op.location:
            fused = _lanewise(op.operands, op.results[0].type, _fma_rn)
        op.results[0].replace_all_uses_with(fused)
        op.erase()
    for op in widenings:
        with ir.InsertionPoint(op), op.location:
            wide = _widen_bf16(op.operands[0], op.results[0].type)
        op.results[0].replace_all_uses_with(wide)
        op.erase()
    for op in to_integer:
        with ir.InsertionPoint(op), op.location:
            wide = _widen_bf16(op.operands[0], _f32_like(op.operands[0].type))
        op.operands[0] = wide
    for op in inexact:
        with ir.InsertionPoint.after(op), op.location:
            kept = _opaque_copy(op.results[0])
        _replace_uses_except(op.results[0], kept)
    for op in compared_abs:
        with ir.InsertionPoint(op), op.location:
            cleared = _sign_cleared(op.operands[0])
        op.results[0].replace_all_uses_with(cleared)
        op.erase()


_PRECISION = {"f32": 24, "f64": 53}
_ABS_BITS = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}


def _inexact_conversion(op: Any) -> bool:
    """Whether an integer-to-float conversion may round (the integer wider than the significand)."""
    target = str(op.results[0].type)
    source = op.operands[0].type
    return target in _PRECISION and isinstance(source, ir.IntegerType) and source.width > _PRECISION[target]


def _opaque_copy(x: Any) -> Any:
    """`x` through an inline-asm `mov`: the same value, opaque to MLIR's and LLVM's folds."""
    from dsl.frontend import ops

    kind, constraint = ("f64", "d") if str(x.type) == "f64" else ("f32", "f")
    return ops.llvm_inline_asm(x.type, f"mov.{kind} $0, $1;", f"={constraint},{constraint}", [x],
                               side_effects=False)


def _replace_uses_except(old: Any, new: Any, keeper: Any = None) -> None:
    """Every use of `old` but the one in `keeper` (by default `new`'s own defining op) now uses `new`."""
    keeper = new.owner if keeper is None else keeper
    for use in list(old.uses):
        if use.owner != keeper:
            use.owner.operands[use.operand_number] = new


def _sign_cleared(x: Any) -> Any:
    """`abs(x)` as `x`'s bits with the sign bit cleared (the same value, NaNs included)."""
    from dsl.frontend import ops

    width = _ABS_BITS[str(x.type)]
    integer = ir.IntegerType.get_signless(width)
    bits = ops.value("arith.bitcast", integer, x)
    mask = ops.constant(integer, (1 << (width - 1)) - 1)
    return ops.value("arith.bitcast", x.type, ops.same_type("arith.andi", bits, mask))


def _f32_like(ty: Any) -> Any:
    return ir.VectorType.get(ty.shape, ir.F32Type.get()) if isinstance(ty, ir.VectorType) else ir.F32Type.get()


def _half_kind(ty: Any) -> str | None:
    """'bf16' or 'f16' for a 16-bit float type or vector of one, else None."""
    element = ty.element_type if isinstance(ty, ir.VectorType) else ty
    return "bf16" if isinstance(element, ir.BF16Type) else "f16" if isinstance(element, ir.F16Type) else None


def _is_bf16(ty: Any) -> bool:
    element = ty.element_type if isinstance(ty, ir.VectorType) else ty
    return isinstance(element, ir.BF16Type)


def _lanewise(operands: Any, ty: Any, scalar: Any) -> Any:
    """`scalar` of each lane (vectors are taken apart and put together again)."""
    from dsl.frontend import ops

    if not isinstance(ty, ir.VectorType):
        return scalar(*operands)
    lanes = ty.shape[0]
    return ops.vector_from_elements(ty, [scalar(*(ops.vector_extract(v, k) for v in operands))
                                         for k in range(lanes)])


def _fma_rn(a: Any, b: Any, c: Any) -> Any:
    from dsl.frontend import ops

    return ops.llvm_call_intrinsic(a.type, f"llvm.nvvm.fma.rn.{_half_kind(a.type)}", [a, b, c])


def _widen_bf16(x: Any, result_type: Any) -> Any:
    """`x` as f32 (then `result_type`): its 16 bits shifted into the top of a 32-bit word."""
    from dsl.frontend import ops

    vector = x.type.shape if isinstance(x.type, ir.VectorType) else None

    def shaped(element: Any) -> Any:
        return ir.VectorType.get(vector, element) if vector else element

    i16, i32, f32 = (shaped(t) for t in (ir.IntegerType.get_signless(16), ir.IntegerType.get_signless(32),
                                         ir.F32Type.get()))
    raw = ops.value("arith.bitcast", i16, x)
    word = ops.value("arith.extui", i32, raw)
    sixteen = ops.constant(i32, ir.DenseElementsAttr.get_splat(i32, ir.IntegerAttr.get(i32.element_type, 16))
                           if vector else 16)
    as_f32 = ops.value("arith.bitcast", f32, ops.same_type("arith.shli", word, sixteen))
    return as_f32 if result_type == f32 else ops.value("arith.extf", result_type, as_f32)


NARROW_OVERFLOWING = frozenset({"arith.addi", "arith.subi", "arith.muli", "arith.shli", "arith.divsi", "math.absi"})


def renormalize_narrow_integers(module: Any) -> int:
    """For ptxas 13.0 (`toolchain.KNOWN_BAD_PTXAS`), which drops the sign extension of an 8- or
    16-bit result that left its range (`-x` of an i16 -32768 widened to i64 gave 32768): each
    scalar i8 / i16 add, subtract, multiply, shift, division and `abs` result is taken through
    32 bits and back (zero-extended, an opaque `mov.b32`, truncated), so the register ptxas sees
    holds the wrapped value, which it then extends as it must. Returns how many it rewrote."""
    found: list[Any] = []

    def visit(op: Any) -> Any:
        if op.name in NARROW_OVERFLOWING and len(op.results) == 1:
            ty = op.results[0].type
            if isinstance(ty, ir.IntegerType) and ty.width in (8, 16):
                found.append(op)
        return ir.WalkResult.ADVANCE

    for top in module.body.operations:
        if top.operation.name == "gpu.module":
            top.operation.walk(visit)
    for op in found:
        result = op.results[0]
        with ir.InsertionPoint.after(op), op.location:
            wrapped, widening = _through_32_bits(result)
        _replace_uses_except(result, wrapped, widening)
    return len(found)


def _through_32_bits(x: Any) -> tuple[Any, Any]:
    """`x` zero-extended, through an opaque `mov.b32`, truncated; and the extension op."""
    from dsl.frontend import ops

    i32 = ir.IntegerType.get_signless(32)
    word = ops.value("arith.extui", i32, x)
    kept = ops.llvm_inline_asm(i32, "mov.b32 $0, $1;", "=r,r", [word], side_effects=False)
    return ops.value("arith.trunci", x.type, kept), word.owner
