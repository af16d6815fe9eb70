"""Floating-point contraction and fast-math: a compiler decision applied before lowering.

The tracer emits plain `arith.mulf` / `arith.addf`; which algebra the backend may use is
decided here, per kernel, from its `@kernel(contract=..., fastmath=...)` hints:

- `contract=True` (the default, as nvcc and Triton do): `a * b + c` may become one FMA
  (`fma.rn.f32`, SASS `FFMA`): faster, and more accurate (one rounding, not two). The flag
  goes on float multiplies, adds and subtracts; NVPTX fuses a multiply into an add when both
  carry it. Without it NVPTX writes `mul.rn` / `add.rn`, which ptxas may not fuse either.
- `fastmath=True` adds LLVM's other fast-math flags (reassoc, nnan, ninf, nsz, arcp, afn)
  on every float arithmetic and math op: approximate division (`div.approx.f32`) and
  reciprocals, reassociation, and the assumption that no value is NaN or infinite and that
  the sign of zero does not matter.

The flags are set on a copy of the traced module (the `traced` view shows the IR as the
tracer built it; the `lowered` and `llvm` views show `contract` / `fast` on the ops).
"""

from __future__ import annotations

from typing import Any

from mlir import ir

CONTRACTABLE = frozenset({"arith.mulf", "arith.addf", "arith.subf"})
FAST_MATH_OPS = CONTRACTABLE | frozenset({
    "arith.divf", "arith.remf", "arith.negf", "arith.cmpf", "arith.maximumf", "arith.minimumf",
    "arith.maxnumf", "arith.minnumf",
    "math.absf", "math.ceil", "math.cos", "math.sin", "math.tan", "math.tanh", "math.exp", "math.exp2",
    "math.expm1", "math.log", "math.log2", "math.log10", "math.log1p", "math.sqrt", "math.rsqrt", "math.fma",
    "math.floor", "math.powf", "math.round", "math.trunc", "math.atan", "math.atan2", "math.erf",
})
_FAST = ("reassoc", "nnan", "ninf", "nsz", "arcp", "afn")


def float_flags(hints: dict[str, Any]) -> str:
    """The `#arith.fastmath<...>` flags a kernel's hints ask for ('none' for strict IEEE)."""
    flags = list(_FAST) if hints.get("fastmath") else []
    if hints.get("contract", True):
        flags.append("contract")
    return ",".join(flags) or "none"


def apply_float_flags(module: Any, flags_by_symbol: dict[str, str]) -> None:
    """Sets the flags on the float ops of each `gpu.func` named in `flags_by_symbol`."""
    wanted = {sym: flags for sym, flags in flags_by_symbol.items() if flags != "none"}
    if not wanted:
        return
    attrs: dict[str, Any] = {}
    for symbol, func in _kernels(module):
        flags = wanted.get(symbol)
        if flags is None:
            continue
        if flags not in attrs:
            attrs[flags] = ir.Attribute.parse(f"#arith.fastmath<{flags}>")
        _mark(func, attrs[flags], CONTRACTABLE if "reassoc" not in flags else FAST_MATH_OPS)


def _kernels(module: Any) -> Any:
    """(symbol, op) of every `gpu.func` in the module's `gpu.module`s."""
    for top in module.body.operations:
        if top.operation.name != "gpu.module":
            continue
        for op in top.operation.regions[0].blocks[0].operations:
            if op.operation.name == "gpu.func":
                yield ir.StringAttr(op.operation.attributes["sym_name"]).value, op.operation


def _mark(func: Any, attr: Any, names: frozenset[str]) -> None:
    def visit(op: Any) -> Any:
        if op.name in names:
            op.attributes["fastmath"] = attr
        return ir.WalkResult.ADVANCE

    func.walk(visit)


def correctly_rounded_sqrt(module: Any, flags_by_symbol: dict[str, str]) -> None:
    """`dsl.sqrt` on f32 (and f32 vectors) is IEEE `sqrt.rn`, as with nvcc's default and
    Python's math.sqrt: the `math.sqrt` op would become libdevice's `__nv_sqrtf`, which
    without the precise-sqrt reflection flag is `sqrt.approx`. Kernels with `fastmath=True`
    keep the approximation."""
    from dsl.frontend import ops

    for symbol, func in _kernels(module):
        if "afn" in flags_by_symbol.get(symbol, ""):
            continue
        found: list[Any] = []

        def visit(op: Any, found: list[Any] = found) -> Any:
            if op.name == "math.sqrt" and str(op.results[0].type) in ("f32", *_F32_VECTORS):
                found.append(op)
            return ir.WalkResult.ADVANCE

        func.walk(visit)
        for op in found:
            with ir.InsertionPoint(op), op.location:
                x = op.operands[0]
                if str(x.type) == "f32":
                    precise = _sqrt_rn(x)
                else:
                    lanes = ir.VectorType(x.type).shape[0]
                    precise = ops.vector_from_elements(
                        x.type, [_sqrt_rn(ops.vector_extract(x, k)) for k in range(lanes)])
            op.results[0].replace_all_uses_with(precise)
            op.erase()


_F32_VECTORS = tuple(f"vector<{n}xf32>" for n in (2, 4, 8, 16))


def _sqrt_rn(x: Any) -> Any:
    return ir.Operation.create(
        "llvm.call_intrinsic", results=[x.type], operands=[x],
        attributes={"intrin": ir.StringAttr.get("llvm.nvvm.sqrt.rn.f"),
                    "op_bundle_sizes": ir.DenseI32ArrayAttr.get([]),
                    "operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, 0])}).results[0]
