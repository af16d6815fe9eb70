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

- A shuffle of a constant is that constant (every lane holds it; a lane whose source is out of
  range keeps its own). ptxas (13.0 and 13.5) folds such a shuffle itself and then reads
  `min(c - x, y)` as `min(x - c, y)` (one `VIADDMNMX` with `-c`), so the shuffles are folded
  before it sees them.

The rewrites are made on the copy of the module that is lowered; the traced view and the
interpreter keep the ops as traced.
"""

from __future__ import annotations

from typing import Any

from mlir import ir

_SHUFFLED = {"gpu.shuffle": 0, "nvvm.shfl.sync": 1}  # the op -> its shuffled value's operand
_CONSTANTS = frozenset({"arith.constant", "llvm.mlir.constant"})


def fold_shuffled_constants(module: Any) -> int:
    """Replaces every shuffle of a constant by the constant, canonicalizing between rounds so
    that a reduction's butterfly (`c & shfl(c)`, then a shuffle of that) folds all the way.
    Returns how many shuffles it folded."""
    from mlir.passmanager import PassManager

    folded = 0
    while found := _constant_shuffles(module):
        for op in found:
            op.results[0].replace_all_uses_with(op.operands[_SHUFFLED[op.name]])
            if all(not list(r.uses) for r in op.results):
                op.erase()
        folded += len(found)
        PassManager.parse("builtin.module(canonicalize)", module.operation.context).run(module.operation)
    return folded


def _kernel_ops(module: Any, keep: Any) -> list[Any]:
    """The ops of the module's `gpu.module`s for which `keep(op)` holds, in walk order."""
    found: list[Any] = []

    def visit(op: Any) -> Any:
        if keep(op):
            found.append(op)
        return ir.WalkResult.ADVANCE

    for top in module.body.operations:
        if top.operation.name == "gpu.module":
            top.operation.walk(visit)
    return found


def _constant_shuffles(module: Any) -> list[Any]:
    def shuffles_a_constant(op: Any) -> bool:
        at = _SHUFFLED.get(op.name)
        if at is None or len(op.operands) <= at:
            return False
        source = op.operands[at].owner  # an op, or the block of an argument
        return isinstance(source, (ir.OpView, ir.Operation)) and source.name in _CONSTANTS

    return _kernel_ops(module, shuffles_a_constant)


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


# 8- and 16-bit integer operations, by how their operands widen to 32 bits exactly
_SIGNED = frozenset({"arith.divsi", "arith.remsi", "arith.shrsi", "arith.maxsi", "arith.minsi", "math.absi"})
_UNSIGNED = frozenset({"arith.divui", "arith.remui", "arith.shrui", "arith.maxui", "arith.minui"})
_EITHER = frozenset({"arith.addi", "arith.subi", "arith.muli", "arith.andi", "arith.ori", "arith.xori",
                     "arith.shli"})  # the low bits of the result do not depend on the extension
_SHIFTS = frozenset({"arith.shli", "arith.shrsi", "arith.shrui"})  # the amount widens unsigned
_CONVERSIONS = frozenset({"arith.sitofp", "arith.uitofp"})  # from an 8- or 16-bit integer
_EXTENSIONS = frozenset({"arith.extsi", "arith.extui"})  # i8 to i16
_SIGNED_PREDICATES = frozenset({2, 3, 4, 5})  # arith.cmpi's slt, sle, sgt, sge


def _narrow(ty: Any) -> bool:
    return isinstance(ty, ir.IntegerType) and ty.width in (8, 16)


def widen_narrow_integers(module: Any) -> int:
    """For ptxas 13.0 (`toolchain.KNOWN_BAD_PTXAS`), which miscompiles 8- and 16-bit integer
    code in several ways (it drops the sign extension of a result that left its range, so `-x`
    of an i16 -32768 widened to i64 gave 32768; it folds `max(x, 1) == 1` of u16 through the
    min/max unit's predicate the wrong way round; it compares a sign-extended i8 as u16 against
    32 bits): no 8- or 16-bit arithmetic, comparison, extension or integer-to-float conversion
    reaches the PTX. Each is done on its operands extended to 32 bits, as the operation reads them (signed
    or unsigned), which gives the same low bits (shift amounts and divisors are guarded by the
    frontend); a narrow result is the 32-bit one truncated. Opaque `mov.b32`s keep LLVM from
    narrowing them again (ptxas removes the moves); truncations to and widenings from 8 or 16
    bits pass one too. Its fourth bug, `(-a) >> k` taken for `-(a >> k)`, is kept out by
    `_unsigned_shifts_of_signed`. Returns how many operations it rewrote."""
    found: list[Any] = []
    truncations: list[Any] = []
    extensions: list[Any] = []

    def visit(op: Any) -> Any:
        name = op.name
        if name == "arith.trunci" and _narrow(op.results[0].type) and not _narrow(op.operands[0].type):
            truncations.append(op)
        elif name in _EXTENSIONS and _narrow(op.operands[0].type) and not _narrow(op.results[0].type) \
                and isinstance(op.results[0].type, ir.IntegerType):
            extensions.append(op)
        elif name in _SIGNED or name in _UNSIGNED or name in _EITHER:
            if len(op.results) == 1 and _narrow(op.results[0].type):
                found.append(op)
        elif name in _CONVERSIONS or name == "arith.cmpi":
            if _narrow(op.operands[0].type):
                found.append(op)
        elif name in _EXTENSIONS and _narrow(op.results[0].type):
            found.append(op)
        return ir.WalkResult.ADVANCE

    for top in module.body.operations:
        if top.operation.name == "gpu.module":
            top.operation.walk(visit)
    # A wide operation whose result is truncated (or whose operands were extended) is one LLVM
    # narrows back to 8 or 16 bits: `(-cast(x, u32)).to(i16)` became `neg.s16`. Opaque movs
    # between the narrow and the wide values keep it wide.
    for op in truncations:
        with ir.InsertionPoint(op), op.location:
            op.operands[0] = _opaque_word(op.operands[0])
    for op in extensions:
        with ir.InsertionPoint.after(op), op.location:
            kept = _opaque_word(op.results[0])
        _replace_uses_except(op.results[0], kept)
    for op in found:
        with ir.InsertionPoint(op), op.location:
            replacement = _in_32_bits(op)
        op.results[0].replace_all_uses_with(replacement)
        op.erase()
    return len(found) + len(truncations) + len(extensions) + _unsigned_shifts_of_signed(module)


