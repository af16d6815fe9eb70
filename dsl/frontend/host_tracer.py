"""Host code: a `@jit` function traced into a `func.func` of `gpu.launch_func` ops, plus
the Python source of a launcher that does the same work at run time.

Every host value carries both its MLIR value (for the IR views and verification) and a
Python expression (for the launcher), built side by side, so the launcher evaluates
exactly the grid, block and shared-memory expressions the IR shows. Launches are
checked here against the kernel's `known_block_size` contract (DSL202) and the target's
limits (DSL203/204/205); a static block is inferred into the kernel's specialization.

Run-time facts the launcher settles (`host_checks.py`, `host_values.py`):
- `assert` on run-time shapes and scalars becomes a `cf.assert` in the IR and a check in
  the launcher that raises `ArgumentError` with the user's message. Host values depend on
  the arguments only (nothing a kernel computes flows back), so every check runs right
  after the arguments are read, before the first launch.
- `dsl.sm_count()` / `dsl.device_attribute(name)` are read from the device at run time.
- `launch(smem=None)` for a kernel whose last shared array is sized by a parameter
  passes `base + scale * that argument` bytes; an explicit run-time `smem=` is checked
  against what the kernel needs before its launch (DSL205 from the launcher).
"""

from __future__ import annotations

import ast
import inspect
import types
from dataclasses import dataclass, field
from typing import Any

from mlir import ir

from dsl.diagnostics import Diagnostic, DiagnosticError, SourceRange
from dsl.frontend import arith as A
from dsl.frontend import ops
from dsl.frontend.host_checks import CheckRecord, HostRunTimeFacts
from dsl.frontend.host_values import (
    HostScalar,
    HostTensor,
    host_binary,
    nonneg,
    py_expr,
    truth_expr,
    tuple_expr,
)
from dsl.frontend.kernel_tracer import TracedKernel
from dsl.frontend.launch_syntax import launch_syntax
from dsl.frontend.params import ParamSpec, flatten_params, tensor_layout
from dsl.frontend.source import FunctionSource, function_source, location
from dsl.frontend.static_checks import (
    annotation_mismatch_message,
    block_limit_diagnostic,
    contract_diagnostic,
    mismatch_fixes,
)
from dsl.frontend.tensor_maps import HostTensorMap, tensor_map
from dsl.frontend.tracer import Tracer, _Cascade
from dsl.frontend.values import BoundMethod, DSLTypeError, Scalar, ShapeView, type_name
from dsl.language import device as D
from dsl.language import intrinsics as I
from dsl.language import tensor_cores as T
from dsl.language.placement import DEVICE, placement
from dsl.language.types import ConstexprType, DType, TensorType, boolean, evaluate_annotation, i32


@dataclass
class KernelCall:
    kernel: Any
    args: list[Any]
    kwargs: dict[str, Any]
    node: ast.Call


@dataclass
class LaunchRecord:
    """One launch in the jit function, for the launcher and the editor's launch hover."""

    kernel: TracedKernel
    grid: str
    block: str
    smem: str
    cluster: str | None
    args: list[tuple[str, str]]  # (Python expression, type code)
    range: SourceRange
    block_static: tuple[int, int, int] | None
    contract: tuple[int, int, int] | None = None  # known_block_size to check a run-time block against
    smem_required: str | None = None  # bytes the kernel needs, checked against a run-time smem=


@dataclass
class HostState:
    launches: list[LaunchRecord] = field(default_factory=list)
    checks: list[CheckRecord] = field(default_factory=list)


