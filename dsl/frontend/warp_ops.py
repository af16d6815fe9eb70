"""IR for warp-level intrinsics: shuffles of any value, votes, `match_any`, warp reductions.

The hardware shuffles 32-bit words. Narrower values (bool, 8 and 16 bits, fp8) are widened
to one word and narrowed back; 64-bit values and vectors are split into words, shuffled
word by word, and joined again, so the user moves f16, f64 or a `vector<8xbf16>` in one call.
Reductions are butterflies over `shfl.sync.bfly` (every lane gets the result); i32 and u32
over a whole warp use `redux.sync` (sm_80+), bool and/or a warp vote.
"""

from __future__ import annotations

from typing import Any

from mlir import ir

from dsl.frontend import arith as A
from dsl.frontend import math_ops, ops
from dsl.frontend.values import DSLTypeError, Scalar, Vector, type_name
from dsl.language.types import DType, boolean, i32, u32

Impl = Any
REDUCTIONS = ("sum", "max", "min", "and", "or", "xor")


def _i(bits: int) -> Any:
    return ir.IntegerType.get_signless(bits)


def _as_value(value: Any, what: str) -> Scalar | Vector:
    if isinstance(value, bool | int | float):
        value = A.to_scalar(value)
    if not isinstance(value, Scalar | Vector):
        raise DSLTypeError(f"{what} moves DSL scalars and vectors, got {type_name(value)}")
    if value.dtype.kind == "index":
        raise DSLTypeError(f"{what} of an index value; cast it to i32 or i64 first")
    if isinstance(value, Vector) and value.dtype.is_bool:
        raise DSLTypeError(f"{what} of a bool vector is not supported; move its lanes")
    return value


