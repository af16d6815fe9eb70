"""The compiler pipeline: the stages of `stages.STAGES` that it makes, traced -> lowered ->
llvm -> ptx -> cubin (-> sass), each a function of the `Build` state that sets its text
(and source map). The IR views, the `kdsl ir` command and the cache read the same table
(`dsl/compiler/stages.py`); a program's first call
builds with `BuildOptions(views=False)` and keeps only the PTX and cubin. Failures inside
MLIR or the tools become DSL401 / DSL402 diagnostics at the Python range of the failing op.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mlir import ir
from mlir._mlir_libs._mlirDialectsGPU import ObjectAttr  # the native halves: no generated op modules
from mlir._mlir_libs._mlirDialectsLLVM import translate_module_to_llvmir
from mlir.passmanager import PassManager

from dsl import environment
from dsl.compiler import debug_variables, source_maps, toolchain
from dsl.compiler.artifacts import Resources, SourceMap
from dsl.compiler.build_options import BuildOptions
from dsl.compiler.exact_lowering import fold_shuffled_constants, make_bf16_exact, widen_narrow_integers
from dsl.compiler.float_flags import apply_float_flags, correctly_rounded_sqrt
from dsl.compiler.stages import STAGES
from dsl.diagnostics import Diagnostic, SourceRange

# The target is attached by a pass, not an attribute built from Python: creating an
# #nvvm.target attribute in Python imports the NVVM dialect's Python module (tens of ms in a
# cold process), which nothing else on the way to a cubin needs.
LOWERING = (
    "builtin.module(nvvm-attach-target{{chip={chip} O={opt} features=+ptx{ptx}}},"
    "gpu.module(canonicalize,cse,convert-scf-to-cf,convert-vector-to-llvm,"
    "convert-gpu-to-nvvm,convert-arith-to-llvm,convert-index-to-llvm,convert-math-to-llvm,"
    "canonicalize,cse,reconcile-unrealized-casts),"
    "ensure-debug-info-scope-on-llvm-func{{emission-kind={emission}}})"
)
TO_PTX = "builtin.module(gpu-module-to-binary{format=isa})"



class StageError(Exception):
    def __init__(self, diagnostics: list[Diagnostic]):
        super().__init__("; ".join(d.message for d in diagnostics))
        self.diagnostics = diagnostics


@dataclass
class Build:
    """Mutable state threaded through the stages for one compiled function."""

    module: Any  # ir.Module, traced
    context: Any
    target: Any
    fallback_range: SourceRange  # where to point when an error has no location
    options: BuildOptions = field(default_factory=BuildOptions)
    float_flags: dict[str, str] = field(default_factory=dict)  # gpu.func symbol -> #arith.fastmath flags
    flush_to_zero: set[str] = field(default_factory=set)  # kernels compiled with ftz=True
    device_debug: bool = False  # keep the DWARF sections and assemble with `ptxas -g` (cuda-gdb)
    texts: dict[str, str] = field(default_factory=dict)
    maps: dict[str, SourceMap] = field(default_factory=dict)
    resources: dict[str, Resources] = field(default_factory=dict)
    cubin: bytes | None = None
    lowered_module: Any = None
    timings: dict[str, float] = field(default_factory=dict)
    errors: list[tuple[str, str]] = field(default_factory=list)  # (message, location text)
    assembly: Callable[[], tuple[bytes, dict[str, Resources], str]] | None = None  # started ptxas


def _printed(op: Any) -> str:
    return op.get_asm(enable_debug_info=True, large_elements_limit=16)


def _mlir_errors(build: Build, code: str, fallback: str, err: Exception | None = None) -> StageError:
    diags = []
    found = list(build.errors)
    for d in getattr(err, "error_diagnostics", None) or []:
        found.append((str(d.message), str(d.location)))
    for message, loc in found:
        rng = source_maps.parse_location(loc) or build.fallback_range
        diag = Diagnostic.make(code, f"{fallback}: {message}", rng)
        if diag not in diags:
            diags.append(diag)
    if not diags:
        text = str(err) if err else fallback
        diags.append(Diagnostic.make(code, f"{fallback}: {text.splitlines()[0] if text else ''}", build.fallback_range))
    build.errors.clear()
    return StageError(diags)


def stage_traced(build: Build) -> None:
    try:
        ok = build.module.operation.verify()
    except ir.MLIRError as err:
        raise _mlir_errors(build, "DSL401", "the traced IR failed verification", err) from None
    if not ok:
        raise _mlir_errors(build, "DSL401", "the traced IR failed verification")
    if build.options.views:
        build.texts["traced"], build.maps["traced"] = source_maps.mlir_text_and_map(_printed(build.module.operation))


class _ModuleCopy:
    """A module's clone, used where an `ir.Module` is (`operation`, `body`): cloning costs a
    fifth of printing the module and parsing it again."""

    def __init__(self, operation: Any):
        self.operation = operation

    @property
    def body(self) -> Any:
        return self.operation.regions[0].blocks[0]


def _module_copy(build: Build, module: Any) -> Any:
    """A copy to transform when the views still need `module` as it is; else `module` itself."""
    if not build.options.views:
        return module
    return _ModuleCopy(module.operation.clone())


def stage_lowered(build: Build) -> None:
    lowered = _module_copy(build, build.module)
    # Only the kernels are lowered: the host `func.func`s (the launcher's IR, shown in the
    # traced view) stay behind. MLIR's debug-scope pass crashed on a host function whose
    # `assert` came from a helper (a call-site location outside any LLVM function).
    for op in list(lowered.body.operations):
        if op.operation.name == "func.func":
            op.operation.erase()
    apply_float_flags(lowered, build.float_flags)  # FMA contraction and fast-math: per kernel
    correctly_rounded_sqrt(lowered, build.float_flags)
    fold_shuffled_constants(lowered)  # before ptxas can fold them its own way
    make_bf16_exact(lowered)
    if toolchain.ptxas_problem() is not None or environment.choice("KDSL_ASSEMBLER") == "driver":
        widen_narrow_integers(lowered)  # ptxas 13.0 (the driver's own at CUDA 13.0 too)
    try:
        # a device-debug build keeps each statement's code at its line: LLVM does not optimise either
        lowering = LOWERING.format(chip=build.target.name, ptx=build.target.ptx_version,
                                   opt=0 if build.device_debug else 3,
                                   emission="Full" if build.device_debug else "LineTablesOnly")
        PassManager.parse(lowering, build.context).run(lowered.operation)
        if build.device_debug:  # the variables' records point at their kernel's subprogram
            lowered = debug_variables.bind(lowered, build.context)
    except ir.MLIRError as err:
        raise _mlir_errors(build, "DSL402", "lowering to NVVM failed", err) from None
    pass_tensor_maps_by_value(lowered)
    flush_subnormals(lowered, build.flush_to_zero)
    build.lowered_module = lowered
    if build.options.views:
        build.texts["lowered"], build.maps["lowered"] = source_maps.mlir_text_and_map(_printed(lowered.operation))


def flush_subnormals(module: Any, symbols: set[str]) -> None:
    """`ftz=True` kernels: f32 subnormals flush to zero (LLVM's denormal mode, which NVPTX
    turns into the `.ftz` forms of the f32 instructions)."""
    if not symbols:
        return
    for op in _gpu_module(module).regions[0].blocks[0].operations:
        if op.name == "llvm.func" and ir.StringAttr(op.attributes["sym_name"]).value in symbols:
            op.attributes["denormal_fp_math_f32"] = ir.StringAttr.get("preserve-sign")


def pass_tensor_maps_by_value(module: Any) -> None:
    """Kernel parameters of generic pointer type are TMA tensor maps (tensors are global
    pointers): each becomes a 128-byte, 64-byte aligned `__grid_constant__` parameter, which the
    launcher fills with the `CUtensorMap` itself. The lowering drops argument attributes it
    does not know, so they are set on the lowered `llvm.func`."""
    generic = ir.Type.parse("!llvm.ptr")
    by_value = None
    for op in _gpu_module(module).regions[0].blocks[0].operations:
        if op.name != "llvm.func" or "nvvm.kernel" not in op.attributes:
            continue
        arguments = op.regions[0].blocks[0].arguments
        if not any(a.type == generic for a in arguments):
            continue
        if by_value is None:
            by_value = ir.DictAttr.get({
                "llvm.byval": ir.TypeAttr.get(ir.Type.parse("!llvm.array<128 x i8>")),
                "llvm.align": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 64),
                "nvvm.grid_constant": ir.UnitAttr.get()})
        old = ir.ArrayAttr(op.attributes["arg_attrs"]) if "arg_attrs" in op.attributes else None
        op.attributes["arg_attrs"] = ir.ArrayAttr.get([
            by_value if a.type == generic else (old[k] if old is not None else ir.DictAttr.get({}))
            for k, a in enumerate(arguments)])


def _nvvm_target_with_libdevice(chip: str, ptx: int) -> Any:
    libdevice = toolchain.libdevice_path()
    link = f', link = ["{libdevice}"]' if libdevice else ""
    return ir.Attribute.parse(f'#nvvm.target<O = 3, chip = "{chip}", features = "+ptx{ptx}"{link}>')


def stage_llvm(build: Build) -> None:
    if not build.options.views:
        return
    gpu_module = _gpu_module(build.lowered_module)
    holder = ir.Module.create(ir.Location.unknown(build.context))
    with ir.InsertionPoint(holder.body):
        for op in gpu_module.regions[0].blocks[0].operations:
            op.operation.clone()
    try:
        text = str(translate_module_to_llvmir(holder.operation))
    except Exception as err:
        raise _mlir_errors(build, "DSL402", "translation to LLVM IR failed", err) from None
    build.texts["llvm"] = text
    build.maps["llvm"] = source_maps.llvm_map(text)


# A libdevice function called from more sites than this is called, not inlined at each: a GEMM
# epilogue applying `dsl.erf` to each of 128 accumulator elements inlined 128 bodies of
# `__nv_erff`, five times the plain GEMM's PTX, which LLVM, ptxas and nvdisasm then took
# 1.7-2x the plain GEMM's time over (benchmarks/compile_gemm_epilogue.py). Called, one body
# remains; on the H200 the fused GEMM ran at the same speed (0.98-1.00x, four shapes from
# 16x8192x8192 to 8192^3). Elementwise kernels (8 lanes and a tail) stay inlined.
INLINE_CALL_SITES = 16

# libdevice functions whose body is one or two instructions (`ex2.approx`, `sqrt.rn`, a
# rounding `cvt`, ...): inlined wherever they are called, however often. A call costs more
# than such a body, and the hot loops call them most: attention's online softmax applies
# `dsl.exp2` to each of 64 scores per tile, and 134 calls of `__nv_exp2f` made the attention
# forward run at 35% of SDPA, where the inlined `MUFU.EX2`s ran at 95%.
_ONE_INSTRUCTION = ("fabs", "fmin", "fmax", "floor", "ceil", "trunc", "rint", "nearbyint", "fma", "copysign")
ALWAYS_INLINED = frozenset(
    [f"__nv_{name}" for name in _ONE_INSTRUCTION]  # f64: exp2, sqrt and rsqrt are long there
    + [f"__nv_{name}f" for name in (*_ONE_INSTRUCTION, "exp2", "sqrt", "rsqrt", "round", "saturate")]
)


def call_repeated_libdevice(gpu_module: Any, limit: int = INLINE_CALL_SITES) -> list[str]:
    """Marks the calls of each libdevice function with more than `limit` call sites
    `no_inline` (but those of `ALWAYS_INLINED`), and returns those functions' names."""
    sites: dict[str, list[Any]] = {}

    def visit(op: Any) -> ir.WalkResult:
        if op.name == "llvm.call" and "callee" in op.attributes:
            callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
            if callee.startswith("__nv_"):
                sites.setdefault(callee, []).append(op)
        return ir.WalkResult.ADVANCE

    gpu_module.walk(visit)
    called = sorted(name for name, calls in sites.items() if len(calls) > limit and name not in ALWAYS_INLINED)
    for name in called:
        for call in sites[name]:
            call.attributes["no_inline"] = ir.UnitAttr.get()
    return called


