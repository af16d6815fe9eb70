"""`llvm` and `nvvm` memory ops, intrinsics and the inline PTX the tracer writes.

Addresses (`getelementptr`), loads, stores, atomics and async copies go through
`memory`, which checks every access; a shared pointer cast to an integer is its shared
address. Of the inline PTX the tracer emits, the tensor-core, TMA, mbarrier and named-barrier
instructions are `tensor_core_ops`'; this module runs ordered/scoped atomics and the fp8
conversions, and refuses any other inline PTX, naming it.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import numpy as np

from dsl.interpreter import memory
from dsl.interpreter.lanes import Lanes
from dsl.interpreter.memory import Pointer
from dsl.interpreter.program import Maker, OpInfo, Refusal, Step
from dsl.interpreter.values import LaneType, flush_subnormal, from_bits, lane_type, to_bits

MAKERS: dict[str, Maker] = {}
GEP_DYNAMIC = -2147483648

_BIN_OPS = {0: "xchg", 1: "add", 2: "sub", 3: "and", 5: "or", 6: "xor", 7: "max", 8: "min", 9: "umax",
            10: "umin", 11: "fadd"}


def _size_of(text: str) -> int:
    """Bytes an element of this LLVM type takes in an array (its allocation size)."""
    m = re.fullmatch(r"!llvm\.array<(\d+) x (.+)>", text.strip())
    if m:
        return int(m.group(1)) * _size_of(m.group(2))
    t = lane_type(text)
    return t.nbytes * (t.width or 1)


def _element_of(text: str) -> str:
    m = re.fullmatch(r"!llvm\.array<(\d+) x (.+)>", text.strip())
    if m is None:
        raise TypeError(text)
    return m.group(2)


def _gep(info: OpInfo) -> Step:
    base, *dynamic = info.args
    (o,) = info.outs
    raw = list(info.attr("rawConstantIndices"))
    elem = str(info.attr("elem_type").value)
    scales, ty = [], elem
    try:
        for k in range(len(raw)):  # index 0 steps over whole elements, the next ones into arrays
            if k:
                ty = _element_of(ty)
            scales.append(_size_of(ty))
    except TypeError:
        raise info.refuse(f"addresses into {elem}") from None
    terms: list[tuple[int | None, int]] = []  # (operand slot or None, constant) per index
    it = iter(dynamic)
    for index in raw:
        terms.append((next(it), 0) if index == GEP_DYNAMIC else (None, int(index)))

    def step(st: Lanes) -> None:
        ptr: Pointer = st.v[base]
        delta: Any = 0
        for (slot, constant), scale in zip(terms, scales):
            index = np.asarray(st.v[slot], dtype=np.int64) if slot is not None else constant
            delta = delta + index * scale
        st.v[o] = ptr.advanced(np.asarray(delta, dtype=np.int64))

    return step


def _alignment(info: OpInfo, t: LaneType) -> int:
    align = info.int_attr("alignment")
    natural = t.nbytes * (t.width or 1)
    return align if align else natural


def _load(info: OpInfo) -> Step:
    (address,), (o,) = info.args, info.outs
    t = info.out_types[0]
    if t.kind not in ("int", "float"):
        raise info.refuse(f"loads of {t.name}")
    align = _alignment(info, t)

    def step(st: Lanes) -> None:
        st.v[o] = memory.load(st.v[address], t, align, st.mask, st.n)

    return step


def _store(info: OpInfo) -> Step:
    value, address = info.args
    t = info.arg_types[0]
    if t.kind not in ("int", "float"):
        raise info.refuse(f"stores of {t.name}")
    align = _alignment(info, t)

    def step(st: Lanes) -> None:
        memory.store(st.v[address], st.v[value], t, align, st.mask, st.n)

    return step


def _addressof(info: OpInfo) -> Step:
    (o,) = info.outs
    symbol = info.attr("global_name").value
    if symbol not in info.builder.shared:
        raise info.refuse(f"the address of '{symbol}', which is not a shared array")
    info.builder.uses_shared = True
    zero = np.asarray(0, dtype=np.int64)

    def step(st: Lanes) -> None:
        st.v[o] = Pointer(st.shared[symbol], zero)

    return step


def _atomicrmw(info: OpInfo) -> Step:
    address, operand = info.args
    (o,) = info.outs
    kind = _BIN_OPS.get(info.int_attr("bin_op"))  # type: ignore[arg-type]
    if kind is None:
        raise info.refuse(f"atomic operation {info.attr('bin_op')}")
    t = info.out_types[0]

    def step(st: Lanes) -> None:
        st.v[o] = memory.atomic(st.v[address], kind, st.v[operand], t, st.mask, st.n)

    return step


def _cmpxchg(info: OpInfo) -> Step:
    address, compare, new = info.args
    (o,) = info.outs
    t = info.arg_types[1]

    def step(st: Lanes) -> None:
        cmp = st.v[compare]
        old = memory.atomic(st.v[address], "cas", st.v[new], t, st.mask, st.n, compare=cmp)
        st.v[o] = (old, old == np.asarray(cmp))

    return step


def _extractvalue(info: OpInfo) -> Step:
    (value,), (o,) = info.args, info.outs
    position = list(info.attr("position"))
    if len(position) != 1:
        raise info.refuse("nested struct positions")
    k = int(position[0])

    def step(st: Lanes) -> None:
        st.v[o] = st.v[value][k]

    return step


MAKERS.update({"llvm.getelementptr": _gep, "llvm.load": _load, "llvm.store": _store,
               "llvm.mlir.addressof": _addressof, "llvm.atomicrmw": _atomicrmw, "llvm.cmpxchg": _cmpxchg,
               "llvm.extractvalue": _extractvalue})


def _ptrtoint(info: OpInfo) -> Step:
    """A shared pointer as its 32-bit shared address (what mbarriers, `ldmatrix`, TMA and wgmma
    descriptors take); any other pointer as an integer is refused."""
    (p,), (o,) = info.args, info.outs
    if info.arg_types[0].space != 3 or info.out_types[0].name not in ("i32", "i64"):
        raise Refusal(f"the interpreter cannot run '{info.name}': a pointer used as an integer address",
                      info.where, secondary=True)
    storage = np.int32 if info.out_types[0].name == "i32" else np.int64

    def step(st: Lanes) -> None:
        ptr = st.v[p]
        st.v[o] = (ptr.region.address + np.asarray(ptr.offset, dtype=np.int64)).astype(storage)

    return step


MAKERS["llvm.ptrtoint"] = _ptrtoint


def _debug_value(info: OpInfo) -> Step:
    """A device-debug build's variable record (`dsl.frontend.debug_info`): nothing to run."""
    return lambda st: None


