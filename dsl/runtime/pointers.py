"""Which memory a data pointer is in, asked of the driver once per allocation.

An object's `__cuda_array_interface__` or DLPack capsule only claims that its pointer is
GPU memory; a host pointer behind it would make the kernel fault (or, where the GPU can
reach pageable memory, read and write host memory at PCIe speed). So before launching,
the runtime asks `cuPointerGetAttributes` what the pointer is:

- device memory (`cuMemAlloc`, memory pools, CuPy, PyTorch, VMM mappings): taken, and its
  device ordinal is checked against the launch's like any other array's;
- managed memory (`cuMemAllocManaged`): taken, on any device;
- page-locked host memory (`cuMemHostAlloc`, registered memory) and memory the driver does
  not know (pageable host memory): refused, as DLPack's CUDA-host arrays and host arrays
  are. Kernels can reach page-locked memory, but every access crosses the bus, which is
  never what a kernel argument means here: copy it to the device.

Only the answers that let a launch through are cached, keyed by the allocation's address
range (`CU_POINTER_ATTRIBUTE_RANGE_START_ADDR` / `RANGE_SIZE`), so repeated launches on
the same buffers, and every view into one pool segment, cost a `bisect` and no driver call.
The cache holds at most `CAPACITY` ranges and starts over when full. The assumption it
makes: an address range that was device memory stays device memory of the same device
while it is cached. Freeing and re-allocating device memory keeps that true (a new
allocation overlapping a cached range replaces it when it misses); a freed device range
coming back as host memory at the same addresses would be taken for device memory until
the cache starts over. `CU_POINTER_ATTRIBUTE_BUFFER_ID` would tell, but at the price of a
driver call per argument and launch, which is what the cache is there to avoid. PyTorch
tensors do not come here: a CUDA tensor is device memory by construction.
"""

from __future__ import annotations

import bisect
import ctypes
import threading
from dataclasses import dataclass
from typing import Any

from dsl.diagnostics import ArgumentError

# CUpointer_attribute and CUmemorytype values (cuda.h)
_MEMORY_TYPE, _IS_MANAGED, _DEVICE_ORDINAL, _RANGE_START, _RANGE_SIZE = 2, 8, 9, 11, 12
_HOST, _DEVICE = 1, 2
CAPACITY = 4096


@dataclass(frozen=True)
class PointerInfo:
    kind: str  # "device" | "managed" | "host" (page-locked) | "unknown" (not CUDA memory)
    device: int | None  # ordinal of device memory
    start: int  # the allocation's address range
    size: int


_lib: Any = None


def query_pointer(ptr: int) -> PointerInfo:
    """What the driver says about `ptr` (one `cuPointerGetAttributes` call)."""
    global _lib
    from dsl.runtime.driver import driver

    driver()  # initialised (or NoGPUError)
    if _lib is None:
        lib = ctypes.CDLL("libcuda.so.1")
        lib.cuPointerGetAttributes.argtypes = [ctypes.c_uint, ctypes.POINTER(ctypes.c_int),
                                               ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint64]
        lib.cuPointerGetAttributes.restype = ctypes.c_int
        _lib = lib
    which = (_MEMORY_TYPE, _IS_MANAGED, _DEVICE_ORDINAL, _RANGE_START, _RANGE_SIZE)
    attrs = (ctypes.c_int * len(which))(*which)
    values = (ctypes.c_uint64 * len(which))()  # zeroed: 4-byte answers fill the low half
    slots = (ctypes.c_void_p * len(which))(*[ctypes.addressof(values) + 8 * i for i in range(len(which))])
    if _lib.cuPointerGetAttributes(len(which), attrs, slots, ptr):
        return PointerInfo("unknown", None, ptr, 0)  # not memory of a CUDA context
    memory_type, managed, ordinal, start, size = (int(v) for v in values)
    ordinal = ctypes.c_int32(ordinal & 0xFFFFFFFF).value
    if managed & 0xFFFFFFFF:
        return PointerInfo("managed", None, start, size)
    if memory_type & 0xFFFFFFFF == _DEVICE:
        return PointerInfo("device", ordinal, start, size)
    return PointerInfo("host" if memory_type & 0xFFFFFFFF == _HOST else "unknown", None, start, size)


class AllocationCache:
    """Device and managed allocations seen so far, by address range (see the module docstring).

    Safe between threads: readers take one snapshot (sorted starts, ranges by start), which
    writers replace whole, under a lock, with a new one (new allocations are rare; lookups
    are every launch)."""

    def __init__(self, query: Any = query_pointer, capacity: int = CAPACITY):
        self.query = query
        self.capacity = capacity
        self._snapshot: tuple[list[int], dict[int, PointerInfo]] = ([], {})
        self._lock = threading.Lock()

    @property
    def starts(self) -> list[int]:
        return self._snapshot[0]

    @property
    def ranges(self) -> dict[int, PointerInfo]:
        return self._snapshot[1]

    def info(self, ptr: int) -> PointerInfo:
        starts, ranges = self._snapshot
        i = bisect.bisect_right(starts, ptr) - 1
        if i >= 0:
            hit = ranges[starts[i]]
            if ptr < hit.start + hit.size:
                return hit
        info = self.query(ptr)
        if info.kind in ("device", "managed") and info.size > 0 and info.start <= ptr < info.start + info.size:
            self._add(info)
        return info

    def _add(self, info: PointerInfo) -> None:
        with self._lock:
            starts, ranges = self._snapshot
            if len(starts) >= self.capacity:
                starts, ranges = [], {}
            starts, ranges = list(starts), dict(ranges)
            lo = bisect.bisect_left(starts, info.start)
            if lo > 0:
                before = ranges[starts[lo - 1]]
                if before.start + before.size > info.start:
                    lo -= 1  # a stale range reaching into the new one
            hi = bisect.bisect_left(starts, info.start + info.size)
            for start in starts[lo:hi]:  # every one overlaps the new range: freed since
                del ranges[start]
            starts[lo:hi] = [info.start]
            ranges[info.start] = info
            self._snapshot = (starts, ranges)

    def clear(self) -> None:
        with self._lock:
            self._snapshot = ([], {})


ALLOCATIONS = AllocationCache()


def device_memory(ptr: int, name: str) -> int | None:
    """The device ordinal of the device memory at `ptr` (None for managed memory); refuses
    anything else with an ArgumentError naming parameter `name`."""
    info = ALLOCATIONS.info(ptr)
    if info.kind == "device":
        return info.device
    if info.kind == "managed":
        return None
    what = ("page-locked host memory" if info.kind == "host"
            else "memory the CUDA driver does not know (host memory, or freed)")
    raise ArgumentError(f"argument '{name}' points to {what} at {ptr:#x}, not GPU memory; kernels need device "
                        "or managed memory — copy it to the GPU first")
