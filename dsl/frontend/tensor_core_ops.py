"""IR for tensor cores and the memory movers that feed them (`dsl/language/tensor_cores.py`).

Warp MMA, `ldmatrix`, wgmma, TMA, mbarriers and `setmaxnreg` are emitted as inline PTX: the
instruction a kernel author names is the instruction the PTX holds, with operands the
fragments' 32-bit words. `cp.async` is the NVVM op (an LLVM intrinsic), so the launcher's
alignment facts (`dsl/compiler/access.py`) see its global reads. Every emitter checks its
operands first (fragment widths and dtypes, alignment, swizzle, the target) and raises a
`DSLTypeError` that the tracer reports at the call.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from mlir import ir

from dsl.frontend import arith as A
from dsl.frontend import memory, ops
from dsl.frontend.values import DSLTargetError, DSLTypeError, Scalar, SharedArray, TensorRef, Vector, type_name
from dsl.frontend.warp_ops import to_words
from dsl.language import tensor_cores as T
from dsl.language.types import DType, bf16, f8e4m3, f8e5m2, f16, f32, i8, i32, u8, u16, u64

Impl = Any
WGMMA_TARGET = "sm_90a"
_SWIZZLE_MODE = {128: 1, 64: 2, 32: 3}  # the wgmma descriptor's layout type


def _i(bits: int) -> Any:
    return ir.IntegerType.get_signless(bits)


def bind(surface: Any, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments by parameter name, as Python would bind them to `surface`."""
    try:
        bound = inspect.signature(surface).bind(*args, **kwargs)
    except TypeError as err:
        raise DSLTypeError(f"dsl.{surface.__name__}(): {err}") from None
    bound.apply_defaults()
    return dict(bound.arguments)


