"""kdsl: Python GPU kernels traced to MLIR, lowered to PTX and cubin, launched on NVIDIA GPUs.

The package reads in the order a kernel flows through it:
`language` (types, intrinsics, decorators) -> `frontend` (AST tracing, locations, static
checks) -> `compiler` (stages, targets, toolchain, cache) -> `runtime` (load, launch);
`diagnostics` is shared by all of them.
"""

from typing import TYPE_CHECKING, Any

from dsl.compiler.artifacts import CompiledFunction, ModuleReport, Resources, SourceMap
from dsl.diagnostics import CompileError, Diagnostic, DiagnosticWarning, Severity, SourceRange
from dsl.frontend.static_checks import static_checks
from dsl.language.autotune import Config, autotune
from dsl.language.decorators import jit, kernel
from dsl.language.device import device_attribute as device_attribute
from dsl.language.device import sm_count as sm_count
from dsl.language.intrinsics import (
    SharedAllocator,
    abs,
    all,
    any,
    atan2,
    atomic_add,
    atomic_cas,
    atomic_max,
    atomic_min,
    ballot,
    barrier,
    bitcast,
    block_dim,
    block_idx,
    cast,
    cdiv,
    ceil,
    const_expr,
    cos,
    erf,
    erfc,
    exp,
    exp2,
    expm1,
    floor,
    fma,
    grid_dim,
    isinf,
    isnan,
    lane_id,
    log,
    log1p,
    log2,
    match_any,
    max,
    min,
    pow,
    printf,
    round,
    rsqrt,
    shfl_down,
    shfl_idx,
    shfl_up,
    shfl_xor,
    sin,
    sqrt,
    static_range,
    tanh,
    thread_idx,
    trunc,
    vector,
    warp_reduce,
    warp_size,
)
from dsl.language.tensor_cores import (
    TensorMap,
    TensorMapSpec,
    cluster_barrier,
    cluster_rank,
    cp_async,
    cp_async_commit,
    cp_async_wait,
    fence_mbarrier_init,
    fence_proxy_async,
    ldmatrix,
    mbarrier_arrive,
    mbarrier_expect_tx,
    mbarrier_init,
    mbarrier_wait,
    mma_sync,
    named_barrier,
    named_barrier_arrive,
    setmaxnreg,
    tensor_map,
    tma_load,
    tma_reduce,
    tma_store,
    tma_store_commit,
    tma_store_wait,
    wgmma,
    wgmma_wait,
    zeros,
)
from dsl.language.types import (
    BFloat16,
    Boolean,
    Constexpr,
    Float8E4M3,
    Float8E5M2,
    Float16,
    Float32,
    Float64,
    Index,
    Int8,
    Int16,
    Int32,
    Int64,
    Tensor,
    TensorSpec,
    Uint8,
    Uint16,
    Uint32,
    Uint64,
    bf16,
    boolean,
    f8e4m3,
    f8e5m2,
    f16,
    f32,
    f64,
    i8,
    i16,
    i32,
    i64,
    index,
    u8,
    u16,
    u32,
    u64,
)
from dsl.targets import TARGETS


def _plug_in_the_upper_layers() -> None:
    """Gives the language layer's entry points (a jit call, `.compile`, `dsl.sm_count()`) the
    layers above it, imported on first use: `import dsl` stays cheap, and `language` imports
    nothing above itself."""
    from dsl.language import decorators, device

    def call_jit(jit_fn: Any, args: tuple, kwargs: dict) -> Any:
        from dsl.interpreter.mode import interpreting
        from dsl.runtime.jit_call import call_jit as on_the_gpu

        def run(jit_fn: Any, args: tuple, kwargs: dict) -> Any:
            if interpreting():  # `dsl.interpret()` or KDSL_INTERPRET=1: the CPU runs it
                from dsl.interpreter.jit import call_interpreted

                jit_fn._fast = (-1, None)
                return call_interpreted(jit_fn, args, kwargs)
            return on_the_gpu(jit_fn, args, kwargs)

        decorators._call_jit = run  # later calls skip this first-use import
        return run(jit_fn, args, kwargs)

    def call_autotuned(jit_fn: Any, args: tuple, kwargs: dict) -> Any:
        from dsl.runtime.autotune import call as run

        decorators._call_autotuned = run
        return run(jit_fn, args, kwargs)

    def compile_function(fn: Any, *args: Any, **kwargs: Any) -> Any:
        from dsl.compiler.api import compile as run

        decorators._compile_function = run
        return run(fn, *args, **kwargs)

    def compile(fn: Any, *args: Any, target: str | None = None, **kwargs: Any) -> Any:
        """`dsl.compile(fn, *args, target=...)`: see `dsl.compiler.api.compile`."""
        return decorators.run_for_the_user(decorators._compile_function, fn, *args, target=target, **kwargs)

    globals()["compile"] = compile

    def torch_op(jit_fn: Any) -> Any:
        from dsl.torch.registry import torch_op as run

        return run(jit_fn)

    def current_device_attribute(name: str) -> int | None:
        from dsl.runtime import driver

        return driver.device_attribute(driver.current_context(), name) if driver.available() else None

    decorators._call_jit = call_jit
    decorators._call_autotuned = call_autotuned
    decorators._compile_function = compile_function
    decorators._torch_op = torch_op
    device._current_device_attribute = current_device_attribute


