"""Calling a `@dsl.jit` function: specialize, compile once, then launch cheaply.

The first call with a new specialization (argument dtypes and ranks, Constexpr values)
compiles it — or reads it from the on-disk cache (`dsl.compiler.disk_cache`) — and turns
the generated launcher source into a Python function. Every later call with the same
specialization costs a dictionary lookup on a key built from the arguments' types, then
the launcher: argument checks, grid arithmetic, one `cuLaunchKernel` per launch (in C
with the native path, `dsl.runtime._fastpath`).

`stream=` (keyword only) chooses the CUDA stream; see `dsl.runtime.launch`.

Devices: a call compiles for the architecture of the GPU its arrays are on (arrays on two
devices are refused before compiling: `dsl.runtime.devices`). Where every visible GPU has
the same architecture (the usual 8-GPU host) one specialization serves them all, each
device loading its module on first use; on a host of mixed GPUs the architecture is part
of the specialization's key, and a launcher refuses a device of another architecture, so
the call comes back here for the right one.

Under `KDSL_INTERPRET=1` or `dsl.interpret()` a call runs in the interpreter instead
(`dsl.interpreter.jit`); entering `dsl.interpret()` disarms the launchers armed for the fast
path, so no GPU launcher runs a call meant for the CPU.
"""

from __future__ import annotations

import inspect
import sys
import threading
import warnings
import weakref
from typing import Any

from dsl.runtime import devices
from dsl.runtime import driver as _driver
from dsl.runtime.launch import Runtime
from dsl.runtime.module import ModuleImage

_SCALAR_TYPES = (int, float, bool)


class _Specialization:
    __slots__ = ("direct", "entry", "launch", "loaded_from_disk", "plan", "rt")

    def __init__(self, launch: Any, rt: Runtime, direct: int | None, plan: list, entry: Any, from_disk: bool):
        self.launch = launch
        self.rt = rt
        self.direct = direct  # when not None: the launcher takes args[:direct] as they come
        self.plan = plan  # else: ("arg", i) | ("kw", name) | ("default", value) per runtime parameter
        self.entry = entry
        self.loaded_from_disk = from_disk


class _JitState:
    """Per `@jit` function: its parameters and its specializations."""

    __slots__ = ("lock", "names", "scalar", "signature", "specs")

    def __init__(self, jit_fn: Any):
        from dsl.compiler.specs import evaluate_annotation
        from dsl.language.types import DType

        self.signature = inspect.signature(jit_fn.fn)
        self.names = list(self.signature.parameters)
        # True where the parameter is annotated with a scalar type: its value is a runtime
        # argument, so only its Python type belongs in the key; other plain values
        # (Constexpr, unannotated) are compile-time and their value is part of the key.
        self.scalar = [isinstance(evaluate_annotation(jit_fn.fn, p.annotation), DType)
                       for p in self.signature.parameters.values()]
        self.specs: dict[Any, _Specialization] = {}
        self.lock = threading.Lock()  # one thread compiles a missing specialization; the others wait


# --- specialization keys ------------------------------------------------------------------------

_TENSOR_SIGS: dict[type, Any] = {}


def _torch_sig(a: Any) -> Any:
    return (a.dtype, a.dim())


def _cupy_sig(a: Any) -> Any:
    return (a.dtype, a.ndim)


def _slow_sig(a: Any) -> Any:
    t = type(a)
    torch = sys.modules.get("torch")
    cupy = sys.modules.get("cupy")
    if torch is not None and isinstance(a, torch.Tensor):
        _TENSOR_SIGS[t] = _torch_sig
        return _torch_sig(a)
    if cupy is not None and isinstance(a, cupy.ndarray):
        _TENSOR_SIGS[t] = _cupy_sig
        return _cupy_sig(a)
    dtype = getattr(a, "dtype", None)
    shape = getattr(a, "shape", None)
    if dtype is not None and shape is not None:
        return (t, str(dtype), len(tuple(shape)))
    try:
        hash(a)
        return (t, a)
    except TypeError:
        return (t, repr(a))


