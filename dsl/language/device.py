"""Attributes of the GPU a launch runs on: `dsl.sm_count()`, `dsl.device_attribute(name)`.

Inside a `@dsl.jit` function they are run-time host values: the generated launcher reads
them from the current device when it runs (once per device, then cached), so a persistent
kernel's grid can be `min(dsl.sm_count(), tiles)` and still fit every GPU it runs on.

Called from plain Python they answer for the current device, or, where no GPU is present
(the editor, CI), with the default target's figure from `dsl.targets`, so a
module that computes a launch configuration at import time still loads and compiles.
They are host facts: kernels read `dsl.grid_dim` instead, or take the value as an argument.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# The attributes kdsl knows by name (`CU_DEVICE_ATTRIBUTE_<NAME>` in the CUDA driver API),
# each with its value for a target where no GPU is present.
ATTRIBUTES: dict[str, Callable[[Any], int]] = {
    "multiprocessor_count": lambda t: t.sm_count,
    "max_threads_per_block": lambda t: t.max_threads_per_block,
    "max_block_dim_x": lambda t: t.max_block_dims[0],
    "max_block_dim_y": lambda t: t.max_block_dims[1],
    "max_block_dim_z": lambda t: t.max_block_dims[2],
    "max_grid_dim_x": lambda t: t.max_grid_dims[0],
    "max_grid_dim_y": lambda t: t.max_grid_dims[1],
    "max_grid_dim_z": lambda t: t.max_grid_dims[2],
    "max_shared_memory_per_block": lambda t: t.static_smem_per_block,
    "max_shared_memory_per_block_optin": lambda t: t.max_smem_per_block,
    "max_shared_memory_per_multiprocessor": lambda t: t.smem_per_sm,
    "max_registers_per_block": lambda t: t.registers_per_sm,
    "max_registers_per_multiprocessor": lambda t: t.registers_per_sm,
    "max_threads_per_multiprocessor": lambda t: t.max_warps_per_sm * 32,
    "max_blocks_per_multiprocessor": lambda t: t.max_blocks_per_sm,
    "warp_size": lambda t: 32,
    "compute_capability_major": lambda t: t.compute_capability[0],
    "compute_capability_minor": lambda t: t.compute_capability[1],
}


def check_attribute_name(name: Any) -> str:
    """`name` if kdsl knows it; else a ValueError (DSL301 inside a jit function) listing them."""
    if not isinstance(name, str) or name not in ATTRIBUTES:
        raise ValueError(f"unknown device attribute {name!r}; known: {', '.join(sorted(ATTRIBUTES))}")
    return name


def target_value(name: str, target: str | None = None) -> int:
    """What the attribute is on `target` (default sm_90) without a GPU to ask."""
    from dsl.targets import get_target

    return ATTRIBUTES[check_attribute_name(name)](get_target(target))


def device_attribute(name: str) -> int:
    """An attribute of the GPU (`"multiprocessor_count"`, `"max_shared_memory_per_block_optin"`,
    ...): in a `@dsl.jit` function, read by the launcher from the device it launches on (the
    one its arrays are on); elsewhere, of the current device (as `torch.cuda` answers)."""
    check_attribute_name(name)
    value = _current_device_attribute(name)  # None without a GPU
    return target_value(name) if value is None else value


# Reading the current GPU belongs to the runtime, above this layer: the `dsl` package plugs
# it in when it is imported.
_current_device_attribute: Any = lambda name: None  # noqa: E731


def sm_count() -> int:
    """The number of SMs of the GPU (for persistent-kernel grids); see `device_attribute`."""
    return device_attribute("multiprocessor_count")
