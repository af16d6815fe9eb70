"""Running compiled kernels: module loading, argument packing and launches over the driver API.

Nothing here touches the GPU at import time; the driver is initialised on first use and
`NoGPUError` says plainly when there is no GPU to run on.

Concurrency: any thread may call any jit function at any time. What one call finds out
(the device and framework of its arguments, its parameter buffers) lives in thread-local
state of the `Runtime` (`launch.py`), never in shared attributes; a jit function's
fast-path pair (arity, launcher) is one tuple replaced whole; a missing specialization is
compiled under the function's lock, once; the caches shared between threads (compiled
functions in memory, pointer facts, device attributes) are locked or only ever gain
complete entries. The user's objects are never changed, not even for a moment.
"""

from dsl.runtime.dlpack import ArgumentError
from dsl.runtime.driver import DriverError, LaunchError, NoGPUError

__all__ = ["ArgumentError", "DriverError", "LaunchError", "NoGPUError", "run_function"]


def run_function(source: str, path: str, function: str, *, target: str | None = None) -> dict:
    """See `dsl.runtime.run.run_function`."""
    from dsl.runtime.run import run_function as _run

    return _run(source, path, function, target=target)