def _sig(a: Any, scalar: bool) -> Any:
    t = type(a)
    if t is float or t is int or t is bool:
        return t if scalar else (t, a)
    f = _TENSOR_SIGS.get(t)
    if f is not None:
        return f(a)
    return _slow_sig(a)


def _key(state: _JitState, args: tuple, kwargs: dict) -> Any:
    scalar = state.scalar
    key = tuple([_sig(a, scalar[i] if i < len(scalar) else False) for i, a in enumerate(args)])
    if kwargs:
        names = state.names
        key = (key, tuple(sorted(
            (k, _sig(v, scalar[names.index(k)] if k in names else False)) for k, v in kwargs.items())))
    return key


def _spec_key(state: _JitState, args: tuple, kwargs: dict) -> Any:
    """`_key`, and on a host of mixed GPU architectures the architecture of the arguments' device."""
    key = _key(state, args, kwargs)
    if devices.mixed_architectures():
        device = devices.common_device(devices.call_arguments(state.names, args, kwargs), ask_driver=True)
        key = (key, devices.device_arch(device))
    return key


def state_of(jit_fn: Any) -> _JitState:
    """The function's parameters and specializations (made on first use)."""
    try:
        return jit_fn._kdsl_state
    except AttributeError:
        state = jit_fn._kdsl_state = _JitState(jit_fn)
        return state


def call_key(state: _JitState, args: tuple, kwargs: dict) -> Any:
    """What tells one specialization's calls from another's (the interpreter keys by it too)."""
    return _key(state, args, kwargs)


def launch_plan(state: _JitState, args: tuple, kwargs: dict, runtime_names: list[str]) -> tuple[int | None, list]:
    """How a launcher's arguments are picked from a call of this shape (see `_plan`)."""
    return _plan(state, args, kwargs, runtime_names)


# --- calling -------------------------------------------------------------------------------------

_ARMED: weakref.WeakSet = weakref.WeakSet()  # jit functions whose `_fast` holds a GPU launcher


def disarm_fast_paths() -> None:
    """Sends every jit function's next call through `call_jit` (entering the interpreter)."""
    for jit_fn in list(_ARMED):
        jit_fn._fast = (-1, None)
    _ARMED.clear()


def call_jit(jit_fn: Any, args: tuple, kwargs: dict) -> None:
    """Runs `jit_fn(*args, **kwargs)` on the GPU (compiling this specialization once). The
    choice of the interpreter instead (`dsl.interpreter.mode`) is made above this layer
    (`dsl._plug_in_the_upper_layers`), which knows both."""
    state = state_of(jit_fn)
    stream = None
    if kwargs:
        if "stream" in kwargs and "stream" not in state.names:
            kwargs = dict(kwargs)
            stream = kwargs.pop("stream")
    spec = state.specs.get(_spec_key(state, args, kwargs))
    if spec is None:
        spec = _specialize_once(jit_fn, state, args, kwargs)
    direct = spec.direct
    # Only a call that passed exactly the runtime parameters may be guessed again by shape
    # (JitFunction.__call__ tries it first): one that also passed Constexpr values
    # positionally (or by keyword) is not the default.
    jit_fn._fast = (direct, spec.launch) if not kwargs and direct == len(args) else (-1, None)
    if jit_fn._fast[1] is not None:
        _ARMED.add(jit_fn)
    if direct is not None:
        return spec.launch(*args[:direct], stream)
    values = []
    for how, what in spec.plan:
        values.append(args[what] if how == "arg" else kwargs[what] if how == "kw" else what)
    return spec.launch(*values, stream)


def specialization(jit_fn: Any, *args: Any, **kwargs: Any) -> _Specialization:
    """The loaded specialization a call with these arguments runs (compiling it if needed)."""
    try:
        state = jit_fn._kdsl_state
    except AttributeError:
        state = jit_fn._kdsl_state = _JitState(jit_fn)
    spec = state.specs.get(_spec_key(state, args, kwargs))
    return spec if spec is not None else _specialize_once(jit_fn, state, args, kwargs)