MAKERS["llvm.intr.dbg.value"] = _debug_value


# --- intrinsics -------------------------------------------------------------------------------

def _call_intrinsic(info: OpInfo) -> Step:
    name = info.attr("intrin").value
    (o,) = info.outs
    args = info.args
    if name in ("llvm.nvvm.ex2.approx.ftz.f", "llvm.nvvm.lg2.approx.ftz.f"):
        fn = np.exp2 if "ex2" in name else np.log2

        def approx(st: Lanes) -> None:  # computed in float64: within the instruction's 2 ulp
            x = flush_subnormal(np.asarray(st.v[args[0]], dtype=np.float32))
            st.v[o] = flush_subnormal(fn(x.astype(np.float64)).astype(np.float32))

        return approx
    if name == "llvm.nvvm.sqrt.rn.f":
        def sqrt(st: Lanes) -> None:
            st.v[o] = np.sqrt(np.asarray(st.v[args[0]], dtype=np.float32))

        return sqrt
    raise info.refuse(f"the intrinsic {name}")


MAKERS["llvm.call_intrinsic"] = _call_intrinsic


# --- async copies -----------------------------------------------------------------------------

def _cp_async(info: OpInfo) -> Step:
    """`cp.async`: copied at once (a valid schedule: the data is there by the wait). With a
    source size (the tracer's `mask=`), a lane copying 0 bytes zero-fills without reading."""
    dst, src, *rest = info.args
    size = int(info.int_attr("size") or 0)
    chunk = LaneType("int", "i8", 8, size)

    def step(st: Lanes) -> None:
        if not rest:
            memory.copy(st.v[dst], st.v[src], size, st.mask, st.n)
            return
        n = np.broadcast_to(np.asarray(st.v[rest[0]]), (st.n,))
        active = st.active()
        if (active & (n != 0) & (n != size)).any():
            raise NotImplementedError("cp.async copying part of a chunk")
        memory.copy(st.v[dst], st.v[src], size, active & (n == size), st.n)
        memory.store(st.v[dst], np.zeros((1, size), dtype=np.int8), chunk, size, active & (n == 0), st.n)

    return step