def _unsigned_shifts_of_signed(module: Any) -> int:
    """ptxas 13.0 takes `(-a) >> k` for `-(a >> k)` when it fuses `b + ((-a) >> k)` into one
    `LEA.HI.SX32` with a negated operand (off by one unless `2**k` divides `a`). Each 32-bit
    arithmetic shift right (the narrow ones are 32-bit by now) becomes `((a ^ s) >>> k) ^ s`, `s`
    the sign of `a` as all ones or zeros, chosen by a compare (inline PTX, so LLVM does not turn it
    back into a shift): the same value, and no signed shift left to fuse. Checked in 13.0's SASS."""
    from dsl.frontend import ops

    shifts = _kernel_ops(module, lambda op: op.name == "arith.shrsi" and str(op.results[0].type) == "i32")
    for op in shifts:
        a, k = op.operands
        with ir.InsertionPoint(op), op.location:
            sign = ops.llvm_inline_asm(a.type, "{ .reg .pred p; setp.lt.s32 p, $1, 0; selp.b32 $0, -1, 0, p; }",
                                       "=r,r", [a], side_effects=False)
            flipped = ops.same_type("arith.xori", a, sign)
            shifted = ops.same_type("arith.shrui", flipped, k)
            replacement = ops.same_type("arith.xori", shifted, sign)
        op.results[0].replace_all_uses_with(replacement)
        op.erase()
    return len(shifts)


def _opaque_word(x: Any) -> Any:
    """An i32 or i64 `x` through an inline-asm `mov`, which LLVM cannot see through."""
    from dsl.frontend import ops

    if x.type.width == 64:
        return ops.llvm_inline_asm(x.type, "mov.b64 $0, $1;", "=l,l", [x], side_effects=False)
    if x.type.width != 32:  # i1 and other widths: no narrowing to keep out
        return x
    return ops.llvm_inline_asm(x.type, "mov.b32 $0, $1;", "=r,r", [x], side_effects=False)


def _in_32_bits(op: Any) -> Any:
    """What replaces the narrow `op`: the same operation on 32-bit operands (see
    `widen_narrow_integers`)."""
    from dsl.frontend import ops

    i32 = ir.IntegerType.get_signless(32)
    name = op.name

    def wide(x: Any, signed: bool) -> Any:
        word = ops.value("arith.extsi" if signed else "arith.extui", i32, x)
        return ops.llvm_inline_asm(i32, "mov.b32 $0, $1;", "=r,r", [word], side_effects=False)

    if name in _CONVERSIONS:
        return ops.value(name, op.results[0].type, wide(op.operands[0], name == "arith.sitofp"))
    if name in _EXTENSIONS:
        kept = wide(op.operands[0], name == "arith.extsi")
        return ops.value("arith.trunci", op.results[0].type, kept)
    if name == "arith.cmpi":
        predicate = op.attributes["predicate"]
        signed = ir.IntegerAttr(predicate).value in _SIGNED_PREDICATES
        return ops.value(name, op.results[0].type, *(wide(x, signed) for x in op.operands), predicate=predicate)

    def signed_operand(k: int) -> bool:
        if name in _SHIFTS:  # the value as the operation reads it, the amount unsigned
            return k == 0 and name == "arith.shrsi"
        return name not in _UNSIGNED

    operands = [wide(x, signed_operand(k)) for k, x in enumerate(op.operands)]
    result = ops.value(name, i32, *operands)
    kept = ops.llvm_inline_asm(i32, "mov.b32 $0, $1;", "=r,r", [result], side_effects=False)
    return ops.value("arith.trunci", op.results[0].type, kept)