def _specialize_once(jit_fn: Any, state: _JitState, args: tuple, kwargs: dict) -> _Specialization:
    """The miss path, under the function's lock: a specialization is compiled once even when
    several threads call with it at the same time."""
    with state.lock:
        spec = state.specs.get(_spec_key(state, args, kwargs))
        return spec if spec is not None else _specialize(jit_fn, state, args, kwargs)


def _specialize(jit_fn: Any, state: _JitState, args: tuple, kwargs: dict) -> _Specialization:
    spec = _load(jit_fn, state, args, kwargs)
    state.specs[_spec_key(state, args, kwargs)] = spec
    return spec


def build_specialization(jit_fn: Any, args: tuple, kwargs: dict) -> _Specialization:
    """A loaded specialization for these arguments that no call will pick up: autotuning
    builds one per config (inside `hint_overrides`), which the call's key cannot tell apart."""
    try:
        state = jit_fn._kdsl_state
    except AttributeError:
        state = jit_fn._kdsl_state = _JitState(jit_fn)
    return _load(jit_fn, state, args, kwargs)


def launch_specialization(spec: _Specialization, args: tuple, kwargs: dict, stream: Any) -> None:
    """Runs `spec`'s launcher with the call's arguments, as `call_jit` does."""
    if spec.direct is not None:
        return spec.launch(*args[:spec.direct], stream)
    values = [args[what] if how == "arg" else kwargs[what] if how == "kw" else what for how, what in spec.plan]
    return spec.launch(*values, stream)


def _load(jit_fn: Any, state: _JitState, args: tuple, kwargs: dict) -> _Specialization:
    from dsl.targets import TARGETS

    # The device the arrays are on (arrays on two devices: refused before compiling), and its
    # architecture straight from libcuda: cuda-bindings then loads while ptxas runs.
    device = devices.common_device(devices.call_arguments(state.names, args, kwargs),
                                   ask_driver=devices.mixed_architectures())
    arch = devices.device_arch(device) or _driver.launch_context(device).arch
    target = arch if arch in TARGETS else None
    entry, from_disk, runtime_names = compile_entry(jit_fn, args, kwargs, target, gpu_arch=arch, device=device)
    _driver.launch_context(device)  # raises here if the GPU cannot be used (nothing was launched yet)
    for d in entry.diagnostics:
        _warn(d)
    namespace: dict[str, Any] = {}
    code = compile(entry.launcher, f"<kdsl launcher {entry.name}>", "exec")
    exec(code, namespace)
    from dsl.diagnostics import SourceRange

    static = {k["symbol"]: (k.get("resources") or {}).get("static_smem", 0) for k in entry.kernels}
    image = ModuleImage(entry.cubin, entry.ptx, static)
    ranges = {sym: SourceRange.from_dict(r) for sym, r in entry.launch_ranges.items()}
    access = namespace.get("TENSOR_ACCESS")  # absent from older cache entries
    rt = Runtime(image, ranges, entry.name, access, arch=arch)
    launch = namespace["bind"](rt)
    direct, plan = _plan(state, args, kwargs, runtime_names)
    return _Specialization(launch, rt, direct, plan, entry, from_disk)


def _plan(state: _JitState, args: tuple, kwargs: dict, runtime_names: list[str]) -> tuple[int | None, list]:
    """How to pick the launcher's arguments from a call of this shape."""
    try:
        bound = state.signature.bind(*args, **kwargs)
    except TypeError as err:
        raise TypeError(f"{err}") from None
    names = state.names
    plan: list = []
    for name in runtime_names:
        i = names.index(name)
        if i < len(args):
            plan.append(("arg", i))
        elif name in kwargs:
            plan.append(("kw", name))
        else:
            default = state.signature.parameters[name].default
            if default is inspect.Parameter.empty:
                raise TypeError(f"missing argument '{name}'")
            plan.append(("default", default))
    del bound
    if not kwargs and all(p == ("arg", i) for i, p in enumerate(plan)):
        return len(plan), plan
    return None, plan