def _calls_libdevice(gpu_module: Any) -> bool:
    return any(op.name == "llvm.func" and ir.StringAttr(op.attributes["sym_name"]).value.startswith("__nv_")
               for op in gpu_module.regions[0].blocks[0].operations)


def stage_ptx(build: Build) -> None:
    module = _module_copy(build, build.lowered_module)
    gpu_module = _gpu_module(module)
    if _calls_libdevice(gpu_module):  # libdevice math: link it (parsing it costs ~20 ms)
        call_repeated_libdevice(gpu_module)
        gpu_module.attributes["targets"] = ir.ArrayAttr.get(
            [_nvvm_target_with_libdevice(build.target.name, build.target.ptx_version)])
    try:
        PassManager.parse(TO_PTX, build.context).run(module.operation)
    except ir.MLIRError as err:
        raise _mlir_errors(build, "DSL402", "PTX generation failed", err) from None
    binary = next(op for op in module.body.operations if op.operation.name == "gpu.binary")
    ptx = ObjectAttr(binary.attributes["objects"][0]).object.decode()
    if not build.device_debug:
        ptx = toolchain.strip_debug_sections(ptx)
    build.texts["ptx"] = ptx
    if build.options.views:
        build.maps["ptx"] = source_maps.ptx_map(ptx)