class HostTracer(HostRunTimeFacts, Tracer):
    mode = "host"

    def __init__(self, sink: Any, compiler: Any):
        super().__init__(sink)
        self.compiler = compiler  # specializes and traces kernels on demand
        self.state = HostState()
        self.declare_at: Any = None  # insertion point for declarations (before the func.func)
        self.function_name = "the @jit function"  # the one being traced, for messages
        self._declared: set[str] = set()

    # ----- host arithmetic keeps a Python expression alongside -----------------------------
    def expr_BinOp(self, node: ast.BinOp) -> Any:
        a, b = self.eval(node.left), self.eval(node.right)
        return host_binary(type(node.op).__name__, a, b)

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Any:
        a = self.eval(node.operand)
        result = A.unary(type(node.op).__name__, a)
        if isinstance(result, Scalar) and isinstance(node.op, ast.USub):
            return HostScalar(result.value, result.dtype, f"(-{py_expr(a)})")
        if isinstance(result, Scalar) and isinstance(node.op, ast.Not):
            return HostScalar(result.value, boolean, f"(not {truth_expr(a)})")
        if isinstance(result, Scalar):
            raise DSLTypeError("this operator is not supported on host run-time values")
        return result

    def get_attribute(self, node: ast.Attribute, base: Any, attr: str) -> Any:
        if isinstance(base, HostTensor):
            if attr == "shape":
                return ShapeView(list(base.shape), f"{base.name}.shape")
            if attr == "strides":
                return ShapeView(list(base.strides) + [1], f"{base.name}.strides")
            if attr == "dtype":
                return base.dtype
            raise DSLTypeError(f"tensor '{base.name}' has no attribute '{attr}' in host code")
        if isinstance(base, KernelCall) and attr == "launch":
            return BoundMethod("launch", base)
        return super().get_attribute(node, base, attr)

    def call(self, node: ast.Call, fn: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        from dsl.language.decorators import JitFunction, KernelFunction

        if isinstance(fn, KernelFunction):
            return KernelCall(fn, args, kwargs, node)
        if isinstance(fn, BoundMethod) and fn.name == "launch":
            try:
                inspect.signature(self.launch).bind(node, fn.receiver, *args, **kwargs)
            except TypeError as err:
                raise self.fail("DSL301", node, f".launch(grid, block, smem=None, stream=None, cluster=None): "
                                f"{err}") from None
            return self.launch(node, fn.receiver, *args, **kwargs)
        if placement(fn) == DEVICE:
            raise DSLTypeError(f"dsl.{getattr(fn, '__name__', fn)} is device code: call it in a @dsl.kernel (or a "
                               "helper a kernel calls), not in a @jit function")
        if isinstance(fn, JitFunction):
            raise DSLTypeError("calling a @jit function from another one is not supported; call a plain helper")
        if fn is D.sm_count:
            return self.device_attribute("multiprocessor_count")
        if fn is D.device_attribute:
            if len(args) != 1 or kwargs:
                raise DSLTypeError("dsl.device_attribute takes one attribute name")
            return self.device_attribute(args[0])
        if fn is T.tensor_map:
            return tensor_map(self, args, kwargs)
        if fn is I.cdiv:
            if len(args) != 2 or kwargs:
                raise DSLTypeError("dsl.cdiv(a, b) takes two values")
            a, b = args
            if isinstance(a, int) and isinstance(b, int):
                return -(-a // b)
            out = A.binary("FloorDiv", A.binary("Sub", A.binary("Add", a, b), 1), b)
            if nonneg(a) and nonneg(b):
                return HostScalar(out.value, out.dtype, f"(-(-{py_expr(a)} // {py_expr(b)}))", True)
            return HostScalar(out.value, out.dtype, f"rt.cdiv({py_expr(a)}, {py_expr(b)})")
        if any(fn is f for f in (min, max, I.minimum, I.maximum)) and any(isinstance(a, Scalar) for a in args):
            kind = "min" if fn is min or fn is I.minimum else "max"
            acc = args[0]
            for other in args[1:]:
                x, y, ty = A.common(acc, other, kind)
                name = f"arith.{kind}si" if ty.is_int else f"arith.{kind}imumf"
                acc = HostScalar(ops.same_type(name, x.value, y.value), ty, f"{kind}({py_expr(acc)}, {py_expr(other)})")
            return acc
        if isinstance(fn, DType) and len(args) == 1 and isinstance(args[0], Scalar):
            out = A.cast(args[0], fn)
            conv = "float" if fn.is_float else ("bool" if fn.is_bool else "int")
            return HostScalar(out.value, out.dtype, f"{conv}({py_expr(args[0])})")
        if isinstance(fn, types.FunctionType) and self.is_user_function(fn):
            return self.inline(node, fn, args, kwargs)
        if any(isinstance(a, Scalar | HostTensor) for a in list(args) + list(kwargs.values())):
            raise DSLTypeError(f"{getattr(fn, '__name__', fn)!r} cannot take run-time values in host code")
        return super().call(node, fn, args, kwargs)

    # ----- launches -------------------------------------------------------------------------
    def launch(self, node: ast.Call, call: KernelCall, grid: Any = None, block: Any = None,
               smem: Any = None, stream: Any = None, cluster: Any = None) -> None:
        if grid is None or block is None:
            raise self.fail("DSL301", node, "launch needs grid= and block=")
        kernel = call.kernel
        syntax = launch_syntax(node)
        written = syntax.arguments if syntax is not None else {}
        block_node = written.get("block", node)
        grid_node = written.get("grid", node)
        smem_node = written.get("smem", node)
        block3 = self._dim3(block, block_node, "block")
        grid3 = self._dim3(grid, grid_node, "grid")
        target = self.compiler.target
        static_block = tuple(block3) if all(isinstance(b, int) for b in block3) else None
        contract = self.compiler.known_block_size(kernel)
        if static_block is not None:
            limit = block_limit_diagnostic(static_block, target.name, self.range(block_node))
            if limit is not None:
                raise DiagnosticError(limit)
            if contract is not None and tuple(contract[0]) != static_block:
                raise DiagnosticError(contract_diagnostic(
                    kernel.kernel_name, static_block, tuple(contract[0]), self.range(block_node), contract[1],
                    isinstance(block_node, ast.Constant)))
        for g, m in zip(grid3, target.max_grid_dims):
            if isinstance(g, int) and not 1 <= g <= m:
                raise self.fail("DSL204", grid_node, f"grid {[x if isinstance(x, int) else '?' for x in grid3]} "
                                f"exceeds {target.name} limits {list(target.max_grid_dims)}")
        if cluster is not None:
            self._check_cluster(node, cluster, grid3, target)
        params = self._bind(kernel, call)
        traced = self.compiler.specialize(kernel, params, static_block or (tuple(contract[0]) if contract else None))
        if traced is None:
            if function_source(kernel.fn).file.path == self.frame.src.path:
                raise _Cascade(kernel.kernel_name)  # its own diagnostics, in this file, say why
            raise DiagnosticError(Diagnostic.make(
                "DSL301", f"kernel '{kernel.kernel_name}' failed to compile (see its diagnostics)",
                self.range(node.func)))
        required = self._smem_required(node, traced, params, smem is None)
        smem_required = None
        if smem is None:
            smem_value: Any = required
        else:
            smem_value = smem
            if isinstance(smem, int) and isinstance(required, int) and smem < required:
                raise self.fail("DSL205", smem_node, f"launch smem={smem} is less than the "
                                f"{required} bytes allocated by SharedAllocator in kernel "
                                f"'{kernel.kernel_name}'")
            if isinstance(smem, Scalar | int) and not isinstance(smem, bool) and (
                    isinstance(required, Scalar) or (isinstance(smem, Scalar) and required)):
                smem_required = py_expr(required)  # the launcher checks it
        runtime_contract = tuple(contract[0]) if contract is not None and static_block is None else None
        self._emit_launch(node, traced, call, params, grid3, block3, smem_value, cluster, static_block,
                          runtime_contract, smem_required)

    def _smem_required(self, node: ast.Call, traced: TracedKernel, params: list[tuple[ParamSpec, Any, ast.AST]],
                       inferring: bool) -> Any:
        """The dynamic shared memory the kernel needs for this launch: an int, a run-time host
        value when its last array is sized by a parameter, or None when the kernel computed the
        size (then only an explicit `smem=` can say it; DSL205 when it is missing)."""
        extent = traced.smem_extent
        if extent is None:
            return traced.dynamic_smem
        if extent.source is None:
            if inferring:
                raise DiagnosticError(Diagnostic.make(
                    "DSL205", f"kernel '{traced.source_name}' sizes a shared array with a value it computes, so "
                    f"the launch cannot infer its shared memory: pass smem= (at least {extent.base} + "
                    f"{extent.scale} * that size, in bytes)", self.range(node),
                    related=[self._related(extent.range, "the array is allocated here")]))
            return None
        kind, name = extent.source[0], extent.source[1]
        value = next(v for spec, v, _ in params if spec.name == name)
        if kind == "shape":
            value = value.shape[extent.source[2]]
        grown = host_binary("Mult", extent.scale, value)
        return host_binary("Add", extent.base, grown) if extent.base else grown

    def _check_cluster(self, node: ast.Call, cluster: Any, grid3: list[Any], target: Any) -> None:
        """A cluster must fit the target and tile the grid (DSL204, at `cluster=`)."""
        cluster_node = next((kw.value for kw in node.keywords if kw.arg == "cluster"), node)
        dims = self._dim3(cluster, cluster_node, "cluster")
        if not all(isinstance(c, int) for c in dims):
            raise self.fail("DSL301", cluster_node, "cluster dimensions must be compile-time ints")
        size = dims[0] * dims[1] * dims[2]
        if size > target.max_cluster_size:
            raise self.fail("DSL204", cluster_node, f"cluster {dims} has {size} blocks; {target.name} allows "
                            f"{target.max_cluster_size} per cluster")
        for axis, (g, c) in enumerate(zip(grid3, dims)):
            if isinstance(g, int) and g % c:
                raise self.fail("DSL204", cluster_node, f"grid {'xyz'[axis]}={g} is not a multiple of cluster "
                                f"{'xyz'[axis]}={c}")

    def _dim3(self, value: Any, node: ast.AST, what: str) -> list[Any]:
        items = list(value) if isinstance(value, tuple | list) else [value]
        if not 1 <= len(items) <= 3:
            raise self.fail("DSL301", node, f"{what} has {len(items)} dimensions; give 1 to 3")
        for it in items:
            if isinstance(it, bool) or not isinstance(it, int | Scalar) or (
                    isinstance(it, Scalar) and not it.dtype.is_int):
                raise self.fail("DSL301", node, f"{what} dimensions must be integers, got {type_name(it)}")
        return items + [1] * (3 - len(items))

    def _bind(self, kernel: Any, call: KernelCall) -> list[tuple[ParamSpec, Any, ast.AST]]:
        """Matches launch arguments to the kernel's parameters (DSL101 on annotation mismatch)."""
        sig = inspect.signature(kernel.fn)
        try:
            bound = sig.bind(*call.args, **call.kwargs)
        except TypeError as err:
            raise self.fail("DSL301", call.node, f"{kernel.kernel_name}(): {err}") from None
        bound.apply_defaults()
        arg_nodes = _argument_nodes(call.node, sig)
        out = []
        for name, param in sig.parameters.items():
            value = bound.arguments[name]
            node = arg_nodes.get(name, call.node)
            ann = evaluate_annotation(kernel.fn, param.annotation)
            if isinstance(ann, ConstexprType):
                if isinstance(value, Scalar | HostTensor):
                    raise self.fail("DSL301", node, _constexpr_message(self.function_name, name, node, value))
                out.append((ParamSpec(name, "constexpr", value=value), value, node))
            elif isinstance(value, HostTensorMap):
                if ann is not T.TensorMap and param.annotation is not inspect.Parameter.empty:
                    raise self.fail("DSL301", node, f"'{name}' gets a tensor map; annotate it dsl.TensorMap")
                out.append((ParamSpec(name, "tensor_map", value.dtype, value.rank, (value.box, value.swizzle)),
                            value, node))
            elif ann is T.TensorMap:
                raise self.fail("DSL301", node, f"'{name}' is a dsl.TensorMap parameter; pass "
                                f"dsl.tensor_map(tensor, box=...), not {type_name(value)}")
            elif isinstance(value, HostTensor):
                want = ann if isinstance(ann, TensorType) else None
                if want is not None and want.dtype is not None and (
                        want.dtype != value.dtype or want.rank != value.rank):
                    self.warn_mismatch(kernel, node, name, f"Tensor[{value.dtype.name}, {value.rank}]",
                                       f"Tensor[{want.dtype.name}, {want.rank}]")
                out.append((ParamSpec(name, "tensor", value.dtype, value.rank), value, node))
            elif isinstance(value, Scalar | bool | int | float):
                dtype = ann if isinstance(ann, DType) else (
                    value.dtype if isinstance(value, Scalar) else A.literal_type(value))
                actual = value.dtype if isinstance(value, Scalar) else A.literal_type(value)
                if isinstance(ann, DType) and actual != ann and not (
                        isinstance(value, int) and not isinstance(value, bool) and ann.is_float):
                    self.warn_mismatch(kernel, node, name, actual.name, ann.name)
                if isinstance(ann, TensorType):
                    raise self.fail("DSL301", node, f"'{name}' is a tensor parameter; got {type_name(value)}")
                out.append((ParamSpec(name, "scalar", dtype), value, node))
            else:
                raise self.fail("DSL301", node, f"cannot pass {type_name(value)} as kernel argument '{name}'")
        return out

    def warn_mismatch(self, kernel: Any, node: ast.AST, name: str, actual: str, annotated: str) -> None:
        src = function_source(kernel.fn)
        arg = next((a for a in src.node.args.args + src.node.args.kwonlyargs if a.arg == name), None)
        ann_text = ast.unparse(arg.annotation) if arg is not None and arg.annotation is not None else None
        ann_range = src.file.range_of(arg.annotation) if ann_text is not None else None
        arg_text = ast.get_source_segment(self.frame.src.text, node) if isinstance(node, ast.expr) else None
        fixes = mismatch_fixes(ann_text, annotated, actual, ann_range, arg_text,
                               self.range(node) if arg_text else None)
        self.sink.add(Diagnostic.make(
            "DSL101", annotation_mismatch_message("@kernel", name, annotated, actual), self.range(node),
            fixes=fixes))

    def _index(self, v: Any) -> Any:
        if isinstance(v, int):
            return ops.constant(ir.IndexType.get(), v)
        return ops.value("arith.index_cast", ir.IndexType.get(), v.value)

    def _emit_launch(self, node: ast.Call, traced: TracedKernel, call: KernelCall,
                     params: list[tuple[ParamSpec, Any, ast.AST]], grid3: list[Any], block3: list[Any],
                     smem: Any, cluster: Any, static_block: tuple[int, int, int] | None,
                     contract: tuple[int, int, int] | None, smem_required: str | None = None) -> None:
        operands, arg_exprs = [], []
        for spec, value, _ in params:
            if spec.kind == "tensor":
                for flat in tensor_layout(value.rank):
                    part = (value.ptr if flat.role == "ptr" else
                            (value.shape if flat.role == "shape" else value.strides)[flat.axis].value)
                    operands.append(part)
                    arg_exprs.append((flat.expr(value.name), flat.type_code))
            elif spec.kind == "tensor_map":
                operands.append(value.value)
                arg_exprs.append((value.expr, "tmap"))
            elif spec.kind == "scalar":
                scalar = A.cast(A.to_scalar(value, spec.dtype), spec.dtype)
                operands.append(scalar.value)
                expr = py_expr(value) if isinstance(value, Scalar) else repr(value)
                arg_exprs.append((expr, spec.dtype.name))
        smem_scalar = A.cast(A.to_scalar(smem, i32), i32)
        cluster3 = self._dim3(cluster, node, "cluster") if cluster is not None else None
        cluster_sizes = [self._index(c) for c in cluster3] if cluster3 is not None else []
        sizes = [self._index(g) for g in grid3] + [self._index(b) for b in block3]
        # Operand groups: async deps, grid xyz, block xyz, cluster xyz, smem, kernel operands, async object.
        segments = [0, 1, 1, 1, 1, 1, 1] + [len(cluster_sizes) // 3] * 3 + [1, len(operands), 0]
        ops.create("gpu.launch_func", operands=sizes + cluster_sizes + [smem_scalar.value] + operands, attributes={
            "kernel": ir.SymbolRefAttr.get([self.compiler.gpu_module_name, traced.symbol]),
            "operandSegmentSizes": ir.DenseI32ArrayAttr.get(segments)})
        self.state.launches.append(LaunchRecord(
            traced, tuple_expr(grid3), tuple_expr(block3), py_expr(smem),
            tuple_expr(cluster3) if cluster3 else None, arg_exprs, self.range(node), static_block, contract,
            smem_required))


def _constexpr_message(jit_name: str, name: str, node: ast.AST, value: Any) -> str:
    """A run-time value given to a Constexpr parameter. A shape or a scalar is read at each
    call, after the specialization is chosen, so the way to specialise on one is a Constexpr
    parameter of the jit function that the caller passes and an assert that checks it."""
    if not isinstance(value, Scalar):
        return f"'{name}' is Constexpr; pass a compile-time value, not {type_name(value)}"
    text = ast.unparse(node) if isinstance(node, ast.expr) else "this value"
    return (f"'{name}' is Constexpr, and {text} is a run-time {type_name(value)} (read at each call). To specialise "
            f"on it, give {jit_name} a parameter `{name}: Constexpr[int]`, pass it from Python "
            f"(`{jit_name}(..., {name}={text})`), check it with `assert {text} == {name}` (the launcher checks "
            f"before launching) and pass {name} here")


def _argument_nodes(call: ast.Call, sig: inspect.Signature) -> dict[str, ast.AST]:
    names = list(sig.parameters)
    out: dict[str, ast.AST] = {}
    for i, a in enumerate(call.args):
        if i < len(names) and not isinstance(a, ast.Starred):
            out[names[i]] = a
    for kw in call.keywords:
        if kw.arg:
            out[kw.arg] = kw.value
    return out


def trace_host(src: FunctionSource, fn: Any, params: list[ParamSpec], compiler: Any, sink: Any
               ) -> tuple[Any, HostState] | None:
    """Emits the jit function as `func.func` at the current insertion point."""
    from dsl.frontend.source import closure_vars
    from dsl.frontend.tracer import Frame

    file, node = src.file, src.node
    flat = flatten_params(params)
    with location(file.range_of(node)):
        fn_type = ir.FunctionType.get([t for _, t in flat], [])
        fn_op = ops.create("func.func", attributes={"sym_name": ir.StringAttr.get(fn.__name__),
                                                     "function_type": ir.TypeAttr.get(fn_type)}, regions=1)
        entry = fn_op.regions[0].blocks.append(*fn_type.inputs)
    tracer = HostTracer(sink, compiler)
    tracer.declare_at = ir.InsertionPoint(fn_op)  # declarations go before the function
    tracer.function_name = fn.__name__
    env: dict[str, Any] = {}
    args = iter(entry.arguments)
    for p in params:
        if p.kind == "tensor":
            parts: dict[str, list[Any]] = {"ptr": [], "shape": [], "stride": []}
            for flat in tensor_layout(p.rank):
                arg = next(args)
                parts[flat.role].append(arg if flat.role == "ptr" else
                                        HostScalar(arg, i32, flat.expr(p.name), flat.role == "shape"))
            env[p.name] = HostTensor(p.name, p.dtype, p.rank, parts["ptr"][0], parts["shape"], parts["stride"])
        elif p.kind == "scalar":
            env[p.name] = HostScalar(next(args), p.dtype, p.name)
        else:
            env[p.name] = p.value
    tracer.frames.append(Frame(file, env, {**fn.__globals__, **closure_vars(fn)}))
    tracer.record_parameters(node)
    with ir.InsertionPoint(entry), location(file.range_of(node)):
        tracer.run_recovering(node.body)
        ops.create("func.return")
    if tracer.failed:
        return None
    return fn_op, tracer.state
