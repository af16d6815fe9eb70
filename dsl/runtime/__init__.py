"""Running compiled kernels: module loading, argument packing and launches over the driver API.

Nothing here touches the GPU at import time; the driver is initialised on first use and
`NoGPUError` says plainly when there is no GPU to run on.
"""

from dsl.runtime.dlpack import ArgumentError
from dsl.runtime.driver import DriverError, LaunchError, NoGPUError

__all__ = ["ArgumentError", "DriverError", "LaunchError", "NoGPUError", "run_function"]


def run_function(source: str, path: str, function: str, *, target: str | None = None) -> dict:
    """See `dsl.runtime.run.run_function`."""
    from dsl.runtime.run import run_function as _run

    return _run(source, path, function, target=target)