def _static_int(value: Any, what: str, allowed: tuple[int, ...] | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DSLTypeError(f"{what} must be a compile-time int, not {type_name(value)}")
    if allowed is not None and value not in allowed:
        raise DSLTypeError(f"{what} must be one of {', '.join(map(str, allowed))}, not {value}")
    return value


def _require_cc(tracer: Any, what: str, major: int, minor: int) -> None:
    target = tracer.target
    if target.compute_capability < (major, minor):
        raise DSLTypeError(f"{what} needs sm_{major}{minor} or newer; the target is {target.name}")


def _require_arch_specific(tracer: Any, what: str) -> None:
    """wgmma and setmaxnreg exist only in the architecture-specific sm_90a."""
    if tracer.target.name != WGMMA_TARGET:
        raise DSLTargetError(f"{what} needs the target {WGMMA_TARGET} (Hopper's architecture-specific "
                             f"instructions); the target is {tracer.target.name}", WGMMA_TARGET)


def asm(results: list[Any], text: str, constraints: str, operands: list[Any]) -> list[Any]:
    """Inline PTX with any number of results (an LLVM struct when more than one)."""
    if not results:
        ops.create("llvm.inline_asm", operands=operands, attributes={
            "asm_string": ir.StringAttr.get(text), "constraints": ir.StringAttr.get(constraints),
            "has_side_effects": ir.UnitAttr.get()})
        return []
    if len(results) == 1:
        return [ops.llvm_inline_asm(results[0], text, constraints, operands)]
    struct = ir.Type.parse(f"!llvm.struct<({', '.join(str(t) for t in results)})>")
    packed = ops.llvm_inline_asm(struct, text, constraints, operands)
    return [ops.value("llvm.extractvalue", t, packed, position=ir.DenseI64ArrayAttr.get([k]))
            for k, t in enumerate(results)]


def _regs(first: int, count: int) -> str:
    return "{" + ", ".join(f"${k}" for k in range(first, first + count)) + "}"


def _lanes(vec: Vector) -> list[Any]:
    return [ops.vector_extract(vec.value, k) for k in range(vec.width)]


def _vector(dtype: DType, elements: list[Any]) -> Vector:
    ty = ir.VectorType.get([len(elements)], dtype.mlir_type())
    return Vector(ops.vector_from_elements(ty, elements), dtype, len(elements))


def _from_words(dtype: DType, words: list[Any]) -> Vector:
    """A vector of `dtype` made of i32 words (the low element first)."""
    width = len(words) * 32 // dtype.bits
    packed = ops.vector_from_elements(ir.VectorType.get([len(words)], _i(32)), words)
    return Vector(ops.vector_bitcast(ir.VectorType.get([width], dtype.mlir_type()), packed), dtype, width)


def shared_address(ref: Any, index: Any, what: str, align: int, pitch: int | None = None) -> Any:
    """The 32-bit shared-memory address of `ref[index]`, refused when it cannot be `align`-aligned
    (`pitch`: the bytes between the addresses a run-time index selects; default a row)."""
    if not isinstance(ref, SharedArray):
        raise DSLTypeError(f"{what} needs a shared array, got {type_name(ref)}")
    _check_alignment(ref, index, what, align, pitch)
    pointer = memory.address(ref, index)
    return ops.value("llvm.ptrtoint", _i(32), pointer)


def _check_alignment(ref: Any, index: Any, what: str, align: int, pitch: int | None = None) -> None:
    """Static parts of an address that break `align`: the pitch, a static offset, the array's."""
    row_bytes = ref.shape[-1] * ref.dtype.nbytes if ref.shape else ref.dtype.nbytes
    if pitch is None and len(ref.shape) > 1 and row_bytes % align:
        raise DSLTypeError(f"{what} needs {align}-byte aligned addresses, but the rows of {type_name(ref)} are "
                           f"{row_bytes} bytes; pad the inner extent to a multiple of "
                           f"{align // ref.dtype.nbytes} elements")
    if pitch is not None and pitch % align:
        raise DSLTypeError(f"{what} needs {align}-byte aligned tiles, but the tiles of {type_name(ref)} are "
                           f"{pitch} bytes apart")
    offset = memory.element_offset(ref, index)
    if isinstance(offset, int) and (offset * ref.dtype.nbytes) % align:
        raise DSLTypeError(f"{what} at element offset {offset} of {type_name(ref)} is not {align}-byte aligned")
    if isinstance(ref, SharedArray) and ref.align < align:
        raise DSLTypeError(f"{what} needs {align}-byte aligned shared memory; allocate the array with "
                           f"align={align}")


# ----- warp-level MMA ----------------------------------------------------------------------

_PTX_TYPE = {f16: "f16", bf16: "bf16", i8: "s8", u8: "u8", f8e4m3: "e4m3", f8e5m2: "e5m2", f32: "f32", i32: "s32"}


def _mma_shape(a: Vector, b: Vector, c: Vector, tracer: Any) -> str:
    """The m16n8kK shape for these fragments, or a DSLTypeError that says what fits."""
    if a.dtype != b.dtype and not {a.dtype, b.dtype} <= {i8, u8} and not {a.dtype, b.dtype} <= {f8e4m3, f8e5m2}:
        raise DSLTypeError(f"dsl.mma_sync multiplies fragments of one input type; got {type_name(a)} and "
                           f"{type_name(b)}")
    if a.dtype in (f16, bf16):
        want = ((8, 4, 4), "m16n8k16", (f32,) + ((f16,) if a.dtype == f16 else ()))
    elif a.dtype in (i8, u8):
        want = ((16, 8, 4), "m16n8k32", (i32,))
    elif a.dtype in (f8e4m3, f8e5m2):
        _require_cc(tracer, "dsl.mma_sync on fp8", 8, 9)
        want = ((16, 8, 4), "m16n8k32", (f32,))
    else:
        raise DSLTypeError(f"dsl.mma_sync takes f16, bf16, i8, u8 or fp8 fragments, not {type_name(a)}")
    (wa, wb, wc), shape, accumulators = want
    if (a.width, b.width, c.width) != (wa, wb, wc) or c.dtype not in accumulators:
        names = " or ".join(f"vector<{wc}x{t.name}>" for t in accumulators)
        raise DSLTypeError(
            f"dsl.mma_sync {shape} with {a.dtype.name} inputs takes A vector<{wa}x{a.dtype.name}>, "
            f"B vector<{wb}x{b.dtype.name}> and C {names}; got A {type_name(a)}, B {type_name(b)}, C {type_name(c)}")
    return shape


def mma_sync(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Vector:
    got = bind(T.mma_sync, args, kwargs)
    a, b, c = got["a"], got["b"], got["c"]
    for name, v in (("a", a), ("b", b), ("c", c)):
        if not isinstance(v, Vector):
            raise DSLTypeError(f"dsl.mma_sync operand {name} must be a fragment (a vector), not {type_name(v)}")
    _require_cc(tracer, "dsl.mma_sync", 8, 0)
    shape = _mma_shape(a, b, c, tracer)
    a_words, b_words = to_words(a), to_words(b)
    if c.dtype == f16:  # f16 accumulators travel as two f16x2 words
        c_ops, d_types, d_code = to_words(c), [_i(32)] * 2, "r"
    else:
        c_ops, d_types, d_code = _lanes(c), [c.dtype.mlir_type()] * 4, "f" if c.dtype == f32 else "r"
    nd, na, nb = len(d_types), len(a_words), len(b_words)
    types = ".".join(_PTX_TYPE[t] for t in (c.dtype, a.dtype, b.dtype, c.dtype))
    text = (f"mma.sync.aligned.{shape}.row.col.{types} {_regs(0, nd)}, {_regs(nd, na)}, {_regs(nd + na, nb)}, "
            f"{_regs(nd + na + nb, len(c_ops))};")
    constraints = ",".join([f"={d_code}"] * nd + ["r"] * (na + nb) + [d_code] * len(c_ops))
    d = asm(d_types, text, constraints, a_words + b_words + c_ops)
    return _from_words(f16, d) if c.dtype == f16 else _vector(c.dtype, d)


def ldmatrix(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Vector:
    got = bind(T.ldmatrix, args, kwargs)
    smem, count, transpose = got["smem"], got["count"], got["transpose"]
    _require_cc(tracer, "dsl.ldmatrix", 7, 5)
    count = _static_int(count, "dsl.ldmatrix count", (1, 2, 4))
    if not isinstance(transpose, bool):
        raise DSLTypeError("dsl.ldmatrix transpose must be a compile-time bool")
    _ldmatrix_elements(smem, transpose)
    address = shared_address(smem, got["index"], "dsl.ldmatrix", 16)
    text = (f"ldmatrix.sync.aligned.m8n8.x{count}{'.trans' if transpose else ''}.shared.b16 "
            f"{_regs(0, count)}, [${count}];")
    words = asm([_i(32)] * count, text, ",".join(["=r"] * count + ["r"]), [address])
    return _from_words(smem.dtype, words)


def _ldmatrix_elements(smem: Any, transpose: bool) -> None:
    """ldmatrix moves 8x8 matrices of 16-bit elements, one 16-byte row per lane address. On
    8-bit data each row is 16 elements and lane `l` receives bytes 4 (l % 4).. of row l // 4:
    exactly the m16n8k32 A fragment (and B stored N x K), so 8-bit arrays load as they are.
    Transposing moves 16-bit elements, which would keep pairs of bytes together: refused."""
    if not isinstance(smem, SharedArray) or smem.dtype.bits not in (8, 16):
        hint = ("; to move its bytes as 16-bit elements, view it: `.view(dsl.u16)`"
                if isinstance(smem, SharedArray) and not smem.dtype.is_bool else "")
        raise DSLTypeError(f"dsl.ldmatrix loads 16-bit or 8-bit elements from a shared array, not "
                           f"{type_name(smem)}{hint}")
    if transpose and smem.dtype.bits == 8:
        raise DSLTypeError(f"dsl.ldmatrix transpose=True moves 16-bit elements, so it cannot transpose the 8-bit "
                           f"{type_name(smem)}; mma_sync m16n8k32 takes B stored N x K (K contiguous), which "
                           "ldmatrix loads untransposed")


def cp_async(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    got = bind(T.cp_async, args, kwargs)
    dst, src, mask = got["dst"], got["src"], got["mask"]
    _require_cc(tracer, "dsl.cp_async", 8, 0)
    size = _static_int(got["size"], "dsl.cp_async size", (4, 8, 16))
    if not isinstance(src, TensorRef):
        raise DSLTypeError(f"dsl.cp_async copies from a global tensor, not {type_name(src)}")
    if not isinstance(dst, SharedArray):
        raise DSLTypeError(f"dsl.cp_async copies into a shared array, not {type_name(dst)}")
    if dst.dtype.bits != src.dtype.bits:
        raise DSLTypeError(f"dsl.cp_async from {type_name(src)} into {type_name(dst)}: the element types differ; "
                           f"view one as the other's type: `{src.name}.view(dsl.{dst.dtype.name})` (the tensor) or "
                           f"`.view(dsl.{src.dtype.name})` on the shared array")
    if size % src.dtype.nbytes:
        raise DSLTypeError(f"dsl.cp_async of {size} bytes is not a whole number of {src.dtype.name} elements")
    _check_alignment(dst, got["dst_index"], "dsl.cp_async", size)
    src_offset = memory.element_offset(src, got["src_index"])
    if isinstance(src_offset, int) and (src_offset * src.dtype.nbytes) % size:
        raise DSLTypeError(f"dsl.cp_async source at element offset {src_offset} is not {size}-byte aligned")
    operands = [memory.address(dst, got["dst_index"]), memory.address(src, got["src_index"])]
    if mask is not True:
        if isinstance(mask, bool):  # a compile-time False copies nothing: zero-fill
            operands.append(ops.constant(_i(32), 0))
        else:
            m = A.to_scalar(mask)
            if not m.dtype.is_bool:
                raise DSLTypeError(f"dsl.cp_async mask must be a bool, not {m.dtype.name}")
            operands.append(ops.value("arith.select", _i(32), m.value, ops.constant(_i(32), size),
                                      ops.constant(_i(32), 0)))
    cache = "cg" if size == 16 else "ca"  # 16 bytes may bypass L1
    ops.create("nvvm.cp.async.shared.global", operands=operands, attributes={
        "size": ops.i32_attr(size), "modifier": ops.parsed(f"#nvvm<load_cache_modifier {cache}>")})


def cp_async_commit(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    bind(T.cp_async_commit, args, kwargs)
    ops.create("nvvm.cp.async.commit.group")


def cp_async_wait(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    pending = _static_int(bind(T.cp_async_wait, args, kwargs)["pending"], "dsl.cp_async_wait pending")
    ops.create("nvvm.cp.async.wait.group", attributes={"n": ops.i32_attr(pending)})


def zeros(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Vector:
    got = bind(T.zeros, args, kwargs)
    dtype, width = got["dtype"], _static_int(got["width"], "dsl.zeros width")
    if not isinstance(dtype, DType) or width < 1:
        raise DSLTypeError("dsl.zeros(dtype, width) needs a DSL scalar type and a positive width")
    ty = ir.VectorType.get([width], dtype.mlir_type())
    zero = ir.FloatAttr.get(dtype.mlir_type(), 0.0) if dtype.is_float and not dtype.is_fp8 else \
        ir.IntegerAttr.get(dtype.mlir_type(), 0)
    return Vector(ops.constant(ty, ir.DenseElementsAttr.get_splat(ty, zero)), dtype, width)


# ----- mbarriers and fences ----------------------------------------------------------------

def _barrier_address(tracer: Any, bar: Any, index: Any, what: str) -> Any:
    _require_cc(tracer, what, 9, 0)
    if not isinstance(bar, SharedArray) or bar.dtype not in (u64,):
        raise DSLTypeError(f"{what} needs mbarriers: a shared u64 array, not {type_name(bar)}")
    return shared_address(bar, index, what, 8)


def _u32(value: Any, what: str) -> Any:
    v = A.to_scalar(value, i32)
    if not v.dtype.is_int or v.dtype.bits > 32:
        raise DSLTypeError(f"{what} must be a 32-bit integer, not {type_name(value)}")
    return v.value if v.dtype.bits == 32 else ops.value("arith.extui", _i(32), v.value)


def mbarrier_init(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    got = bind(T.mbarrier_init, args, kwargs)
    address = _barrier_address(tracer, got["bar"], got["index"], "dsl.mbarrier_init")
    asm([], "mbarrier.init.shared::cta.b64 [$0], $1;", "r,r", [address, _u32(got["count"], "the count")])


def mbarrier_arrive(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    got = bind(T.mbarrier_arrive, args, kwargs)
    address = _barrier_address(tracer, got["bar"], got["index"], "dsl.mbarrier_arrive")
    if got["cta"] is None:
        asm([], "mbarrier.arrive.shared::cta.b64 _, [$0];", "r", [address])
    else:  # the same barrier in another block of the cluster
        asm([], "{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, $0, $1;\n"
                "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n}", "r,r",
            [address, _u32(got["cta"], "the block's rank")])


def named_barrier(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    _named_barrier(tracer, bind(T.named_barrier, args, kwargs), "dsl.named_barrier", "bar.sync")


def named_barrier_arrive(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    _named_barrier(tracer, bind(T.named_barrier_arrive, args, kwargs), "dsl.named_barrier_arrive", "bar.arrive")


def _named_barrier(tracer: Any, got: dict[str, Any], name: str, instruction: str) -> None:
    barrier_id = got["barrier_id"]
    threads = _static_int(got["threads"], f"{name} threads")
    if threads <= 0 or threads % 32 or threads > tracer.target.max_threads_per_block:
        raise DSLTypeError(f"{name} threads must be a positive multiple of 32, not {threads}")
    if isinstance(barrier_id, int) and not isinstance(barrier_id, bool):
        if not 1 <= barrier_id <= 15:
            raise DSLTypeError(f"{name} id must be 1 to 15 (0 is dsl.barrier()), not {barrier_id}")
        asm([], f"{instruction} {barrier_id}, {threads};", "", [])
    else:  # a run-time id (one per warpgroup): it must be warp-uniform
        asm([], f"{instruction} $0, {threads};", "r", [_u32(barrier_id, "the barrier id")])


def cluster_rank(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Scalar:
    bind(T.cluster_rank, args, kwargs)
    _require_cc(tracer, "dsl.cluster_rank", 9, 0)
    return Scalar(asm([_i(32)], "mov.u32 $0, %cluster_ctarank;", "=r", [])[0], i32)


def mbarrier_expect_tx(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    got = bind(T.mbarrier_expect_tx, args, kwargs)
    address = _barrier_address(tracer, got["bar"], got["index"], "dsl.mbarrier_expect_tx")
    asm([], "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,r",
        [address, _u32(got["nbytes"], "the transaction bytes")])


def mbarrier_wait(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    got = bind(T.mbarrier_wait, args, kwargs)
    address = _barrier_address(tracer, got["bar"], got["index"], "dsl.mbarrier_wait")
    asm([], "{\n.reg .pred done;\nwait:\nmbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1;\n"
            "@!done bra wait;\n}", "r,r", [address, _u32(got["parity"], "the parity")])


def _no_args(surface: Any, text: str, cc: tuple[int, int] = (9, 0)) -> Impl:
    def impl(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
        bind(surface, args, kwargs)
        _require_cc(tracer, f"dsl.{surface.__name__}", *cc)
        asm([], text, "", [])

    return impl


# ----- TMA ---------------------------------------------------------------------------------

def _tensor_map(value: Any, what: str) -> Any:
    from dsl.frontend.values import TensorMapRef

    if not isinstance(value, TensorMapRef):
        raise DSLTypeError(f"{what} needs a dsl.TensorMap kernel parameter, not {type_name(value)}")
    return value


def _tma_coords(tmap: Any, coords: Any, what: str) -> list[Any]:
    items = list(coords) if isinstance(coords, tuple | list) else [coords]
    if len(items) != tmap.rank:
        raise DSLTypeError(f"{what} takes {tmap.rank} coordinates for a rank-{tmap.rank} tensor map, got {len(items)}")
    return [_u32(c, "a TMA coordinate") for c in reversed(items)]  # PTX lists the innermost first


def _tma_tile(tmap: Any, smem: Any, index: Any, what: str) -> Any:
    """The shared-memory address of the box, checked against the map's box and swizzle.

    `index` names the dimensions of `smem` before the box's (the box fills the rest), or
    every dimension: then the box starts there and must be a contiguous run of the array
    (its inner extents the array's, its outer one fitting from the index on)."""
    if not isinstance(smem, SharedArray):
        raise DSLTypeError(f"{what} needs a shared array, got {type_name(smem)}")
    box = tuple(tmap.box)
    while len(box) > 1 and box[0] == 1:  # a box one element deep in its outer dimensions is a tile of the rest
        box = box[1:]
    items = list(index) if isinstance(index, tuple | list) else [index]
    inner = tuple(smem.shape[len(smem.shape) - len(box) + 1:])
    whole = len(items) == len(smem.shape)
    fits = (tuple(smem.shape[-len(box):]) == box if not whole else
            inner == box[1:] and smem.shape[-len(box)] >= box[0])
    if not fits or smem.dtype.bits != tmap.dtype.bits:
        raise DSLTypeError(f"{what}: the tensor map moves {tmap.dtype.name} boxes of {list(box)}, but "
                           f"{type_name(smem)} does not end in that shape")
    if smem.swizzle != tmap.swizzle:
        raise DSLTypeError(f"{what}: the tensor map is {_swizzle_name(tmap.swizzle)} but {type_name(smem)} is "
                           f"{_swizzle_name(smem.swizzle)}; allocate it with swizzle={tmap.swizzle}")
    if not whole and len(items) != len(smem.shape) - len(box):
        raise DSLTypeError(f"{what}: index the leading {len(smem.shape) - len(box)} dimension(s) of "
                           f"{type_name(smem)} (the box fills the rest), got {len(items)} index(es)")
    start = items[-len(box)] if whole else 0
    if whole and isinstance(start, int) and start + box[0] > smem.shape[-len(box)]:
        raise DSLTypeError(f"{what}: a box of {box[0]} rows from row {start} does not fit {type_name(smem)}")
    row_bytes = smem.dtype.nbytes
    for b in box[1:]:
        row_bytes *= b
    full = items if whole else [*items, *([0] * len(box))]
    return shared_address(smem, tuple(full), what, max(128, 8 * tmap.swizzle), pitch=row_bytes * (
        8 if whole else box[0]))


def _swizzle_name(swizzle: int) -> str:
    return f"{swizzle}-byte swizzled" if swizzle else "not swizzled"


def tma_load(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    got = bind(T.tma_load, args, kwargs)
    _require_cc(tracer, "dsl.tma_load", 9, 0)
    tmap = _tensor_map(got["tmap"], "dsl.tma_load")
    dst = _tma_tile(tmap, got["dst"], got["dst_index"], "dsl.tma_load")
    coords = _tma_coords(tmap, got["coords"], "dsl.tma_load")
    bar = _barrier_address(tracer, got["bar"], got["bar_index"], "dsl.tma_load")
    n = len(coords)
    operands = [dst, tmap.ptr, *coords, bar]
    where = "{" + ", ".join(f"${k + 2}" for k in range(n)) + "}"
    multicast = got["multicast"]
    if multicast is None:
        text = (f"cp.async.bulk.tensor.{n}d.shared::cluster.global.mbarrier::complete_tx::bytes "
                f"[$0], [$1, {where}], [${n + 2}];")
        constraints = ",".join(["r", "l"] + ["r"] * n + ["r"])
    else:
        mask = A.cast(A.to_scalar(multicast, u16), u16)
        text = (f"cp.async.bulk.tensor.{n}d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
                f"[$0], [$1, {where}], [${n + 2}], ${n + 3};")
        operands.append(mask.value)
        constraints = ",".join(["r", "l"] + ["r"] * n + ["r", "h"])
    asm([], text, constraints, operands)


def tma_store(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    got = bind(T.tma_store, args, kwargs)
    _require_cc(tracer, "dsl.tma_store", 9, 0)
    tmap = _tensor_map(got["tmap"], "dsl.tma_store")
    _bulk_from_shared(tmap, got, "dsl.tma_store", "cp.async.bulk.tensor.{n}d.global.shared::cta.bulk_group")


def _bulk_from_shared(tmap: Any, got: dict[str, Any], what: str, instruction: str) -> None:
    """A bulk tensor copy (`instruction`, `{n}` its rank) of `got`'s shared `src` tile to `coords`."""
    src = _tma_tile(tmap, got["src"], got["src_index"], what)
    coords = _tma_coords(tmap, got["coords"], what)
    n = len(coords)
    where = "{" + ", ".join(f"${k + 1}" for k in range(n)) + "}"
    asm([], f"{instruction.format(n=n)} [$0, {where}], [${n + 1}];", ",".join(["l"] + ["r"] * n + ["r"]),
        [tmap.ptr, *coords, src])


TMA_REDUCTIONS = {"add": ("f32", "i32", "u32"), "min": ("i32", "u32"), "max": ("i32", "u32")}  # op -> map types


def tma_reduce(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    got = bind(T.tma_reduce, args, kwargs)
    _require_cc(tracer, "dsl.tma_reduce", 9, 0)
    tmap = _tensor_map(got["tmap"], "dsl.tma_reduce")
    op = got["op"]
    if not isinstance(op, str) or op not in TMA_REDUCTIONS:
        raise DSLTypeError(f"dsl.tma_reduce op must be one of {', '.join(map(repr, TMA_REDUCTIONS))}, not {op!r}")
    if tmap.dtype.name not in TMA_REDUCTIONS[op]:
        *most, last = TMA_REDUCTIONS[op]
        raise DSLTypeError(f"dsl.tma_reduce {op!r} takes a tensor map of {', '.join(most)} or {last}, "
                           f"not of {tmap.dtype.name}")
    _bulk_from_shared(tmap, got, "dsl.tma_reduce",
                      "cp.reduce.async.bulk.tensor.{n}d.global.shared::cta." + op + ".tile.bulk_group")


def tma_store_wait(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    pending = _static_int(bind(T.tma_store_wait, args, kwargs)["pending"], "dsl.tma_store_wait pending")
    _require_cc(tracer, "dsl.tma_store_wait", 9, 0)
    asm([], f"cp.async.bulk.wait_group.read {pending};", "", [])


# ----- wgmma -------------------------------------------------------------------------------

@dataclass
class _Tile:
    """A wgmma operand in shared memory: its descriptor, the descriptor's advance per step of K
    (32 bytes of a K-major row: 16 elements of 16 bits, 32 of 8), how many such steps it
    holds, and the rows (M or N) it covers."""

    desc: Any
    advance: int
    k_steps: int
    extent: int


def _descriptor_bits(address: Any, leading: int, stride: int) -> Any:
    """The i64 descriptor: start address, leading and stride byte offsets (16-byte units), and
    the 128-byte swizzle mode; the base offset is 0 because tiles start on 1024-byte atoms."""
    start = ops.value("arith.extui", _i(64), ops.same_type("arith.shrui", ops.same_type(
        "arith.andi", address, ops.constant(_i(32), 0x3FFFF)), ops.constant(_i(32), 4)))
    fixed = ((leading >> 4) << 16) | ((stride >> 4) << 32) | (_SWIZZLE_MODE[128] << 62)
    return ops.same_type("arith.ori", start, ops.constant(_i(64), fixed - (1 << 64) if fixed >= 1 << 63 else fixed))


_WGMMA_TILES = (f16, bf16, f8e4m3, f8e5m2, i8, u8)
_FP8, _INT8 = (f8e4m3, f8e5m2), (i8, u8)


def _k_per_step(dtype: DType) -> int:
    """K of one wgmma instruction: 32 bytes of a row, k16 for 16-bit types and k32 for 8-bit."""
    return 32 // dtype.nbytes


def _swizzled_tile(smem: Any, what: str, dims: int) -> None:
    """A shared array wgmma can read: one of its element types, 128-byte swizzled."""
    if not isinstance(smem, SharedArray) or smem.dtype not in _WGMMA_TILES:
        raise DSLTypeError(f"{what} multiplies f16, bf16, fp8 (f8e4m3, f8e5m2) or 8-bit integer (i8, u8) tiles in "
                           f"shared memory, not {type_name(smem)}")
    if smem.swizzle != 128 or len(smem.shape) < dims:
        raise DSLTypeError(f"{what} reads tiles with a 128-byte swizzle; allocate {type_name(smem)} "
                           f"with swizzle=128 (rows of {128 // smem.dtype.nbytes} elements)")


def _lead(smem: SharedArray, lead: Any, count: int, what: str) -> list[Any]:
    items = list(lead) if isinstance(lead, tuple | list) else [lead]
    if len(items) != count:
        raise DSLTypeError(f"{what}: give the indices of the first {count} dimension(s) of {type_name(smem)} "
                           f"where the tile starts, got {len(items)}")
    return items


def _k_major(smem: Any, lead: Any, what: str) -> _Tile:
    """A tile stored [rows][K] (K contiguous, 128 bytes per swizzled row): `lead` indexes every
    dimension but the last, its last entry the first row (a multiple of 8, a swizzle atom)."""
    _swizzled_tile(smem, what, 2)
    items = _lead(smem, lead, len(smem.shape) - 1, what)
    row = items[-1]
    if isinstance(row, int) and row % 8:
        raise DSLTypeError(f"{what}: a tile must start on a multiple of 8 rows (a swizzle atom), not row {row}")
    address = shared_address(smem, (*items, 0), what, 1024, pitch=1024)
    rows = smem.shape[-2] - row if isinstance(row, int) else smem.shape[-2]
    # K-major: 8-row atoms 1024 bytes apart; a step of K moves 32 bytes within the swizzled row
    return _Tile(_descriptor_bits(address, 16, 1024), 2, smem.shape[-1] // _k_per_step(smem.dtype), rows)


def _mn_major(smem: Any, lead: Any, what: str) -> _Tile:
    """A B tile stored [K][N] (N contiguous) as (..., N / 64, K, 64): 64-column chunks of K rows,
    each 128-byte swizzled; `lead` indexes the dimensions before those three. 16-bit only: the
    8-bit wgmma has no transpose (its operands are K-major)."""
    _swizzled_tile(smem, what, 3)
    if smem.dtype.bits == 8:
        raise DSLTypeError(f"{what}: 8-bit wgmma reads K-major tiles only (no transpose for {smem.dtype.name}); "
                           f"store B as N x K (K contiguous) and pass b_major='k'")
    items = _lead(smem, lead, len(smem.shape) - 3, what)
    k_rows = smem.shape[-2]
    if k_rows % 16:
        raise DSLTypeError(f"{what}: an N-major tile has K rows in steps of 16, not {k_rows}")
    address = shared_address(smem, (*items, 0, 0, 0), what, 1024, pitch=1024)
    # MN-major: the next 64 columns are a chunk further (leading), the next 8 K rows an atom
    # further (stride); a step of K moves 16 rows
    return _Tile(_descriptor_bits(address, k_rows * 128, 1024), 16 * 128 >> 4, k_rows // 16, smem.shape[-3] * 64)


def _operand_family(dtype: DType) -> str:
    return "fp8" if dtype in _FP8 else "8-bit integer" if dtype in _INT8 else dtype.name


def _pair(a: DType, b: DType, acc: DType, a_what: str, b_what: str) -> None:
    """A and B of one wgmma: one 16-bit type, or two fp8 types, or two 8-bit integer types; and
    the accumulator that goes with them (f32, or i32 for integers)."""
    if a != b and not ({a, b} <= set(_FP8) or {a, b} <= set(_INT8)):
        raise DSLTypeError(f"dsl.wgmma multiplies tiles of one type (f16 or bf16), two fp8 types or two 8-bit "
                           f"integer types; got {a_what} and {b_what}")
    want = i32 if b in _INT8 else f32
    if acc != want:
        raise DSLTypeError(f"dsl.wgmma on {_operand_family(b)} tiles accumulates into an {want.name} vector "
                           f"(vector<N/2x{want.name}>), not vector<...x{acc.name}>")


def wgmma(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Vector:
    got = bind(T.wgmma, args, kwargs)
    _require_arch_specific(tracer, "dsl.wgmma")
    tracer.wgmma_issued = True  # the kernel's reads of accumulators are checked (`wgmma_groups`)
    acc, a, b, b_major = got["acc"], got["a"], got["b"], got["b_major"]
    if not isinstance(acc, Vector) or acc.dtype not in (f32, i32):
        raise DSLTypeError(f"dsl.wgmma accumulates into an f32 vector (vector<N/2xf32>; i32 for 8-bit integer "
                           f"tiles), not {type_name(acc)}")
    n = 2 * acc.width
    if n % 8 or not 8 <= n <= 256:
        raise DSLTypeError(f"dsl.wgmma: the accumulator {type_name(acc)} means N={n}; N must be a multiple of 8 "
                           f"from 8 to 256 (vector<4x{acc.dtype.name}> to vector<128x{acc.dtype.name}>)")
    if b_major not in ("k", "n"):
        raise DSLTypeError(f"dsl.wgmma b_major is 'k' (B stored N x K) or 'n' (K x N), not {b_major!r}")
    b_tile = (_k_major if b_major == "k" else _mn_major)(b, got["b_index"], "dsl.wgmma (B)")
    if b_tile.extent < n:
        raise DSLTypeError(f"dsl.wgmma: the accumulator means an N={n} B tile, but {type_name(b)} holds only "
                           f"{b_tile.extent} there")
    k_step = _k_per_step(b.dtype)
    if isinstance(a, Vector):  # A in registers: 4 words per thread and step of K (8 16-bit or 16 8-bit elements)
        if got["a_index"] is not None:
            raise DSLTypeError("dsl.wgmma with A in registers (a vector) takes a_index=None")
        _pair(a.dtype, b.dtype, acc.dtype, type_name(a), type_name(b))
        per_step = 128 // a.dtype.bits
        if a.dtype.bits != b.dtype.bits or a.width != per_step * b_tile.k_steps:
            raise DSLTypeError(f"dsl.wgmma: the B tile has K={k_step * b_tile.k_steps}, so A in registers is "
                               f"vector<{(128 // b.dtype.bits) * b_tile.k_steps}x{b.dtype.name}>, not {type_name(a)}")
        words = to_words(a)
        a_tile = None
    else:
        a_tile = _k_major(a, got["a_index"], "dsl.wgmma (A)")
        _pair(a.dtype, b.dtype, acc.dtype, type_name(a), type_name(b))
        if a_tile.extent < 64:
            raise DSLTypeError(f"dsl.wgmma: the A tile is 64 rows, but only {a_tile.extent} remain in {type_name(a)}")
        if a_tile.k_steps != b_tile.k_steps:
            raise DSLTypeError(f"dsl.wgmma: A has K={k_step * a_tile.k_steps} but B has K={k_step * b_tile.k_steps}")
    lanes = _lanes(acc)
    m = len(lanes)
    one = ops.constant(_i(32), 1)  # scale-d: D = A x B + D
    a_kind = _PTX_TYPE[a.dtype]
    shape = (f"wgmma.mma_async.sync.aligned.m64n{n}k{k_step}.{_PTX_TYPE[acc.dtype]}.{a_kind}."
             f"{_PTX_TYPE[b.dtype]}")
    # the immediates after scale-d: 16-bit types have imm-scale-a/b and the transposes (trans-a
    # only with A in shared memory), fp8 the scales only, integers none
    if b.dtype in _INT8:
        immediates, a_reg_immediates = "", ""
    elif b.dtype in _FP8:
        immediates = a_reg_immediates = ", 1, 1"
    else:
        trans_b = int(b_major == "n")
        immediates, a_reg_immediates = f", 1, 1, 0, {trans_b}", f", 1, 1, {trans_b}"
    code = "f" if acc.dtype == f32 else "r"
    tied = [str(k) for k in range(m)]
    asm([], "wgmma.fence.sync.aligned;", "", [])
    for step in range(b_tile.k_steps):
        db = _advanced(b_tile, step)
        if a_tile is None:
            text = (f"{{\n.reg .pred p;\nsetp.ne.b32 p, ${m + 5}, 0;\n{shape} {_regs(0, m)}, {_regs(m, 4)}, "
                    f"${m + 4}, p{a_reg_immediates};\n}}")
            operands, constraints = [*words[4 * step:4 * step + 4], db, one], ["r"] * 4 + ["l", "r"]
        else:
            text = (f"{{\n.reg .pred p;\nsetp.ne.b32 p, ${m + 2}, 0;\n{shape} {_regs(0, m)}, ${m}, ${m + 1}, "
                    f"p{immediates};\n}}")
            operands, constraints = [_advanced(a_tile, step), db, one], ["l", "l", "r"]
        lanes = asm([acc.dtype.mlir_type()] * m, text, ",".join([f"={code}"] * m + constraints + tied),
                    [*operands, *lanes])
    asm([], "wgmma.commit_group.sync.aligned;", "", [])
    return _vector(acc.dtype, lanes)


def _advanced(tile: _Tile, step: int) -> Any:
    if not step:
        return tile.desc
    return ops.same_type("arith.addi", tile.desc, ops.constant(_i(64), step * tile.advance))


def wgmma_wait(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    got = bind(T.wgmma_wait, args, kwargs)
    _require_arch_specific(tracer, "dsl.wgmma_wait")
    pending = _static_int(got["pending"], "dsl.wgmma_wait pending")
    acc = got["acc"]
    many = isinstance(acc, tuple | list)
    accs = list(acc) if many else [acc]
    if not all(isinstance(v, Vector) and v.dtype in (f32, i32) for v in accs):
        raise DSLTypeError("dsl.wgmma_wait takes the f32 or i32 accumulator(s) that dsl.wgmma returned")
    lanes = [lane for v in accs for lane in _lanes(v)]
    types = [v.dtype for v in accs for _ in range(v.width)]
    m = len(lanes)
    # The accumulators pass through the wait, so nothing reads them before it.
    out = asm([t.mlir_type() for t in types], f"wgmma.wait_group.sync.aligned {pending};",
              ",".join([f"={'f' if t == f32 else 'r'}" for t in types] + [str(k) for k in range(m)]), lanes)
    results, at = [], 0
    for v in accs:
        results.append(_vector(v.dtype, out[at:at + v.width]))
        at += v.width
    return tuple(results) if many else results[0]


def setmaxnreg(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    got = bind(T.setmaxnreg, args, kwargs)
    _require_arch_specific(tracer, "dsl.setmaxnreg")
    count = _static_int(got["count"], "dsl.setmaxnreg count")
    if not 24 <= count <= 256 or count % 8:
        raise DSLTypeError(f"dsl.setmaxnreg count must be a multiple of 8 from 24 to 256, not {count}")
    if not isinstance(got["increase"], bool):
        raise DSLTypeError("dsl.setmaxnreg increase must be a compile-time bool")
    asm([], f"setmaxnreg.{'inc' if got['increase'] else 'dec'}.sync.aligned.u32 {count};", "", [])


IMPLS: dict[Any, Impl] = {
    T.mma_sync: mma_sync,
    T.ldmatrix: ldmatrix,
    T.cp_async: cp_async,
    T.cp_async_commit: cp_async_commit,
    T.cp_async_wait: cp_async_wait,
    T.zeros: zeros,
    T.mbarrier_init: mbarrier_init,
    T.mbarrier_arrive: mbarrier_arrive,
    T.mbarrier_expect_tx: mbarrier_expect_tx,
    T.mbarrier_wait: mbarrier_wait,
    T.fence_mbarrier_init: _no_args(T.fence_mbarrier_init, "fence.mbarrier_init.release.cluster;"),
    T.fence_proxy_async: _no_args(T.fence_proxy_async, "fence.proxy.async.shared::cta;"),
    T.cluster_rank: cluster_rank,
    T.named_barrier: named_barrier,
    T.named_barrier_arrive: named_barrier_arrive,
    T.cluster_barrier: _no_args(T.cluster_barrier, "barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;"),
    T.tma_load: tma_load,
    T.tma_store: tma_store,
    T.tma_reduce: tma_reduce,
    T.tma_store_commit: _no_args(T.tma_store_commit, "cp.async.bulk.commit_group;"),
    T.tma_store_wait: tma_store_wait,
    T.wgmma: wgmma,
    T.wgmma_wait: wgmma_wait,
    T.setmaxnreg: setmaxnreg,
}
