"""IR for the atomics: add, min, max and compare-and-swap, with memory order and scope.

Each takes `order` ("relaxed", "acquire", "release", "acq_rel") and `scope` ("block",
"cluster", "device", "system"); the default, relaxed at device scope, is CUDA's `atomicAdd`.
How each is built:

- The default add, min and max are `llvm.atomicrmw`, which NVPTX turns into one `atom`
  (f16 add: `atom.add.noftz.f16`, sm_70+; bf16: `atom.add.noftz.bf16` on sm_90, a CAS loop
  before). Another order or scope is inline PTX, `atom.<order>.<scope>.<space>.<op>`: this
  LLVM's NVPTX backend drops the ordering and scope of `atomicrmw` (seen in its PTX).
- Packed pairs (`vector<2xf16>`, `vector<2xbf16>` at an even index) are one
  `atom.add.noftz.f16x2` / `.bf16x2` (bf16x2 needs sm_90; before, LLVM's CAS loop).
- f32 and f64 min and max are exact with one integer atomic: the float's bits order like a
  signed integer when its sign is clear and like a reversed unsigned integer when set, so
  max is a signed max for values with the sign clear and an unsigned min otherwise (min the
  mirror image). -0.0 counts as less than +0.0. A NaN argument is stored as a NaN (bits
  0x7FFFFFFF for max, 0xFFFFFFFF for min) that later values never replace: NaN propagates,
  as in `torch.amax`. Start the target from -inf / +inf or a real value, not a NaN.
- compare-and-swap is `llvm.cmpxchg`, which keeps order and scope (`atom.<order>.<scope>.cas`);
  on floats it compares bits.
"""

from __future__ import annotations

from typing import Any

from mlir import ir

from dsl.frontend import arith as A
from dsl.frontend import memory, ops
from dsl.frontend.values import DSLTypeError, Scalar, SharedArray, TensorRef, Vector, type_name
from dsl.language.types import DType, bf16, boolean, f16

ORDERS = {"relaxed": "monotonic", "acquire": "acquire", "release": "release", "acq_rel": "acq_rel"}
SCOPES = {"block": ("cta", "block"), "cluster": ("cluster", "cluster"), "device": ("gpu", "device"),
          "system": ("sys", None)}  # name -> (PTX scope, LLVM syncscope)
_CONSTRAINT = {16: "h", 32: "r", 64: "l"}


def _i(bits: int) -> Any:
    return ir.IntegerType.get_signless(bits)


class _Site:
    """Where an atomic acts and how: address, state space, order and scope."""

    def __init__(self, tracer: Any, name: str, ref: Any, index: Any, order: Any, scope: Any):
        if not isinstance(ref, TensorRef | SharedArray):
            raise DSLTypeError(f"{name} needs a tensor or shared array, got {type_name(ref)}")
        if order not in ORDERS:
            raise DSLTypeError(f"{name} order must be one of {', '.join(map(repr, ORDERS))}, not {order!r}")
        if scope not in SCOPES:
            raise DSLTypeError(f"{name} scope must be one of {', '.join(map(repr, SCOPES))}, not {scope!r}")
        target = getattr(tracer, "target", None)
        if scope == "cluster" and target is not None and target.compute_capability < (9, 0):
            raise DSLTypeError(f"scope='cluster' needs sm_90 or newer; the target is {target.name}")
        self.name, self.ref, self.order, self.scope, self.target = name, ref, order, scope, target
        self.space = "shared" if isinstance(ref, SharedArray) else "global"
        self.index = index
        self.address = memory.address(ref, index)

    @property
    def default(self) -> bool:
        return self.order == "relaxed" and self.scope == "device"

    @property
    def sm90(self) -> bool:
        return self.target is None or self.target.compute_capability >= (9, 0)

    def rmw(self, bin_op: str, operand: Any) -> Any:
        return ops.llvm_atomicrmw(bin_op, self.address, operand, ORDERS[self.order], SCOPES[self.scope][1])

    def asm(self, op_type: str, bits_value: Any) -> Any:
        """`atom[.order.scope].<space>.<op_type> d, [address], bits` on a value's raw bits."""
        qualifiers = "" if self.default else f".{self.order}.{SCOPES[self.scope][0]}"
        c = _CONSTRAINT[ir.IntegerType(bits_value.type).width]
        return ops.llvm_inline_asm(bits_value.type, f"atom{qualifiers}.{self.space}.{op_type} $0, [$1], $2;",
                                   f"={c},l,{c},~{{memory}}", [self.address, bits_value])


def _split(name: str, args: list[Any], kwargs: dict[str, Any], values: int) -> tuple[list[Any], Any, Any]:
    """(ref, index, values...), order, scope from positional or keyword arguments."""
    extra = set(kwargs) - {"order", "scope"}
    if extra:
        raise DSLTypeError(f"dsl.{name} has no argument '{sorted(extra)[0]}'")
    fixed = 2 + values
    if not fixed <= len(args) <= fixed + 2:
        what = "ref, index, compare, value" if values == 2 else "ref, index, value"
        raise DSLTypeError(f"dsl.{name}({what}, order='relaxed', scope='device') takes {fixed} values")
    rest = args[fixed:] + [None, None]
    order = kwargs.get("order", rest[0] if rest[0] is not None else "relaxed")
    scope = kwargs.get("scope", rest[1] if rest[1] is not None else "device")
    return args[:fixed], order, scope


