"""MLIR operations built by name, with the attributes their generated builders would set.

The generated dialect builders (`mlir.dialects.arith`, `gpu`, `llvm`, `scf`, ...) are large
Python modules: importing them costs about 40 ms in a fresh process, a quarter of a jit
function's first call. The tracer needs a few dozen ops, so it builds them here through
`ir.Operation.create`, which needs only the native bindings. Default-valued properties
(fastmath, overflow flags, memory ordering) are left to MLIR's defaults, as the builders do.

Everything emits at the current insertion point and location.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from mlir import ir
from mlir._mlir_libs import _mlir

# Enum cases as MLIR stores them (I64EnumAttr values from the dialects' .td files).
CMPF_PREDICATES = {"oeq": 1, "ogt": 2, "oge": 3, "olt": 4, "ole": 5, "one": 6, "ord": 7, "une": 13, "uno": 14}
CMPI_PREDICATES = {"eq": 0, "ne": 1, "slt": 2, "sle": 3, "sgt": 4, "sge": 5, "ult": 6, "ule": 7, "ugt": 8,
                   "uge": 9}
ATOMIC_BIN_OPS = {"xchg": 0, "add": 1, "sub": 2, "_and": 3, "nand": 4, "_or": 5, "_xor": 6, "max": 7, "min": 8,
                  "umax": 9, "umin": 10, "fadd": 11, "fsub": 12, "fmax": 13, "fmin": 14}
MONOTONIC = 2  # LLVM::AtomicOrdering::monotonic
ATOMIC_ORDERINGS = {"monotonic": 2, "acquire": 4, "release": 5, "acq_rel": 6, "seq_cst": 7}


_views_lock = threading.Lock()
_views_depth = 0
_saved_search_modules: list[str] = []


@contextlib.contextmanager
def generic_views() -> Iterator[None]:
    """While kdsl compiles, the bindings hand out generic ops, types and attributes.

    The first time the bindings return an op, type or attribute of a dialect, they import
    that dialect's generated Python module to give it a typed class (`!llvm.ptr` imports
    `mlir.dialects.llvm`, ~20 ms). kdsl needs none of those classes, so the search for them
    is switched off while it compiles. A module imported before (by the user) is still used.
    """
    global _views_depth, _saved_search_modules
    with _views_lock:
        if _views_depth == 0:
            _saved_search_modules = list(_mlir.globals.dialect_search_modules)
            _mlir.globals.dialect_search_modules = []
        _views_depth += 1
    try:
        yield
    finally:
        with _views_lock:
            _views_depth -= 1
            if _views_depth == 0:
                _mlir.globals.dialect_search_modules = _saved_search_modules


def create(name: str, results: Sequence[Any] = (), operands: Sequence[Any] = (),
           attributes: dict[str, Any] | None = None, regions: int = 0) -> ir.Operation:
    return ir.Operation.create(name, results=list(results), operands=list(operands), attributes=attributes,
                               regions=regions)


def value(name: str, result_type: Any, *operands: Any, **attributes: Any) -> ir.Value:
    """A one-result op."""
    return create(name, [result_type], operands, attributes or None).result


def same_type(name: str, *operands: Any) -> ir.Value:
    """An op whose result has its first operand's type (`arith.addf`, `math.sqrt`, ...)."""
    return value(name, operands[0].type, *operands)


def i64_attr(n: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), n)


def i32_attr(n: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(32), n)


@functools.lru_cache(maxsize=128)  # a few attributes per context, bounded as threads come and go
def _parsed_attribute(text: str, context: Any) -> ir.Attribute:
    return ir.Attribute.parse(text, context)


def parsed(text: str) -> ir.Attribute:
    """An attribute from its textual form, parsed once per context."""
    return _parsed_attribute(text, ir.Context.current)


# --- arith ---------------------------------------------------------------------------------

def constant(ty: Any, py: Any) -> ir.Value:
    """`arith.constant`: floats become FloatAttr, ints IntegerAttr, attributes stay as they are."""
    if isinstance(py, ir.Attribute):
        attr = py
    elif isinstance(py, float):
        attr = ir.FloatAttr.get(ty, py)
    else:
        attr = ir.IntegerAttr.get(ty, int(py))
    return value("arith.constant", ty, value=attr)


def _predicate_result_type(operand: Any) -> Any:
    i1 = ir.IntegerType.get_signless(1)
    if isinstance(operand.type, ir.VectorType):
        return ir.VectorType.get(ir.VectorType(operand.type).shape, i1)
    return i1


def cmpf(predicate: str, a: Any, b: Any) -> ir.Value:
    return value("arith.cmpf", _predicate_result_type(a), a, b, predicate=i64_attr(CMPF_PREDICATES[predicate]))


