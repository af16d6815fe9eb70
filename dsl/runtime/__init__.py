"""Running compiled kernels: module loading, argument packing and launches over the driver API.

Nothing here touches the GPU at import time; the driver is initialised on first use and
`NoGPUError` says plainly when there is no GPU to run on.

Devices: a launch runs on the GPU its array arguments are on (`devices.py`; arrays on two
devices are an `ArgumentError` naming both, before anything compiles or launches), in that
device's context, with that device's module, limits and current torch / CuPy stream. What
is kept per device: its primary context and description (`driver.py`, retained once), a
module per context (`module.py`, loaded by the first launch there), per kernel the loaded
function and its shared-memory limit (the native path's slot per device, `_fastpath.c`).

Concurrency: any thread may call any jit function at any time, on any device, and threads
driving different GPUs run at once without waiting for each other. The rule: what is
created once (a device's primary context and description, a module in a context, a
kernel's function there, a specialization, a raised shared-memory limit) is created under a
lock and published complete; launches only read what exists and take no lock. What one
call finds out (the device and framework of its arguments, its parameter buffers in
Python) lives in thread-local state (`Runtime` in `launch.py`; the launch device in C,
`_fastpath.device()`), never in shared attributes. The native launch packs a kernel's one
parameter buffer and launches while holding the GIL, running no Python code in between, so
threads sharing a kernel never see each other's parameters. A jit function's fast-path
pair (arity, launcher) is one tuple replaced whole. A thread's current CUDA context is left
as the thread had it: a launch on another device pushes that device's context and pops it.
The user's objects are never changed, not even for a moment.
"""

from dsl.runtime.dlpack import ArgumentError
from dsl.runtime.driver import DriverError, LaunchError, NoGPUError

__all__ = ["ArgumentError", "DriverError", "LaunchError", "NoGPUError", "run_function"]


def run_function(source: str, path: str, function: str, *, target: str | None = None, device: int = 0) -> dict:
    """See `dsl.runtime.run.run_function`."""
    from dsl.runtime.run import run_function as _run

    return _run(source, path, function, target=target, device=device)