def _load_driver(device: int | None = None) -> None:
    """Loads cuda-bindings and the device's context while ptxas runs; a failure is reported
    by the `launch_context()` call that follows the compile, not from inside the compiler."""
    from dsl.runtime.driver import DriverError, NoGPUError, launch_context

    try:
        launch_context(device)
    except (DriverError, NoGPUError):
        pass


def _run_time_options(target: str | None, gpu_arch: str, device: int | None = None) -> Any:
    """How a program's first call compiles: no IR views; the toolkit's ptxas, while the
    driver bindings load, unless the driver's own PTX compiler is wanted."""
    import functools

    from dsl.compiler.build_options import BuildOptions
    from dsl.runtime import driver_assembler
    from dsl.targets import get_target

    if driver_assembler.wanted(get_target(target).name, gpu_arch):

        def assemble_on_the_device(ptx: str, arch: str) -> Any:
            """The driver's PTX compiler with the call's device current: it compiles for that GPU."""
            with _driver.on_context(_driver.launch_context(device)):
                return driver_assembler.assemble(ptx, arch)

        return BuildOptions(views=False, assembler=assemble_on_the_device)
    return BuildOptions(views=False, while_assembling=functools.partial(_load_driver, device))


def compile_entry(jit_fn: Any, args: tuple, kwargs: dict, target: str | None, gpu_arch: str | None = None,
                  device: int | None = None) -> tuple[Any, bool, list[str]]:
    """(disk-cache entry, whether it came from disk, launcher parameter names) for a call.

    Compiles to cubin on a miss and stores the result on disk; needs no GPU. `gpu_arch` is
    given when a program compiles at its own call: the GPU that will run it, `device` its
    ordinal (see `_run_time_options`). The disk cache's key holds the target, so GPUs of
    different architectures never share an entry.
    """
    from dsl.compiler import cache, disk_cache
    from dsl.compiler.specs import resolve_params
    from dsl.diagnostics import CompileError, DiagnosticSink
    from dsl.frontend.source import function_source
    from dsl.targets import get_target

    src = function_source(jit_fn.fn)
    sink = DiagnosticSink()
    params = resolve_params(jit_fn, src, args, kwargs, sink)
    if params is None:
        raise CompileError(sink.errors or sink.items)
    runtime_names = [p.name for p in params if p.kind != "constexpr"]
    tgt = get_target(target)
    key = cache.function_key(jit_fn, src, params, tgt.name, "cubin")
    entry = disk_cache.load(key)
    if entry is not None:
        return entry, True, runtime_names
    with disk_cache.lock(key):
        entry = disk_cache.load(key)  # another process may have compiled it meanwhile
        if entry is not None:
            return entry, True, runtime_names
        from dsl.compiler.api import compile_function  # loads MLIR: only on a cache miss
        from dsl.compiler.build_options import BuildOptions

        options = _run_time_options(target, gpu_arch, device) if gpu_arch else BuildOptions(views=False)
        compiled, diags = compile_function(jit_fn, args, kwargs, target, until="cubin", options=options)
        errors = [d for d in diags if d.is_error]
        if errors or compiled is None:
            raise CompileError(errors or diags)
        entry = entry_from_compiled(compiled)
        disk_cache.store(key, entry)
    return entry, False, runtime_names


def entry_from_compiled(compiled: Any) -> Any:
    from dsl.compiler.disk_cache import CacheEntry

    ranges: dict[str, Any] = {}
    for launch in compiled.launches:
        ranges.setdefault(launch.kernel.symbol, launch.range.to_dict())
    return CacheEntry(
        name=compiled.name, target=compiled.target, cubin=compiled.cubin, ptx=compiled.stages.get("ptx"),
        launcher=compiled.stages["launcher"], kernels=[k.to_dict() for k in compiled.kernels],
        launch_ranges=ranges, diagnostics=[d.to_dict() for d in compiled.diagnostics])


def _warn(data: dict) -> None:
    from dsl.diagnostics import Diagnostic, DiagnosticWarning

    warnings.warn(DiagnosticWarning(Diagnostic.from_dict(data)), stacklevel=4)