def cmpi(predicate: str, a: Any, b: Any) -> ir.Value:
    return value("arith.cmpi", _predicate_result_type(a), a, b, predicate=i64_attr(CMPI_PREDICATES[predicate]))


# --- vector --------------------------------------------------------------------------------

def vector_extract(vec: Any, position: int) -> ir.Value:
    element = ir.VectorType(vec.type).element_type
    return value("vector.extract", element, vec, static_position=ir.DenseI64ArrayAttr.get([position]))


def vector_from_elements(ty: Any, elements: Sequence[Any]) -> ir.Value:
    return value("vector.from_elements", ty, *elements)


def vector_bitcast(result_type: Any, vec: Any) -> ir.Value:
    """The same bits as another vector type (`vector<2xf16>` <-> `vector<1xi32>`)."""
    return value("vector.bitcast", result_type, vec)


# --- gpu -----------------------------------------------------------------------------------

def gpu_dimension(name: str, dim: str) -> ir.Value:
    """`gpu.thread_id x` and its kin (`name` is thread_id, block_id, block_dim or grid_dim)."""
    return value(f"gpu.{name}", ir.IndexType.get(), dimension=parsed(f"#gpu<dim {dim}>"))


# --- llvm ----------------------------------------------------------------------------------

GEP_DYNAMIC = -2147483648  # llvm.getelementptr's marker for "this index is an operand"


def llvm_gep(result_type: Any, base: Any, index: Any, elem_type: Any) -> ir.Value:
    """`llvm.getelementptr base[index]` over elements of `elem_type` (index is a value or an int)."""
    dynamic = [] if isinstance(index, int) else [index]
    raw = [index] if isinstance(index, int) else [GEP_DYNAMIC]
    return value("llvm.getelementptr", result_type, base, *dynamic, elem_type=ir.TypeAttr.get(elem_type),
                 rawConstantIndices=ir.DenseI32ArrayAttr.get(raw))


def llvm_load(result_type: Any, address: Any, alignment: int | None = None) -> ir.Value:
    attrs = {"alignment": i64_attr(alignment)} if alignment else {}
    return value("llvm.load", result_type, address, **attrs)


def llvm_store(stored: Any, address: Any, alignment: int | None = None) -> None:
    attrs = {"alignment": i64_attr(alignment)} if alignment else None
    create("llvm.store", operands=[stored, address], attributes=attrs)


def llvm_addressof(result_type: Any, symbol: str) -> ir.Value:
    return value("llvm.mlir.addressof", result_type, global_name=ir.FlatSymbolRefAttr.get(symbol))


def llvm_call_intrinsic(result_type: Any, intrinsic: str, args: Sequence[Any]) -> ir.Value:
    return value("llvm.call_intrinsic", result_type, *args, intrin=ir.StringAttr.get(intrinsic),
                 op_bundle_sizes=ir.DenseI32ArrayAttr.get([]),
                 operandSegmentSizes=ir.DenseI32ArrayAttr.get([len(args), 0]))


def llvm_global(array_type: Any, symbol: str, linkage: str, alignment: int, addr_space: int) -> ir.Operation:
    """A module-level `llvm.mlir.global` without an initializer (shared memory)."""
    return create("llvm.mlir.global", attributes={
        "global_type": ir.TypeAttr.get(array_type), "sym_name": ir.StringAttr.get(symbol),
        "linkage": parsed(f"#llvm.linkage<{linkage}>"), "alignment": i64_attr(alignment),
        "addr_space": i32_attr(addr_space)}, regions=1)


def llvm_atomicrmw(bin_op: str, address: Any, operand: Any, ordering: str = "monotonic",
                   syncscope: str | None = None) -> ir.Value:
    """A read-modify-write (relaxed unless told); returns the old value.

    `syncscope` is LLVM's NVPTX scope name ("block", "cluster", "device"; None = system).
    """
    attrs = {"bin_op": i64_attr(ATOMIC_BIN_OPS[bin_op]), "ordering": i64_attr(ATOMIC_ORDERINGS[ordering])}
    if syncscope:
        attrs["syncscope"] = ir.StringAttr.get(syncscope)
    return value("llvm.atomicrmw", operand.type, address, operand, **attrs)


