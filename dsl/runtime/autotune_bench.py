"""How one autotuning config is prepared and timed: on the GPU, or as a Python function.

`Tuner` (`dsl.runtime.autotune`) asks a `Bench` three things: the device a record belongs
to, a `Candidate` for a config (compiled and loaded: failing here means the config does not
compile), and the time of one call of a candidate. `snapshot` copies the memory of an
argument so the tuner can put it back between trials (device memory through the driver,
host arrays with `memmove`).

GPU timing: one warm-up call (it also loads the module and waits for the caller's pending
work on the stream), one call timed alone to size the batches, then `BATCHES` batches of
back-to-back calls of about `BATCH_MS` each, timed with CUDA events on the stream the
launches use; the answer is the median batch's time per call. The L2 cache is not flushed
between calls, as a kernel called in a loop sees it.
"""

from __future__ import annotations

import contextlib
import ctypes
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from dsl.language.autotune import Config

BATCHES = 5
BATCH_MS = 10.0
MAX_CALLS_PER_BATCH = 1000


class Candidate(Protocol):
    """A config made runnable for one argument signature."""

    kernels: list[dict[str, Any]]  # per kernel: symbol, registers, spills, smem, occupancy
    writes: tuple[str, ...]  # the tensor parameters its kernels write

    def run(self, args: tuple, kwargs: dict, stream: Any) -> Any: ...


class Bench(Protocol):
    def device(self) -> str:
        """What a record's timings belong to (device name and driver version)."""
        ...

    def on_device(self, names: list[str], args: tuple, kwargs: dict) -> contextlib.AbstractContextManager[Any]:
        """Makes current, while a call is tuned, the device its arrays are on."""
        ...

    def prepare(self, config: Config, args: tuple, kwargs: dict) -> Candidate:
        """The config compiled and loaded for these arguments; raises if it cannot be."""
        ...

    def measure(self, candidate: Candidate, args: tuple, kwargs: dict, stream: Any) -> float:
        """Milliseconds per call of `candidate` on these arguments; raises if it fails."""
        ...


# --- snapshots of what trials overwrite -----------------------------------------------------------

class Snapshot:
    """A copy of the memory an array spans (its first to its last element), to put back."""

    def __init__(self, value: Any):
        host = getattr(value, "__array_interface__", None)
        if host is not None:  # a host array (NumPy): the CPU benches' arguments
            self.ptr = int(host["data"][0])
            self.nbytes = _span(tuple(host["shape"]), host.get("strides"), int(value.dtype.itemsize))
            self.device = False
            self._copy = ctypes.create_string_buffer(max(1, self.nbytes))
            ctypes.memmove(self._copy, self.ptr, self.nbytes)
            return
        from dsl.runtime.dlpack import describe
        from dsl.runtime.driver import DeviceBuffer, check, driver

        ptr, shape, strides, dtype, _, _, _ = describe(value)
        self.ptr, self.device = int(ptr), True
        self.nbytes = _span(tuple(shape), tuple(s * dtype.nbytes for s in strides), dtype.nbytes)
        self._buffer = DeviceBuffer(self.nbytes)
        if self.nbytes:
            drv = driver()
            check(drv.cuCtxSynchronize(), "waiting for the GPU before saving an argument")
            check(drv.cuMemcpyDtoD(self._buffer.ptr, self.ptr, self.nbytes), "saving an argument")
            check(drv.cuCtxSynchronize(), "saving an argument")

    def restore(self) -> None:
        if not self.nbytes:
            return
        if not self.device:
            ctypes.memmove(self.ptr, self._copy, self.nbytes)
            return
        from dsl.runtime.driver import check, driver

        drv = driver()
        check(drv.cuCtxSynchronize(), "waiting for the trial before restoring an argument")
        check(drv.cuMemcpyDtoD(self.ptr, self._buffer.ptr, self.nbytes), "restoring an argument")
        check(drv.cuCtxSynchronize(), "restoring an argument")

    def free(self) -> None:
        if self.device:
            self._buffer.free()


def snapshot(value: Any) -> Snapshot:
    return Snapshot(value)


def _span(shape: tuple, strides_bytes: Any, itemsize: int) -> int:
    """Bytes from an array's first element to the end of its last."""
    if any(s == 0 for s in shape):
        return 0
    if strides_bytes is None:  # C-contiguous
        n = itemsize
        for s in shape:
            n *= s
        return n
    return sum((s - 1) * abs(st) for s, st in zip(shape, strides_bytes)) + itemsize


# --- the GPU --------------------------------------------------------------------------------------

@dataclass
class SpecializationCandidate:
    """A config's loaded jit specialization (`dsl.runtime.jit_call`)."""

    spec: Any
    kernels: list[dict[str, Any]] = field(default_factory=list)
    writes: tuple[str, ...] = ()

    def run(self, args: tuple, kwargs: dict, stream: Any) -> Any:
        from dsl.runtime.jit_call import launch_specialization

        return launch_specialization(self.spec, args, kwargs, stream)


