"""What `stream=` may be, and the current stream of the arguments' framework.

`stream=` is an int handle, a `CUstream`, or an object with `__cuda_stream__` (the CUDA
stream protocol: `(version, handle)`), `.cuda_stream` (PyTorch), `.ptr` (CuPy) or
`.handle`. A handle is an unsigned 64-bit value (0 is the legacy default stream, 1 and 2
are `CU_STREAM_LEGACY` and `CU_STREAM_PER_THREAD`); anything else (`-1`, `3.5`, `True`, an
int beyond 64 bits, a stream object whose handle is one of those) is refused with
`ArgumentError` before anything launches, instead of being truncated into a handle the
driver would dereference.

Without `stream=`, a launch whose tensors come from PyTorch or CuPy goes on that library's
current stream on the tensors' device (read only if the library is already imported), else
on the default stream (of the context the launch runs in).
"""

from __future__ import annotations

import operator
import sys
from typing import Any

from dsl.diagnostics import ArgumentError

STREAM_MAX = 2**64 - 1
_ADVICE = "pass an int handle, a CUstream, or a PyTorch/CuPy stream"


def stream_handle(stream: Any) -> int:
    """The raw CUstream handle of `stream=` (None: the default stream, 0)."""
    if stream is None:
        return 0
    if type(stream) is int:
        if 0 <= stream <= STREAM_MAX:
            return stream
        raise ArgumentError(f"stream={stream!r} is not a CUDA stream handle: handles are unsigned 64-bit values "
                            f"({_ADVICE})")
    if isinstance(stream, bool | float | complex | str | bytes):
        raise ArgumentError(f"stream={stream!r} is not a CUDA stream ({_ADVICE})")
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:
        try:
            value = protocol()
        except Exception as err:
            raise ArgumentError(f"stream={stream!r}: __cuda_stream__() failed: {err}") from None
        if isinstance(value, tuple):
            if len(value) != 2:
                raise ArgumentError(f"stream={stream!r}: __cuda_stream__() returned {value!r}, not "
                                    "(version, handle)")
            value = value[1]
        return _handle(value, stream, "__cuda_stream__() handle")
    for attr in ("cuda_stream", "ptr", "handle"):
        value = getattr(stream, attr, None)
        if value is not None:
            return _handle(value, stream, f"{attr}")
    return _handle(stream, stream, None)  # cuda.bindings CUstream (an index)


def _handle(value: Any, stream: Any, via: str | None) -> int:
    handle = None
    if not isinstance(value, bool):
        try:
            handle = operator.index(value)
        except TypeError:
            pass
    if handle is not None and 0 <= handle <= STREAM_MAX:
        return handle
    what = f"its {via} is {value!r}, not an unsigned 64-bit handle" if via else "not a CUDA stream"
    raise ArgumentError(f"stream={stream!r}: {what} ({_ADVICE})")


_torch_raw_stream: Any = None


def torch_stream(device: int | None) -> int:
    """PyTorch's current raw stream on `device` (default 0)."""
    global _torch_raw_stream
    fn = _torch_raw_stream
    if fn is None:
        torch = sys.modules["torch"]
        raw = getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)
        if raw is not None:
            fn = raw
        else:
            fn = lambda dev: torch.cuda.current_stream(dev).cuda_stream  # noqa: E731
        _torch_raw_stream = fn
    return fn(device if device is not None else 0)


def cupy_stream(device: int | None) -> int:
    """CuPy's current stream on `device` (CuPy's current device when None)."""
    cuda = sys.modules["cupy"].cuda
    if device is None:
        return cuda.get_current_stream().ptr
    try:
        return cuda.get_current_stream(device).ptr  # CuPy 12 and later take the device
    except TypeError:
        with cuda.Device(device):
            return cuda.get_current_stream().ptr


FRAMEWORK_STREAMS = {"torch": torch_stream, "cupy": cupy_stream}