def llvm_cmpxchg_old(address: Any, compare: Any, new: Any, ordering: str = "monotonic",
                     syncscope: str | None = None) -> ir.Value:
    """A compare-and-swap (relaxed unless told); returns the old value (element 0 of {old, ok}).

    The failure ordering is the load half of `ordering` (acquire for acquire and acq_rel).
    """
    failure = "acquire" if ordering in ("acquire", "acq_rel", "seq_cst") else "monotonic"
    attrs = {"success_ordering": i64_attr(ATOMIC_ORDERINGS[ordering]),
             "failure_ordering": i64_attr(ATOMIC_ORDERINGS[failure])}
    if syncscope:
        attrs["syncscope"] = ir.StringAttr.get(syncscope)
    pair_type = ir.Type.parse(f"!llvm.struct<({compare.type}, i1)>")
    pair = value("llvm.cmpxchg", pair_type, address, compare, new, **attrs)
    return value("llvm.extractvalue", compare.type, pair, position=ir.DenseI64ArrayAttr.get([0]))


def llvm_inline_asm(result_type: Any, asm: str, constraints: str, operands: Sequence[Any],
                    side_effects: bool = True) -> ir.Value:
    """Inline PTX; with side effects it is never moved, merged or dropped by LLVM."""
    attrs = {"has_side_effects": ir.UnitAttr.get()} if side_effects else {}
    return value("llvm.inline_asm", result_type, *operands, asm_string=ir.StringAttr.get(asm),
                 constraints=ir.StringAttr.get(constraints), **attrs)


# --- nvvm ----------------------------------------------------------------------------------

FULL_WARP = -1  # the member mask of all 32 lanes, as a signless i32


def nvvm_vote(kind: str, mask: Any, predicate: Any) -> ir.Value:
    """`vote.sync` (kind any, all, uni: i1; ballot: the i32 mask of lanes voting true)."""
    i = ir.IntegerType.get_signless(32 if kind == "ballot" else 1)
    return value("nvvm.vote.sync", i, mask, predicate, kind=parsed(f"#nvvm<vote_sync_kind {kind}>"))


def nvvm_match_any(mask: Any, operand: Any) -> ir.Value:
    """`match.any.sync` on an i32 or i64: the mask of lanes holding the same bits."""
    return value("nvvm.match.sync", ir.IntegerType.get_signless(32), mask, operand,
                 kind=parsed("#nvvm<match_sync_kind any>"))


def nvvm_redux(kind: str, operand: Any, mask: Any) -> ir.Value:
    """`redux.sync` on an i32 (kind add, min, max, umin, umax, and, or, xor); sm_80+."""
    return value("nvvm.redux.sync", operand.type, operand, mask, kind=parsed(f"#nvvm<redux_kind {kind}>"))


def nvvm_f32x2_to_f8x2(hi: Any, lo: Any, fp8_type: Any) -> ir.Value:
    """`cvt.rn.satfinite.{e4m3,e5m2}x2.f32`: an i16 holding `hi` in its upper byte, `lo` below."""
    return value("nvvm.convert.f32x2.to.f8x2", ir.IntegerType.get_signless(16), hi, lo,
                 dstTy=ir.TypeAttr.get(fp8_type), rnd=parsed("#nvvm.fp_rnd_mode<rn>"),
                 sat=parsed("#nvvm.sat_mode<satfinite>"), relu=ir.BoolAttr.get(False))


def nvvm_f8x2_to_f16x2(pair: Any, fp8_type: Any) -> ir.Value:
    """`cvt.rn.f16x2.{e4m3,e5m2}x2`: a vector<2xi8> of fp8 bits to vector<2xf16>, exactly."""
    return value("nvvm.convert.f8x2.to.f16x2", ir.VectorType.get([2], ir.F16Type.get()), pair,
                 srcType=ir.TypeAttr.get(fp8_type), relu=ir.BoolAttr.get(False))


# --- scf -----------------------------------------------------------------------------------

def scf_if(condition: Any, result_types: Sequence[Any], has_else: bool) -> ir.Operation:
    """`scf.if` with an empty then block (and else block); the caller adds the yields."""
    op = create("scf.if", result_types, [condition], regions=2)
    op.regions[0].blocks.append()
    if has_else:
        op.regions[1].blocks.append()
    return op


def scf_for(lower: Any, upper: Any, step: Any, inits: Sequence[Any]) -> ir.Operation:
    """`scf.for` whose body block takes the induction variable, then the carried values."""
    op = create("scf.for", [v.type for v in inits], [lower, upper, step, *inits], regions=1)
    op.regions[0].blocks.append(lower.type, *[v.type for v in inits])
    return op


def scf_while(types: Sequence[Any], inits: Sequence[Any]) -> ir.Operation:
    """`scf.while` with its two regions empty: the caller appends the before and after blocks."""
    return create("scf.while", types, inits, regions=2)


def scf_yield(values: Sequence[Any]) -> None:
    create("scf.yield", operands=values)