def stage_cubin(build: Build) -> None:
    try:
        options = build.options
        if build.device_debug:  # only the toolkit's ptxas assembles with device debug information
            cubin, resources, _log = toolchain.assemble(build.texts["ptx"], build.target.name,
                                                        options.while_assembling, device_debug=True)
        elif build.assembly is not None:
            cubin, resources, _log = build.assembly()
        elif options.assembler is not None:
            cubin, resources, _log = options.assembler(build.texts["ptx"], build.target.name)
        else:
            cubin, resources, _log = toolchain.assemble(build.texts["ptx"], build.target.name,
                                                        options.while_assembling)
    except toolchain.ToolError as err:
        raise StageError([Diagnostic.make("DSL402", f"ptxas failed: {err}", build.fallback_range)]) from None
    build.cubin = cubin  # None: the assembler found the figures only (made on request: `CompiledFunction`)
    build.resources = resources
    if build.options.views and cubin is not None and uses_tensor_cores(build.texts["ptx"]):
        count_tensor_core_instructions(build)


_TENSOR_CORE_PTX = re.compile(r"^\s*(?:mma\.sync|wgmma\.mma_async)", re.M)


def uses_tensor_cores(ptx: str) -> bool:
    return _TENSOR_CORE_PTX.search(ptx) is not None