def _no_op(info: OpInfo) -> Step:
    def step(st: Lanes) -> None:
        return None

    return step


MAKERS["nvvm.cp.async.shared.global"] = _cp_async
MAKERS["nvvm.cp.async.commit.group"] = _no_op  # copies complete at once: every wait is satisfied
MAKERS["nvvm.cp.async.wait.group"] = _no_op


# --- fp8 conversions --------------------------------------------------------------------------

@functools.cache
def _fp8_tables(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(finite non-negative values ascending, their codes, f16 value of every code)."""
    from dsl.frontend import fp8
    from dsl.language.types import f8e4m3, f8e5m2

    dtype = f8e4m3 if name == "e4m3" else f8e5m2
    values, codes = fp8._finite(dtype)
    decoded = np.array([fp8.decode(c, dtype) for c in range(256)], dtype=np.float16)
    return np.asarray(values), np.asarray(codes, dtype=np.int64), decoded


def encode_fp8(x: Any, name: str) -> np.ndarray:
    """`cvt.rn.satfinite.<e4m3|e5m2>x2.f32` for one lane of values: nearest, ties to even, saturating."""
    values, codes, _ = _fp8_tables(name)
    x = np.asarray(x, dtype=np.float64)
    a = np.abs(x)
    k = np.clip(np.searchsorted(values, a, side="right") - 1, 0, len(values) - 2)
    below, above = a - values[k], values[k + 1] - a
    up = (above < below) | ((above == below) & (codes[k] % 2 == 1))
    code = np.where(up, codes[k + 1], codes[k])
    code = np.where(a >= values[-1], codes[-1], code)
    code = np.where(np.signbit(x), code | 0x80, code)
    return np.where(np.isnan(x), 0x7F, code).astype(np.int64)


def _fp8_name(info: OpInfo, attr: str) -> str:
    text = str(info.attr(attr).value)
    if "E4M3" in text:
        return "e4m3"
    if "E5M2" in text:
        return "e5m2"
    raise info.refuse(f"conversions to {text}")


def _to_f8x2(info: OpInfo) -> Step:
    hi, lo = info.args
    (o,) = info.outs
    name = _fp8_name(info, "dstTy")
    if info.attr("relu") is not None and info.attr("relu").value:
        raise info.refuse("the relu form")

    def step(st: Lanes) -> None:
        pair = (encode_fp8(st.v[hi], name) << 8) | encode_fp8(st.v[lo], name)
        st.v[o] = pair.astype(np.uint16).view(np.int16)

    return step


def _from_f8x2(info: OpInfo) -> Step:
    (pair,), (o,) = info.args, info.outs
    name = _fp8_name(info, "srcType")

    def step(st: Lanes) -> None:
        _, _, decoded = _fp8_tables(name)
        st.v[o] = decoded[np.asarray(st.v[pair]).view(np.uint8).astype(np.int64)]

    return step


MAKERS["nvvm.convert.f32x2.to.f8x2"] = _to_f8x2
MAKERS["nvvm.convert.f8x2.to.f16x2"] = _from_f8x2


# --- inline PTX -------------------------------------------------------------------------------

_ATOM = re.compile(r"atom(?:\.\w+\.\w+)?\.(global|shared)\.(add|min|max|exch|and|or|xor)(\.noftz)?\.(\w+) "
                   r"\$0, \[\$1\], \$2;")
_CVT_TO_F8 = re.compile(r"cvt\.rn\.satfinite\.(e4m3|e5m2)x2\.f32 \$0, \$1, \$2;")
_CVT_FROM_F8 = re.compile(r"cvt\.rn\.f16x2\.(e4m3|e5m2)x2 \$0, \$1;")
_ATOM_TYPES = {  # PTX type -> (interpreter type of the operand's meaning, width of the packed pair)
    "u32": ("i32", 0), "s32": ("i32", 0), "b32": ("i32", 0), "u64": ("i64", 0), "s64": ("i64", 0),
    "b64": ("i64", 0), "f32": ("f32", 0), "f64": ("f64", 0), "f16": ("f16", 0), "bf16": ("bf16", 0),
    "f16x2": ("f16", 2), "bf16x2": ("bf16", 2),
}


def _inline_asm(info: OpInfo) -> Step:
    from dsl.interpreter.tensor_core_ops import inline_asm_step

    asm = info.attr("asm_string").value
    text = " ".join(asm.split())
    found = inline_asm_step(info, text)
    if found is not None:
        return found
    if m := _ATOM.fullmatch(text):
        return _asm_atomic(info, m.group(2), m.group(4))
    if m := _CVT_TO_F8.fullmatch(text):
        return _asm_to_f8(info, m.group(1))
    if m := _CVT_FROM_F8.fullmatch(text):
        return _asm_from_f8(info, m.group(1))
    raise Refusal(f"the interpreter cannot run the inline PTX `{text[:80]}`; run this kernel on a GPU", info.where)


def _asm_atomic(info: OpInfo, op: str, ptx_type: str) -> Step:
    address, operand = info.args
    (o,) = info.outs
    bits_type = info.out_types[0]
    if ptx_type not in _ATOM_TYPES:
        raise info.refuse(f"atom type .{ptx_type}")
    name, pair = _ATOM_TYPES[ptx_type]
    meaning = lane_type(f"vector<{pair}x{name}>" if pair else name)
    signed = ptx_type.startswith("s")
    kind = {"exch": "xchg", "add": "fadd" if meaning.kind == "float" else "add"}.get(op, op)
    if op in ("min", "max") and not signed:
        kind = "u" + op

    def step(st: Lanes) -> None:
        raw = np.ascontiguousarray(np.broadcast_to(to_bits(st.v[operand], bits_type), (st.n,)))
        value = from_bits(raw.view(meaning.storage).reshape((st.n, pair) if pair else (st.n,)), meaning)
        old = memory.atomic(st.v[address], kind, value, meaning, st.mask, st.n)
        back = np.ascontiguousarray(to_bits(old, meaning)).view(bits_type.storage).reshape(st.n)
        st.v[o] = from_bits(back, bits_type)

    return step


def _asm_to_f8(info: OpInfo, name: str) -> Step:
    hi, lo = info.args
    (o,) = info.outs

    def step(st: Lanes) -> None:
        pair = (encode_fp8(st.v[hi], name) << 8) | encode_fp8(st.v[lo], name)
        st.v[o] = pair.astype(np.uint16).view(np.int16)

    return step


def _asm_from_f8(info: OpInfo, name: str) -> Step:
    (bits,), (o,) = info.args, info.outs

    def step(st: Lanes) -> None:
        _, _, decoded = _fp8_tables(name)
        codes = np.asarray(st.v[bits]).astype(np.int16).view(np.uint16).astype(np.int64)
        halves = np.stack([decoded[codes & 0xFF], decoded[codes >> 8]], axis=-1)
        st.v[o] = np.ascontiguousarray(halves).view(np.int32)[..., 0]

    return step


MAKERS["llvm.inline_asm"] = _inline_asm
