"""Conversions, bit casts and short vectors on lanes, as the PTX `cvt` instructions do them.

Integer widening sign- or zero-extends, narrowing wraps; int-to-float and float-to-float
conversions round once to nearest even (bf16 and f16 included); float-to-int truncates toward
zero and saturates, NaN becoming 0 (`cvt.rzi`). Bit casts reinterpret the bytes, vectors by
their lanes in memory order (lane 0 in the low bytes). Vectors are `(lanes, width)` arrays.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dsl.interpreter.lanes import Lanes
from dsl.interpreter.program import Maker, OpInfo, Step, registrar, unary
from dsl.interpreter.values import (
    as_unsigned,
    convert_float,
    float_to_int,
    flush_subnormal,
    from_bits,
    int_to_float,
    to_bits,
)

MAKERS: dict[str, Maker] = {}
_maker = registrar(MAKERS)


@_maker("arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast", "arith.index_castui")
def _int_cast(info: OpInfo) -> Step:
    src, dst = info.arg_types[0], info.out_types[0]
    zero_extend = info.name in ("arith.extui", "arith.index_castui")
    if dst.bits == 1:
        return unary(info, lambda x: (np.asarray(x) & 1).astype(bool))
    if src.bits == 1:
        if zero_extend:
            return unary(info, lambda x: np.asarray(x).astype(dst.np))
        return unary(info, lambda x: np.where(x, -1, 0).astype(dst.np))
    if dst.bits > src.bits and zero_extend:
        return unary(info, lambda x: as_unsigned(x, src).astype(dst.unsigned).view(dst.np))
    return unary(info, lambda x: np.asarray(x).astype(dst.np))  # sign-extends or wraps


@_maker("arith.sitofp", "arith.uitofp")
def _to_float(info: OpInfo) -> Step:
    src, dst = info.arg_types[0], info.out_types[0]
    unsigned = info.name == "arith.uitofp"
    return unary(info, lambda x: int_to_float(x, src, dst, unsigned))


@_maker("arith.fptosi", "arith.fptoui")
def _to_int(info: OpInfo) -> Step:
    src, dst = info.arg_types[0], info.out_types[0]
    unsigned = info.name == "arith.fptoui"
    ftz = info.flushes(src)
    return unary(info, lambda x: float_to_int(flush_subnormal(x) if ftz else x, src, dst, unsigned))


@_maker("arith.extf", "arith.truncf")
def _float_cast(info: OpInfo) -> Step:
    src, dst = info.arg_types[0], info.out_types[0]
    ftz = info.flushes(src) or info.flushes(dst)
    if ftz:
        return unary(info, lambda x: flush_subnormal(convert_float(flush_subnormal(x), dst)))
    return unary(info, lambda x: convert_float(x, dst))


@_maker("arith.bitcast", "vector.bitcast")
def _bitcast(info: OpInfo) -> Step:
    src, dst = info.arg_types[0], info.out_types[0]
    if src.kind == "ptr" or dst.kind == "ptr":
        raise info.refuse("bit casts of pointers")

    def cast(x: Any) -> Any:
        raw = np.asarray(to_bits(x, src))
        if raw.ndim:  # a vector: its lanes' bytes in a row, read as the other lane type
            raw = np.ascontiguousarray(raw)
        return from_bits(raw.view(dst.storage), dst)

    return unary(info, cast)


# --- vectors ----------------------------------------------------------------------------------

@_maker("vector.broadcast")
def _broadcast(info: OpInfo) -> Step:
    src, dst = info.arg_types[0], info.out_types[0]
    width = dst.width
    if src.width:
        return unary(info, lambda x: np.asarray(x).copy())

    def spread(x: Any) -> Any:
        x = np.asarray(x)
        return np.repeat(x.reshape(-1, 1), width, axis=1)  # (lanes, w), or (1, w) when uniform

    return unary(info, spread)


@_maker("vector.extract")
def _extract(info: OpInfo) -> Step:
    if len(info.args) != 1:
        raise info.refuse("extracting at a run-time position")
    position = list(info.attr("static_position"))
    if len(position) != 1:
        raise info.refuse("multi-dimensional vectors")
    k = int(position[0])

    def extract(x: Any) -> Any:
        x = np.asarray(x)
        return x[0, k] if x.shape[0] == 1 else x[:, k]

    return unary(info, extract)


@_maker("vector.from_elements")
def _from_elements(info: OpInfo) -> Step:
    args, (o,) = info.args, info.outs

    def step(st: Lanes) -> None:
        parts = [np.asarray(st.v[a]) for a in args]
        if all(p.ndim == 0 for p in parts):
            st.v[o] = np.stack(parts)[None, :]
        else:
            st.v[o] = np.stack(np.broadcast_arrays(*parts), axis=1)

    return step
