"""Device code: a `@kernel` function traced into one specialized `gpu.func`.

A specialization fixes each tensor parameter's dtype and rank, each scalar's type, each
`Constexpr` value and (when the launch gives a static one) the block size, which becomes
the function's `known_block_size` and lets `block_dim` fold to constants. Tensor
parameters are passed flattened: pointer, shape (i32 each), outer strides (i32 each).

Register and occupancy hints (`maxnreg`, `minnctapersm`) become the `nvvm.maxnreg` /
`nvvm.minctasm` attributes of the `gpu.func` (PTX `.maxnreg` / `.minnctapersm`).

The last array of a dynamic `SharedAllocator` may have a run-time outer extent
(`smem.array(f32, n)` or `smem.array(f32, (n, 33))`): its strides stay compile-time
constants, and when `n` is a scalar parameter or a tensor's shape the launch infers the
bytes (`SmemExtent`) from the launch's arguments.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from mlir import ir

from dsl import environment
from dsl.diagnostics import Diagnostic, DiagnosticError, DiagnosticSink, Fix, SourceRange, TextEdit
from dsl.frontend import arith as A
from dsl.frontend import memory, ops
from dsl.frontend.debug_info import KernelVariables
from dsl.frontend.intrinsic_ops import IMPLS, bind_method, check_arguments, dim3, trace_breakpoint, trace_print
from dsl.frontend.params import ParamSpec, flatten_params, tensor_layout
from dsl.frontend.source import FunctionSource, closure_vars, location
from dsl.frontend.static_checks import decorator_info
from dsl.frontend.tracer import Frame, Tracer
from dsl.frontend.values import (
    BoundMethod,
    DSLTargetError,
    DSLTypeError,
    Scalar,
    ShapeView,
    SharedAllocatorState,
    SharedArray,
    TensorMapRef,
    TensorRef,
    type_name,
)
from dsl.frontend.wgmma_diagnostics import check_accumulator_reads
from dsl.language import intrinsics as I
from dsl.language.placement import HOST, placement
from dsl.language.types import DType, i32

DYNAMIC_SMEM_SYMBOL = "__kdsl_dynamic_smem"


@dataclass(frozen=True)
class SmemExtent:
    """Dynamic shared memory that grows with a run-time value: `base + scale * extent` bytes.

    `source` names the kernel parameter the extent is: ("scalar", name) or ("shape", name,
    axis); None when the kernel computed it (then the launch must pass `smem=`).
    """

    base: int
    scale: int
    source: tuple | None
    range: SourceRange


@dataclass
class TracedKernel:
    symbol: str
    source_name: str
    params: list[ParamSpec]
    block: tuple[int, int, int] | None
    static_smem: int
    dynamic_smem: int  # bytes known at compile time (with a run-time array: the bytes before it)
    def_range: SourceRange
    smem_extent: SmemExtent | None = None
    blocks_per_sm: int | None = None  # what `minnctapersm` declares: the occupancy is the author's choice


class _RuntimeExtent(Scalar):
    """The run-time outer extent of a shared array: a scalar no static index exceeds."""

    def __le__(self, other: Any) -> bool:  # `index >= extent` in static bounds checks
        return False

    def __repr__(self) -> str:
        return "n"


class RuntimeSizedSharedArray(SharedArray):
    """A shared array whose outer extent is a run-time value; its strides are constants."""

    @property
    def strides(self) -> list[int]:
        out, acc = [], 1
        for dim in reversed(self.shape[1:]):
            out.append(acc)
            acc *= dim
        return [acc, *reversed(out)]

    @property
    def nbytes(self) -> int:  # per unit of the outer extent
        n = self.dtype.nbytes
        for d in self.shape[1:]:
            n *= d
        return n


def _vload(index: Any, width: int = 4) -> None: ...
def _vstore(index: Any, value: Any, /) -> None: ...
def _array(dtype: Any, shape: Any, align: int = 16, swizzle: int = 0) -> None: ...
def _view(dtype: Any, /) -> None: ...


# The methods of tensors, shared arrays and the allocator, with the signatures of their stubs
# (`dsl/language/types.pyi`, `intrinsics.pyi`): a call binds as Python would bind it.
_METHODS = {"vload": _vload, "vstore": _vstore, "array": _array, "view": _view}


class KernelTracer(Tracer):
    mode = "kernel"

    def __init__(self, sink: DiagnosticSink, target: Any, module_ip: Any, symbol: str,
                 block: tuple[int, int, int] | None):
        super().__init__(sink)
        self.target = target
        self.module_ip = module_ip  # where shared-memory globals go
        self.symbol = symbol
        self.block = block
        self.allocator: SharedAllocatorState | None = None
        self.static_smem = 0
        self.dynamic_smem = 0
        self.smem_extent: SmemExtent | None = None
        self.param_sources: list[tuple[Any, tuple]] = []  # (entry block argument, what it is)
        self._smem_count = 0
        self.declare_dynamic_smem: Any = lambda align: None  # set by the compiler: one global per module
        self.kernel_source: FunctionSource | None = None  # for fixes that edit the decorator
        self.flush_to_zero = False  # `@kernel(ftz=True)`: the .ftz forms of f32 instructions

    def target_diagnostic(self, node: ast.AST, err: DSLTargetError) -> Diagnostic:
        """DSL207 with the fix that says which architecture the kernel is written for."""
        diag = super().target_diagnostic(node, err)
        src = self.kernel_source
        if src is None:
            return diag
        _, dec, _ = decorator_info(src.node)
        fix = pin_target_fix(src.file, dec, err.target) if dec is not None else None
        return Diagnostic.make("DSL207", diag.message, diag.range, fixes=[fix] if fix else [])

    # ----- intrinsics and attributes ----------------------------------------------------
    def is_intrinsic(self, fn: Any) -> bool:
        try:
            return fn in IMPLS
        except TypeError:
            return False

    def call_intrinsic(self, node: ast.Call, fn: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if fn is I.SharedAllocator:
            self.allocator_node = node
        try:
            return IMPLS[fn](self, args, kwargs)
        except (TypeError, ValueError, IndexError, KeyError):
            check_arguments(fn, args, kwargs)  # arguments that do not bind are the user's mistake
            raise

    def get_attribute(self, node: ast.Attribute, base: Any, attr: str) -> Any:
        if isinstance(base, I.Dim3):
            if attr not in ("x", "y", "z"):
                raise DSLTypeError(f"dsl.{base.name} has axes x, y and z, not '{attr}'")
            return dim3(self, base.name, attr)
        if isinstance(base, TensorRef):
            if attr == "shape":
                return ShapeView(list(base.shape), f"{base.name}.shape")
            if attr == "strides":
                return ShapeView(list(base.strides), f"{base.name}.strides")
            if attr == "dtype":
                return base.dtype
            if attr == "rank":
                return base.rank
            if attr in ("vload", "vstore", "view"):
                return BoundMethod(attr, base)
            raise DSLTypeError(f"tensor '{base.name}' has no attribute '{attr}'")
        if isinstance(base, SharedArray):
            if attr == "shape":
                return base.shape
            if attr == "dtype":
                return base.dtype
            if attr in ("vload", "vstore", "view"):
                return BoundMethod(attr, base)
            raise DSLTypeError(f"shared array has no attribute '{attr}'")
        if isinstance(base, TensorMapRef):  # compile-time facts of the map: generic kernels size their tiles by them
            if attr == "dtype":
                return base.dtype
            if attr == "box":
                return base.box
            raise DSLTypeError(f"tensor map '{base.name}' has attributes dtype and box (known at compile time), "
                               f"not '{attr}'")
        if isinstance(base, SharedAllocatorState):
            if attr == "array":
                return BoundMethod("array", base)
            raise DSLTypeError(f"SharedAllocator has no attribute '{attr}'")
        from dsl.language.decorators import KernelFunction

        if isinstance(base, KernelFunction):
            raise DSLTypeError(f"kernel '{base.kernel_name}' cannot be used inside another kernel")
        return super().get_attribute(node, base, attr)

    def call(self, node: ast.Call, fn: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        from dsl.language.decorators import JitFunction, KernelFunction

        if isinstance(fn, BoundMethod) and fn.name in _METHODS:
            got = bind_method(fn.name, _METHODS[fn.name], args, kwargs)
            if fn.name == "vload":
                return memory.vload(fn.receiver, got["index"], got["width"])
            if fn.name == "vstore":
                memory.vstore(fn.receiver, got["index"], got["value"])
                return None
            if fn.name == "view":
                return memory.view(fn.receiver, got["dtype"])
            return self.allocate(node, fn.receiver, got["dtype"], got["shape"], got["align"], got["swizzle"])
        if fn is print:  # one line per thread (on the GPU too): `intrinsic_ops.trace_print`
            return trace_print(self, args, kwargs)
        if fn is breakpoint:  # stops in the interpreter, does nothing on the GPU
            return trace_breakpoint(self, args, kwargs)
        if isinstance(fn, KernelFunction):
            raise self.fail("DSL304", node, f"kernel '{fn.kernel_name}' called inside a kernel; "
                            "kernels are launched from @jit functions")
        if isinstance(fn, JitFunction):
            raise self.fail("DSL302", node, "a @jit function cannot be called from a kernel")
        if placement(fn) == HOST:
            raise self.fail("DSL302", node, f"dsl.{fn.__name__}() is read by the launcher: call it in the @jit "
                            "function and pass the value to the kernel (or use dsl.grid_dim)")
        return super().call(node, fn, args, kwargs)

    def stmt_Return(self, stmt: ast.Return) -> None:
        """A kernel's own `return` is bare (results go into tensor arguments); a helper's may
        carry a value. Refused at the statement, so the range is the `return` that is wrong."""
        value = stmt.value
        if len(self.frames) == 1 and value is not None and not (isinstance(value, ast.Constant)
                                                                and value.value is None):
            raise self.fail("DSL301", stmt, "kernels return nothing; write results into a tensor argument "
                            "(a bare 'return' may leave early)")
        super().stmt_Return(stmt)

    def subscript(self, node: ast.Subscript, base: Any, index: Any) -> Any:
        if isinstance(base, TensorRef | SharedArray):
            return memory.load(base, index)
        return super().subscript(node, base, index)

    def store_subscript(self, target: ast.Subscript, value: Any) -> None:
        base = self.eval(target.value)
        index = self.eval(target.slice)
        if not isinstance(base, TensorRef | SharedArray):
            raise self.fail("DSL301", target, f"cannot assign into {type_name(base)}")
        with self.loc(target):
            self.wrap(target, lambda: memory.store(base, index, value))

    # ----- shared memory ----------------------------------------------------------------
    def make_allocator(self, dynamic: bool = False) -> SharedAllocatorState:
        if self.allocator is not None:
            raise DSLTypeError("a kernel has one SharedAllocator; allocate every array from it")
        self.allocator = SharedAllocatorState(bool(dynamic), node=getattr(self, "allocator_node", None))
        return self.allocator

    def allocate(self, node: ast.Call, alloc: SharedAllocatorState, dtype: Any, shape: Any,
                 align: int = 16, swizzle: int = 0) -> SharedArray:
        if not isinstance(dtype, DType):
            raise DSLTypeError(f"SharedAllocator.array needs a DSL scalar type, got {type_name(dtype)}")
        if self.smem_extent is not None:
            raise DSLTypeError("the array with a run-time size must be the last one allocated from the "
                               "SharedAllocator (it ends where the launch's dynamic shared memory ends)")
        shape = (shape,) if not isinstance(shape, tuple | list) else tuple(shape)
        if swizzle and shape and isinstance(shape[0], Scalar):
            raise DSLTypeError("a swizzled shared array needs a compile-time shape")
        if any(isinstance(d, Scalar) for d in shape[1:]):
            raise DSLTypeError("only the outer extent of a shared array may be a run-time value; the others "
                               "must be compile-time ints (they make its strides)")
        if shape and isinstance(shape[0], Scalar):
            return self._allocate_runtime_sized(node, alloc, dtype, shape, align)
        if not shape or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape):
            raise DSLTypeError("shared array shape must be positive compile-time ints (the outer extent may "
                               f"be a run-time integer with SharedAllocator(dynamic=True)), got {shape!r}")
        align = _alignment(align, swizzle, dtype, shape)
        array = SharedArray(None, dtype, shape, swizzle, align)
        nbytes = array.nbytes
        if alloc.dynamic:
            offset = -(-alloc.dynamic_bytes // align) * align
            alloc.dynamic_bytes = offset + nbytes
            self.dynamic_smem = alloc.dynamic_bytes
            self.declare_dynamic_smem(align)
            base = ops.llvm_addressof(memory.ptr_type(3), DYNAMIC_SMEM_SYMBOL)
            if offset:
                base = ops.llvm_gep(memory.ptr_type(3), base, offset, ir.IntegerType.get_signless(8))
            array.ptr = base
            limit = self.target.max_smem_per_block
            if alloc.dynamic_bytes > limit:
                raise self.fail("DSL206", node, f"dynamic shared memory reaches {alloc.dynamic_bytes} bytes; "
                                f"{self.target.name} allows {limit} bytes per block")
        else:
            name = f"__smem_{self.symbol}_{self._smem_count}"
            self._smem_count += 1
            count = nbytes // dtype.nbytes
            array_type = ir.Type.parse(f"!llvm.array<{count} x {dtype.mlir_type()}>")
            with self.module_ip, location(self.range(node)):
                ops.llvm_global(array_type, name, "internal", alignment=align, addr_space=3)
            array.ptr = ops.llvm_addressof(memory.ptr_type(3), name)
            self.static_smem += nbytes
            alloc.static_bytes += nbytes
            limit = self.target.static_smem_per_block
            if self.static_smem > limit:
                raise self.fail("DSL206", node, f"static shared memory reaches {self.static_smem} bytes; "
                                f"{self.target.name} allows {limit} bytes of static shared memory per block "
                                "(use SharedAllocator(dynamic=True) for up to "
                                f"{self.target.max_smem_per_block} bytes)")
        return array


    def _allocate_runtime_sized(self, node: ast.Call, alloc: SharedAllocatorState, dtype: DType,
                                shape: tuple, align: int) -> SharedArray:
        """The last dynamic array, `shape[0]` a run-time integer: sized by the launch."""
        extent, rest = shape[0], shape[1:]
        if not alloc.dynamic:
            raise DSLTypeError("a shared array with a run-time size needs SharedAllocator(dynamic=True)")
        if not extent.dtype.is_int or extent.dtype.is_bool:
            raise DSLTypeError(f"a shared array's extent must be an integer, got {extent.dtype.name}")
        if not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in rest):
            raise DSLTypeError(f"the inner extents of a shared array must be positive ints, got {rest!r}")
        array = RuntimeSizedSharedArray(None, dtype, (_RuntimeExtent(extent.value, extent.dtype), *rest))
        offset = -(-alloc.dynamic_bytes // align) * align
        alloc.dynamic_bytes = offset
        self.dynamic_smem = offset
        self.declare_dynamic_smem(align)
        base = ops.llvm_addressof(memory.ptr_type(3), DYNAMIC_SMEM_SYMBOL)
        if offset:
            base = ops.llvm_gep(memory.ptr_type(3), base, offset, ir.IntegerType.get_signless(8))
        array.ptr = base
        source = next((what for value, what in self.param_sources if value == extent.value), None)
        self.smem_extent = SmemExtent(offset, array.nbytes, source, self.range(node))
        return array


def pin_target_fix(file: Any, dec: ast.expr, target: str) -> Fix | None:
    """The edit that makes `@dsl.kernel` say `target=<target>`."""
    text = f"target={target!r}".replace("'", '"')
    if not isinstance(dec, ast.Call):  # @dsl.kernel -> @dsl.kernel(target="sm_90a")
        end = file.range_of(dec)
        at = SourceRange(end.file, end.end_line, end.end_column, end.end_line, end.end_column)
        return Fix(f"Compile this kernel for {target}", (TextEdit(at, f"({text})"),))
    existing = next((kw for kw in dec.keywords if kw.arg == "target"), None)
    if existing is not None:
        return Fix(f"Compile this kernel for {target}", (TextEdit(file.range_of(existing), text),))
    whole = file.range_of(dec)  # before the closing parenthesis
    at = SourceRange(whole.file, whole.end_line, whole.end_column - 1, whole.end_line, whole.end_column - 1)
    separator = ", " if dec.args or dec.keywords else ""
    return Fix(f"Compile this kernel for {target}", (TextEdit(at, separator + text),))


def ensure_dynamic_smem_global(module_ip: Any) -> Any:
    with module_ip, ir.Location.unknown():
        return ops.llvm_global(ir.Type.parse("!llvm.array<0 x i8>"), DYNAMIC_SMEM_SYMBOL, "external", alignment=16,
                               addr_space=3)


def _alignment(align: Any, swizzle: Any, dtype: DType, shape: tuple) -> int:
    """The array's alignment: as asked (a power of two), and a whole swizzle atom (8 rows) when
    swizzled, whose rows must then be exactly `swizzle` bytes."""
    if isinstance(align, bool) or not isinstance(align, int) or align < 1 or align & (align - 1):
        raise DSLTypeError(f"align must be a power-of-two int, not {align!r}")
    if isinstance(swizzle, bool) or swizzle not in (0, 32, 64, 128):
        raise DSLTypeError(f"swizzle must be 0, 32, 64 or 128 (bytes), not {swizzle!r}")
    if not swizzle:
        return max(align, 1)
    row = shape[-1] * dtype.nbytes if len(shape) >= 2 and isinstance(shape[-1], int) else None
    if row != swizzle:
        raise DSLTypeError(f"a {swizzle}-byte swizzled array has rows of exactly {swizzle} bytes "
                           f"({swizzle // dtype.nbytes} x {dtype.name}); got shape {list(shape)}")
    if not isinstance(shape[-2], int) or shape[-2] % 8:
        raise DSLTypeError(f"a swizzled array repeats its pattern every 8 rows; its row count must be a multiple "
                           f"of 8, got shape {list(shape)}")
    return max(align, 8 * swizzle)


def launch_bound_attributes(hints: dict[str, Any]) -> dict[str, Any]:
    """`nvvm.maxnreg` / `nvvm.minctasm` for the `gpu.func` (copied to its `llvm.func` by the
    lowering; PTX `.maxnreg` / `.minnctapersm`)."""
    out = {}
    if hints.get("maxnreg") is not None:
        out["nvvm.maxnreg"] = ops.i32_attr(hints["maxnreg"])
    if hints.get("minnctapersm") is not None:
        out["nvvm.minctasm"] = ops.i32_attr(hints["minnctapersm"])
    return out


def trace_kernel(
    kfn: Any,
    src: FunctionSource,
    params: list[ParamSpec],
    block: tuple[int, int, int] | None,
    symbol: str,
    module_ip: Any,
    target: Any,
    sink: DiagnosticSink,
    declare_dynamic_smem: Any,
) -> TracedKernel | None:
    """Emits one `gpu.func` for `kfn` at `module_ip`; returns None when tracing failed."""
    file, node = src.file, src.node
    def_range = file.def_name_range(node)
    hints = getattr(kfn, "hints", {})
    if hints.get("minnctapersm") is not None and block is None:
        from dsl.frontend.static_checks import hint_nodes

        hint = hint_nodes(node).get("minnctapersm")
        sink.add(Diagnostic.make(
            "DSL201", "minnctapersm needs the block size (PTX ignores .minnctapersm without .maxntid): declare "
            "known_block_size=[x, y, z] or launch with a compile-time block",
            file.range_of(hint) if hint is not None else def_range))
        return None
    flat = flatten_params(params)
    fn_type = ir.FunctionType.get([t for _, t in flat], [])
    with location(file.range_of(node)):
        with module_ip:
            attributes = {"function_type": ir.TypeAttr.get(fn_type), "sym_name": ir.StringAttr.get(symbol),
                          "gpu.kernel": ir.UnitAttr.get(), **launch_bound_attributes(hints)}
            if block:
                attributes["known_block_size"] = ir.DenseI32ArrayAttr.get(list(block))
            func = ops.create("gpu.func", attributes=attributes, regions=1)
        entry = func.regions[0].blocks.append(*fn_type.inputs)
    env: dict[str, Any] = {}
    sources: list[tuple[Any, tuple]] = []
    args = iter(entry.arguments)
    for p in params:
        if p.kind == "tensor":
            parts: dict[str, list[Any]] = {"ptr": [], "shape": [], "stride": []}
            for flat in tensor_layout(p.rank):
                parts[flat.role].append(next(args) if flat.role == "ptr" else Scalar(next(args), i32))
            shape, strides = parts["shape"], parts["stride"] + [1]
            env[p.name] = TensorRef(p.name, parts["ptr"][0], p.dtype, p.rank, shape, strides)
            sources += [(s.value, ("shape", p.name, k)) for k, s in enumerate(shape)]
        elif p.kind == "scalar":
            env[p.name] = Scalar(next(args), p.dtype)
            sources.append((env[p.name].value, ("scalar", p.name)))
        elif p.kind == "tensor_map":
            box, swizzle = p.value
            env[p.name] = TensorMapRef(p.name, next(args), p.dtype, p.rank, tuple(box), swizzle)
        else:
            env[p.name] = p.value
    tracer = KernelTracer(sink, target, module_ip, symbol, block)
    tracer.param_sources = sources
    tracer.kernel_source = src
    tracer.flush_to_zero = bool(hints.get("ftz"))
    if hints.get("debug") or environment.switch("KDSL_DEBUG"):  # variables by name for cuda-gdb
        tracer.variables = KernelVariables(symbol, file.path)
    tracer.declare_dynamic_smem = declare_dynamic_smem
    fn = kfn.fn
    tracer.frames.append(Frame(file, env, {**fn.__globals__, **closure_vars(fn)}, name=fn.__name__))
    tracer.record_parameters(node)
    ok = True
    with ir.InsertionPoint(entry), location(file.range_of(node)), A.target_scope(target):
        try:
            tracer.run_recovering(node.body)
        except DiagnosticError as err:
            sink.add(err.diagnostic)
            ok = False
        ops.create("gpu.return")
    races = check_accumulator_reads(tracer, func) if ok and not tracer.failed else []  # DSL305
    for race in races:
        sink.add(race)
    if not ok or tracer.failed or races:
        func.erase()
        return None
    return TracedKernel(symbol, kfn.kernel_name, params, block, tracer.static_smem,
                        tracer.dynamic_smem, def_range, tracer.smem_extent, hints.get("minnctapersm"))