def count_tensor_core_instructions(build: Build) -> None:
    """The tensor-core instruction mix of each kernel, from the SASS (`HMMA`, `HGMMA`, ...):
    made only for kernels whose PTX uses tensor cores, and only with the views (the
    disassembler costs about half a second)."""
    view = source_maps.sass_view(build.cubin)
    if view is None:
        return
    build.texts.setdefault("sass", view[0])
    build.maps.setdefault("sass", view[1])
    for symbol, mix in source_maps.sass_tensor_core_mix(view[0]).items():
        res = build.resources.get(symbol)
        if res is not None and mix:
            res.tensor_cores = mix


def stage_sass(build: Build) -> None:
    if "sass" in build.texts or build.cubin is None:  # made with the tensor-core mix already; or no cubin yet
        return
    view = source_maps.sass_view(build.cubin)
    if view is not None:
        build.texts["sass"], build.maps["sass"] = view


def _gpu_module(module: Any) -> Any:
    return next(op.operation for op in module.body.operations if op.operation.name == "gpu.module")


MAKERS: dict[str, Callable[[Build], None]] = {
    "traced": stage_traced,
    "lowered": stage_lowered,
    "llvm": stage_llvm,
    "ptx": stage_ptx,
    "cubin": stage_cubin,
    "sass": stage_sass,
}
assert [s.name for s in STAGES if s.name in MAKERS] == list(MAKERS)  # the table's order


def run_pipeline(build: Build, until: str = "sass", start: str = "traced") -> None:
    """Runs the table's stages in order from `start` up to and including `until`, timing each."""
    if until not in MAKERS or start not in MAKERS:
        raise ValueError(f"the pipeline makes {', '.join(MAKERS)}, not {until!r}")
    started = False
    for stage in STAGES:
        make = MAKERS.get(stage.name)
        started = started or stage.name == start
        if make is None or not started:
            continue
        start = time.perf_counter()
        make(build)
        build.timings[stage.name] = time.perf_counter() - start
        if stage.name == until:
            return


def attach_error_collector(context: Any, build_ref: list[Build | None]) -> Any:
    """Routes MLIR diagnostics (with locations) to the build being compiled."""

    def handler(diag: Any) -> bool:
        build = build_ref[0]
        if build is not None and diag.severity == ir.DiagnosticSeverity.ERROR:
            build.errors.append((str(diag.message), str(diag.location)))
        return True

    return context.attach_diagnostic_handler(handler)