def to_words(value: Scalar | Vector) -> list[Any]:
    """The value as i32 words (the low word first)."""
    if isinstance(value, Vector):
        bits = value.dtype.bits * value.width
        if bits < 32:  # e.g. vector<2xi8>: one narrower integer, widened below
            word = ops.vector_extract(ops.vector_bitcast(ir.VectorType.get([1], _i(bits)), value.value), 0)
            return [ops.value("arith.extui", _i(32), word)]
        words = ops.vector_bitcast(ir.VectorType.get([bits // 32], _i(32)), value.value)
        return [ops.vector_extract(words, k) for k in range(bits // 32)]
    v, bits = value.value, value.dtype.bits
    if value.dtype.is_float and bits > 8:
        v = ops.value("arith.bitcast", _i(bits), v)
    if bits < 32:
        return [ops.value("arith.extui", _i(32), v)]
    if bits == 32:
        return [v]
    low = ops.value("arith.trunci", _i(32), v)
    high = ops.value("arith.trunci", _i(32), ops.same_type("arith.shrui", v, ops.constant(_i(64), 32)))
    return [low, high]


def from_words(words: list[Any], like: Scalar | Vector) -> Scalar | Vector:
    """The inverse of `to_words`, typed like `like`."""
    if isinstance(like, Vector):
        bits = like.dtype.bits * like.width
        if bits < 32:
            narrow = ops.value("arith.trunci", _i(bits), words[0])
            packed = ops.vector_from_elements(ir.VectorType.get([1], _i(bits)), [narrow])
        else:
            packed = ops.vector_from_elements(ir.VectorType.get([len(words)], _i(32)), words)
        return Vector(ops.vector_bitcast(like.value.type, packed), like.dtype, like.width)
    bits, ty = like.dtype.bits, like.value.type
    if bits < 32:
        v = ops.value("arith.trunci", _i(bits), words[0])
    elif bits == 32:
        v = words[0]
    else:
        low = ops.value("arith.extui", _i(64), words[0])
        high = ops.value("arith.extui", _i(64), words[1])
        v = ops.same_type("arith.ori", low, ops.same_type("arith.shli", high, ops.constant(_i(64), 32)))
    if v.type != ty:
        v = ops.value("arith.bitcast", ty, v)
    return Scalar(v, like.dtype)


def _width(width: Any) -> Any:
    if isinstance(width, bool) or (isinstance(width, int) and (width < 1 or width > 32 or width & (width - 1))):
        raise DSLTypeError(f"shuffle width must be a power of two from 1 to 32, not {width}")
    return width


_SHFL_KINDS = {"xor": "bfly", "up": "up", "down": "down", "idx": "idx"}


def _word_shuffle(mode: str, word: Any, offset: Any, width: Any) -> Any:
    """One 32-bit shuffle with CUDA's `width`: independent segments of `width` lanes.

    A whole warp is `gpu.shuffle`. For narrower segments `shfl.sync` is written directly:
    `gpu.shuffle`'s width means "only the first `width` lanes take part" (its member mask
    leaves the other lanes out), not CUDA's segments.
    """
    if width == 32:
        wid = A.constant(32, i32).value
        op = ops.create("gpu.shuffle", [word.type, _i(1)], [word, offset, wid],
                        {"mode": ops.parsed(f"#gpu<shuffle_mode {mode}>")})
        return op.results[0]
    wid = A.cast(A.to_scalar(width, i32), i32)
    segment = A.binary("LShift", A.binary("Sub", 32, wid), 8)  # c = segment mask << 8 | clamp
    clamp = segment if mode == "up" else A.binary("BitOr", segment, 31)
    return ops.value("nvvm.shfl.sync", _i(32), ops.constant(_i(32), ops.FULL_WARP), word, offset,
                     A.to_scalar(clamp, i32).value, kind=ops.parsed(f"#nvvm<shfl_kind {_SHFL_KINDS[mode]}>"))


def shuffle_value(mode: str, value: Scalar | Vector, offset: Any, width: Any) -> Scalar | Vector:
    off = A.cast(A.to_scalar(offset, i32), i32)
    width = _width(width)
    moved = [_word_shuffle(mode, word, off.value, width) for word in to_words(value)]
    return from_words(moved, value)


def shuffle(mode: str) -> Impl:
    def impl(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if len(args) < 2:
            raise DSLTypeError(f"dsl.shfl_{mode} takes a value and a lane offset")
        width = args[2] if len(args) > 2 else kwargs.get("width", 32)
        return shuffle_value(mode, _as_value(args[0], f"dsl.shfl_{mode}"), args[1], width)

    return impl


def _mask(kwargs: dict[str, Any], name: str) -> Any:
    extra = set(kwargs) - {"mask"}
    if extra:
        raise DSLTypeError(f"dsl.{name} has no argument '{sorted(extra)[0]}'")
    mask = kwargs.get("mask", 0xFFFFFFFF)
    if isinstance(mask, int) and not isinstance(mask, bool):
        if not 0 < mask <= 0xFFFFFFFF:
            raise DSLTypeError(f"dsl.{name} mask {mask:#x} is not a non-empty 32-bit lane mask")
        return A.constant(mask, u32).value
    if isinstance(mask, Scalar) and mask.dtype.is_int and mask.dtype.bits == 32:
        return mask.value
    raise DSLTypeError(f"dsl.{name} mask must be a 32-bit integer, got {type_name(mask)}")


def vote(kind: str, name: str) -> Impl:
    """`ballot` (u32 lane mask), `any` and `all` (bool) over the lanes of `mask`."""
    def impl(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if len(args) != 1:
            raise DSLTypeError(f"dsl.{name}(predicate, mask=0xFFFFFFFF) takes one predicate")
        mask = _mask(kwargs, name)
        predicate = args[0]
        if isinstance(predicate, bool | int | float):
            predicate = A.constant(bool(predicate), boolean)
        if isinstance(predicate, Vector):
            raise DSLTypeError(f"dsl.{name} needs a scalar predicate, got {type_name(predicate)}")
        result = ops.nvvm_vote(kind, mask, A.truth(predicate).value)
        return Scalar(result, u32 if kind == "ballot" else boolean)

    return impl


def match_any(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Scalar:
    """The u32 mask of the lanes (of `mask`) whose value has the same bits as this lane's."""
    if len(args) != 1:
        raise DSLTypeError("dsl.match_any(value, mask=0xFFFFFFFF) takes one value")
    mask = _mask(kwargs, "match_any")
    value = _as_value(args[0], "dsl.match_any")
    if isinstance(value, Vector):
        raise DSLTypeError(f"dsl.match_any needs a scalar, got {type_name(value)}")
    if value.dtype.bits <= 32:
        operand = to_words(value)[0]  # narrower values zero-extended: equal bits stay equal
    elif value.dtype.is_float:
        operand = ops.value("arith.bitcast", _i(64), value.value)
    else:
        operand = value.value
    return Scalar(ops.nvvm_match_any(mask, operand), u32)


_REDUX = {("sum", True): "add", ("sum", False): "add", ("max", True): "max", ("max", False): "umax",
          ("min", True): "min", ("min", False): "umin", ("and", True): "and", ("and", False): "and",
          ("or", True): "or", ("or", False): "or", ("xor", True): "xor", ("xor", False): "xor"}


def _combine(op: str, a: Any, b: Any) -> Any:
    if op in ("max", "min"):
        return math_ops.minmax(op)(None, [a, b], {})
    name = {"sum": "Add", "and": "BitAnd", "or": "BitOr", "xor": "BitXor"}[op]
    return A.binary(name, a, b)


def warp_reduce(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """`dsl.warp_reduce(value, op, width=32)`: every lane of each group gets the result."""
    if len(args) not in (2, 3) or set(kwargs) - {"width"}:
        raise DSLTypeError("dsl.warp_reduce(value, op, width=32) takes a value and an op name")
    value, op = args[0], args[1]
    width = args[2] if len(args) > 2 else kwargs.get("width", 32)
    if op not in REDUCTIONS:
        raise DSLTypeError(f"dsl.warp_reduce op must be one of {', '.join(map(repr, REDUCTIONS))}, not {op!r}")
    if not isinstance(width, int) or isinstance(width, bool):
        raise DSLTypeError(f"dsl.warp_reduce width must be a compile-time int, got {type_name(width)}")
    value = _as_value(value, "dsl.warp_reduce")
    dtype: DType = value.dtype
    if op in ("and", "or", "xor") and dtype.is_float:
        raise DSLTypeError(f"dsl.warp_reduce '{op}' needs integer or bool values, got {type_name(value)}")
    if op in ("sum", "max", "min") and dtype.is_bool:
        raise DSLTypeError(f"dsl.warp_reduce '{op}' on bool values; cast to an integer type first")
    if dtype.is_fp8:
        math_ops.floats("warp_reduce", value)  # the storage-type message
    _width(width)
    full = ops.constant(_i(32), ops.FULL_WARP)
    if width == 32 and isinstance(value, Scalar):
        if dtype.is_bool and op in ("and", "or"):
            return Scalar(ops.nvvm_vote("all" if op == "and" else "any", full, value.value), boolean)
        if dtype.is_int and dtype.bits == 32:
            return Scalar(ops.nvvm_redux(_REDUX[(op, dtype.is_signed)], value.value, full), dtype)
    offset = width // 2
    while offset >= 1:
        value = _combine(op, value, shuffle_value("xor", value, offset, width))
        offset //= 2
    return value