_plug_in_the_upper_layers()

if TYPE_CHECKING:  # imported on first use: the MLIR bindings take a while to load
    from dsl import torch as torch
    from dsl.compiler.api import compile
    from dsl.export.build import load_export
    from dsl.interpreter import interpret
    from dsl.module_analysis import analyze_source
    from dsl.profiling import profile
    from dsl.runtime.run import run_function

_LAZY = {
    "analyze_source": ("dsl.module_analysis", "analyze_source"),
    "interpret": ("dsl.interpreter", "interpret"),  # run @dsl.jit calls on the CPU (dsl/interpreter)
    "load_export": ("dsl.export.build", "load_export"),  # call a `kdsl export` library (dsl/export)
    "profile": ("dsl.profiling", "profile"),  # Nsight Compute's counters per Python line (dsl/profiling)
    "run_function": ("dsl.runtime.run", "run_function"),
}


if not TYPE_CHECKING:  # hidden from type checkers, so a misspelt `dsl.` name is still reported

    def __getattr__(name: str) -> Any:
        """Loads the compiler (and MLIR) only when it is used, so `import dsl` stays cheap."""
        if name == "torch":  # PyTorch operators (dsl/torch); imports torch, so only when asked for
            import importlib

            return importlib.import_module("dsl.torch")
        if name in _LAZY:
            import importlib

            module, attr = _LAZY[name]
            value = getattr(importlib.import_module(module), attr)
            globals()[name] = value
            return value
        raise AttributeError(f"module 'dsl' has no attribute {name!r}")

__all__ = [
    "TARGETS",
    "BFloat16",
    "Boolean",
    "CompileError",
    "CompiledFunction",
    "Config",
    "Constexpr",
    "Diagnostic",
    "DiagnosticWarning",
    "Float8E4M3",
    "Float8E5M2",
    "Float16",
    "Float32",
    "Float64",
    "Index",
    "Int8",
    "Int16",
    "Int32",
    "Int64",
    "ModuleReport",
    "Resources",
    "Severity",
    "SharedAllocator",
    "SourceMap",
    "SourceRange",
    "Tensor",
    "TensorMap",
    "TensorMapSpec",
    "TensorSpec",
    "Uint8",
    "Uint16",
    "Uint32",
    "Uint64",
    "abs",
    "all",
    "analyze_source",
    "any",
    "atan2",
    "atomic_add",
    "atomic_cas",
    "atomic_max",
    "atomic_min",
    "autotune",
    "ballot",
    "barrier",
    "bf16",
    "bitcast",
    "block_dim",
    "block_idx",
    "boolean",
    "cast",
    "cdiv",
    "ceil",
    "cluster_barrier",
    "cluster_rank",
    "compile",
    "const_expr",
    "cos",
    "cp_async",
    "cp_async_commit",
    "cp_async_wait",
    "erf",
    "erfc",
    "exp",
    "exp2",
    "expm1",
    "f8e4m3",
    "f8e5m2",
    "f16",
    "f32",
    "f64",
    "fence_mbarrier_init",
    "fence_proxy_async",
    "floor",
    "fma",
    "grid_dim",
    "i8",
    "i16",
    "i32",
    "i64",
    "index",
    "interpret",
    "isinf",
    "isnan",
    "jit",
    "kernel",
    "lane_id",
    "ldmatrix",
    "load_export",
    "log",
    "log1p",
    "log2",
    "match_any",
    "max",
    "mbarrier_arrive",
    "mbarrier_expect_tx",
    "mbarrier_init",
    "mbarrier_wait",
    "min",
    "mma_sync",
    "named_barrier",
    "named_barrier_arrive",
    "pow",
    "printf",
    "profile",
    "round",
    "rsqrt",
    "run_function",
    "setmaxnreg",
    "shfl_down",
    "shfl_idx",
    "shfl_up",
    "shfl_xor",
    "sin",
    "sqrt",
    "static_checks",
    "static_range",
    "tanh",
    "tensor_map",
    "thread_idx",
    "tma_load",
    "tma_reduce",
    "tma_store",
    "tma_store_commit",
    "tma_store_wait",
    "trunc",
    "u8",
    "u16",
    "u32",
    "u64",
    "vector",
    "warp_reduce",
    "warp_size",
    "wgmma",
    "wgmma_wait",
    "zeros",
]