class GpuBench:
    """Compiles each config's specialization of `jit_fn` and times it with CUDA events."""

    def __init__(self, jit_fn: Any):
        self.fn = jit_fn

    def device(self) -> str:
        from dsl.runtime.driver import check, current_context, driver

        version = int(check(driver().cuDriverGetVersion(), "cuDriverGetVersion"))
        return f"{current_context().name}, driver {_kernel_driver()}CUDA {version // 1000}.{version % 1000 // 10}"

    def on_device(self, names: list[str], args: tuple, kwargs: dict) -> contextlib.AbstractContextManager[Any]:
        """The context of the GPU the call's arrays are on, current while the call is tuned: its
        name keys the records, and the timing events must live in the context of the stream."""
        from dsl.runtime import devices, driver

        device = devices.common_device(devices.call_arguments(names, args, kwargs), ask_driver=True)
        if device is None:
            return contextlib.nullcontext()
        return driver.on_context(driver.launch_context(device))

    def prepare(self, config: Config, args: tuple, kwargs: dict) -> Candidate:
        from dsl.diagnostics import DiagnosticWarning
        from dsl.language.decorators import hint_overrides
        from dsl.runtime.jit_call import build_specialization

        with hint_overrides(config.hints), warnings.catch_warnings():
            warnings.simplefilter("ignore", DiagnosticWarning)  # spills and occupancy: the table shows them
            spec = build_specialization(self.fn, args, kwargs)
        writes = tuple(name for name, fact in spec.rt.access.items() if fact[2] is not None)
        return SpecializationCandidate(spec, kernel_figures(spec.entry.kernels), writes)

    def measure(self, candidate: Candidate, args: tuple, kwargs: dict, stream: Any) -> float:
        handle = launch_stream(args, kwargs, stream)
        return time_on_gpu(lambda: candidate.run(args, kwargs, handle), handle)


def _kernel_driver() -> str:
    """The NVIDIA kernel module's version (`580.65.06 `) where Linux tells it, else nothing: the
    CUDA version a driver supports does not change with its bug-fix releases."""
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as f:
            words = f.readline().split()
    except OSError:
        return ""
    found = [w for w in words if w[:1].isdigit() and w.count(".") >= 1]
    return f"{found[0]} " if found else ""


def kernel_figures(kernels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the tuning table shows of each kernel (from the compiler's `KernelInfo`s)."""
    out = []
    for k in kernels:
        res = k.get("resources") or {}
        out.append({"kernel": k.get("symbol"), "registers": res.get("registers"),
                    "spill_stores": res.get("spill_stores", 0), "spill_loads": res.get("spill_loads", 0),
                    "smem": (res.get("static_smem") or 0) + (k.get("dynamic_smem") or 0),
                    "occupancy": res.get("occupancy")})
    return out


def launch_stream(args: tuple, kwargs: dict, stream: Any) -> int:
    """The raw stream the launches go on: `stream=`, else the last tensor's framework's current
    stream, as the launcher picks it (`Runtime._read_args`), else the default stream."""
    from dsl.diagnostics import ArgumentError
    from dsl.runtime.dlpack import describe
    from dsl.runtime.streams import FRAMEWORK_STREAMS, stream_handle

    if stream is not None:
        return stream_handle(stream)
    found = 0
    for value in (*args, *kwargs.values()):
        if getattr(value, "shape", None) is None:
            continue
        try:
            _, _, _, _, device, framework, _ = describe(value)
        except ArgumentError:
            continue
        if framework in FRAMEWORK_STREAMS:
            found = FRAMEWORK_STREAMS[framework](device)
    return found


def time_on_gpu(run: Callable[[], Any], stream: int) -> float:
    """Milliseconds per call of `run` on `stream` (see the module docstring)."""
    from dsl.runtime.driver import check, driver

    drv = driver()
    run()
    check(drv.cuStreamSynchronize(stream), "the warm-up call")
    start = check(drv.cuEventCreate(0), "cuEventCreate")
    stop = check(drv.cuEventCreate(0), "cuEventCreate")

    def batch(calls: int) -> float:
        check(drv.cuEventRecord(start, stream), "cuEventRecord")
        for _ in range(calls):
            run()
        check(drv.cuEventRecord(stop, stream), "cuEventRecord")
        check(drv.cuEventSynchronize(stop), "the timed calls")
        return float(check(drv.cuEventElapsedTime(start, stop), "cuEventElapsedTime")) / calls

    try:
        one = batch(1)
        calls = max(1, min(MAX_CALLS_PER_BATCH, int(BATCH_MS / max(one, 1e-3))))
        return statistics.median(batch(calls) for _ in range(BATCHES))
    finally:
        drv.cuEventDestroy(start)
        drv.cuEventDestroy(stop)


# --- Python functions (CPU tests) -----------------------------------------------------------------

@dataclass
class PythonCandidate:
    config: Config
    launch: Callable[..., Any]
    writes: tuple[str, ...] = ()
    kernels: list[dict[str, Any]] = field(default_factory=list)

    def run(self, args: tuple, kwargs: dict, stream: Any) -> Any:
        return self.launch(self.config, *args, **kwargs)


class PythonBench:
    """Runs each config as `launch(config, *args, **kwargs)`, a Python function, on the CPU.

    `writes` names the parameters `launch` writes (what the compiler would report for a
    kernel); `timer(config)`, when given, is the config's time in milliseconds instead of the
    measured wall time (so CPU tests choose deterministically); `launch` still runs every
    trial. A config for which `check(config)` raises does not "compile".
    """

    def __init__(self, launch: Callable[..., Any], *, writes: tuple[str, ...] = (),
                 timer: Callable[[Config], float] | None = None, check: Callable[[Config], Any] | None = None,
                 device: str = "python"):
        self.launch, self.writes, self.timer, self.check, self.name = launch, tuple(writes), timer, check, device

    def on_device(self, names: list[str], args: tuple, kwargs: dict) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()

    def device(self) -> str:
        return self.name

    def prepare(self, config: Config, args: tuple, kwargs: dict) -> Candidate:
        if self.check is not None:
            self.check(config)
        return PythonCandidate(config, self.launch, self.writes)

    def measure(self, candidate: Candidate, args: tuple, kwargs: dict, stream: Any) -> float:
        started = time.perf_counter()
        candidate.run(args, kwargs, stream)
        elapsed = (time.perf_counter() - started) * 1e3
        config = getattr(candidate, "config", None)
        return float(self.timer(config)) if self.timer is not None and config is not None else elapsed