def _operand(site: _Site, value: Any) -> Scalar:
    dtype = site.ref.dtype
    value = A.to_scalar(value, dtype)
    if value.dtype != dtype:
        raise DSLTypeError(f"{site.name} of {value.dtype.name} on {type_name(site.ref)}; "
                           f"cast with dsl.cast(value, dsl.{dtype.name})")
    return value


def _bits(value: Any, dtype: DType) -> Any:
    return ops.value("arith.bitcast", _i(dtype.bits), value) if dtype.is_float else value


def _unbits(value: Any, dtype: DType) -> Any:
    return ops.value("arith.bitcast", dtype.mlir_type(), value) if dtype.is_float else value


def _packed_add(site: _Site, value: Vector) -> Vector:
    if value.width != 2 or value.dtype not in (f16, bf16) or value.dtype != site.ref.dtype:
        raise DSLTypeError(f"{site.name} of a vector adds packed pairs: vector<2xf16> or vector<2xbf16> into "
                           f"a tensor of that type, got {type_name(value)} on {type_name(site.ref)}")
    last = site.index[-1] if isinstance(site.index, tuple | list) else site.index
    if isinstance(last, int) and last % 2:
        raise DSLTypeError(f"{site.name} of a pair needs an even (4-byte aligned) index, not {last}")
    if value.dtype == bf16 and not site.sm90:  # no bf16x2 atom before sm_90
        return Vector(site.rmw("fadd", value.value), value.dtype, 2)
    word = ops.vector_extract(ops.vector_bitcast(ir.VectorType.get([1], _i(32)), value.value), 0)
    old = site.asm(f"add.noftz.{value.dtype.name}x2", word)
    pair = ops.vector_bitcast(value.value.type, ops.vector_from_elements(ir.VectorType.get([1], _i(32)), [old]))
    return Vector(pair, value.dtype, 2)


def _int_rmw(site: _Site, kind: str, signed: bool, operand: Any, bits: int) -> Any:
    """Integer add / min / max on raw bits (i32 or i64)."""
    if site.default:
        return site.rmw(kind if kind == "add" or signed else f"u{kind}", operand)
    ptx = "u" if kind == "add" or not signed else "s"
    return site.asm(f"{kind}.{ptx}{bits}", operand)


def _float_minmax(site: _Site, kind: str, value: Scalar) -> Any:
    dtype, bits = value.dtype, value.dtype.bits
    ity = _i(bits)
    nan = (1 << (bits - 1)) - 1 if kind == "max" else -1
    raw = ops.value("arith.select", ity, ops.cmpf("uno", value.value, value.value), ops.constant(ity, nan),
                    _bits(value.value, dtype))
    sign_clear = ops.cmpi("sge", raw, ops.constant(ity, 0))
    branch = ops.scf_if(sign_clear, [ity], has_else=True)
    other = "min" if kind == "max" else "max"
    for block, (k, signed) in zip((branch.regions[0].blocks[0], branch.regions[1].blocks[0]),
                                  ((kind, True), (other, False))):
        with ir.InsertionPoint(block):
            ops.scf_yield([_int_rmw(site, k, signed, raw, bits)])
    return _unbits(branch.results[0], dtype)


def atomic(kind: str) -> Any:
    name = f"atomic_{kind}"

    def impl(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        (ref, index, value), order, scope = _split(name, args, kwargs, 1)
        site = _Site(tracer, f"dsl.{name}", ref, index, order, scope)
        if isinstance(value, Vector):
            if kind != "add":
                raise DSLTypeError(f"dsl.{name} takes a scalar, got {type_name(value)}")
            return _packed_add(site, value)
        value = _operand(site, value)
        dtype = value.dtype
        if dtype.is_bool or dtype.kind == "index" or dtype.is_fp8:
            raise DSLTypeError(f"dsl.{name} is not supported for {dtype.name}")
        if dtype.is_int:
            if dtype.bits not in (32, 64):
                raise DSLTypeError(f"dsl.{name} needs 32- or 64-bit integers, not {dtype.name}")
            return Scalar(_int_rmw(site, kind, dtype.is_signed, value.value, dtype.bits), dtype)
        if kind != "add":
            if dtype.bits not in (32, 64):
                raise DSLTypeError(f"dsl.{name} on floats needs f32 or f64, not {dtype.name}")
            return Scalar(_float_minmax(site, kind, value), dtype)
        if site.default or (dtype == bf16 and not site.sm90):
            return Scalar(site.rmw("fadd", value.value), dtype)
        op_type = f"add.noftz.{dtype.name}" if dtype.bits == 16 else f"add.{dtype.name}"
        return Scalar(_unbits(site.asm(op_type, _bits(value.value, dtype)), dtype), dtype)

    return impl


def atomic_cas(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Scalar:
    (ref, index, compare, value), order, scope = _split("atomic_cas", args, kwargs, 2)
    site = _Site(tracer, "dsl.atomic_cas", ref, index, order, scope)
    dtype = ref.dtype
    if dtype.bits not in (32, 64) or dtype.kind == "index" or dtype == boolean:
        raise DSLTypeError(f"dsl.atomic_cas needs 32- or 64-bit elements, not {dtype.name}")
    cmp, new = _operand(site, compare), _operand(site, value)
    old = ops.llvm_cmpxchg_old(site.address, _bits(cmp.value, dtype), _bits(new.value, dtype),
                               ORDERS[order], SCOPES[scope][1])
    return Scalar(_unbits(old, dtype), dtype)
