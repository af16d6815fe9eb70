"""The GPU targets kdsl compiles for, and each one's limits, in one table (shared by every layer,
like `dsl/diagnostics.py`).

The figures are the CUDA programming guide's per-compute-capability limits; the launch
checks (DSL203/204/206), the occupancy calculator and the runtime all read them here.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_TARGET = "sm_90"


@dataclass(frozen=True)
class Target:
    name: str  # "sm_90"
    max_threads_per_block: int = 1024
    max_block_dims: tuple[int, int, int] = (1024, 1024, 64)
    max_grid_dims: tuple[int, int, int] = (2**31 - 1, 65535, 65535)
    static_smem_per_block: int = 48 * 1024
    max_smem_per_block: int = 48 * 1024  # with the opt-in attribute for dynamic smem
    smem_per_sm: int = 64 * 1024
    smem_reserved_per_block: int = 1024
    registers_per_sm: int = 65536
    max_registers_per_thread: int = 255
    min_registers_per_thread: int = 24  # ptxas raises a smaller `.maxnreg` to this
    max_warps_per_sm: int = 64
    max_blocks_per_sm: int = 32
    register_granularity: int = 256  # registers allocated per warp in units of this
    smem_granularity: int = 128
    max_cluster_size: int = 1
    # What `dsl.sm_count()` answers where no GPU is present (the editor, CI): the SM count of
    # the architecture's data-center part. A run reads the real device's count.
    sm_count: int = 108
    ptx_version: int = 80  # the PTX ISA the back end emits (8.4 on sm_89+: fp8 mma.sync)

    @property
    def compute_capability(self) -> tuple[int, int]:
        digits = self.name.removeprefix("sm_").rstrip("a")
        return int(digits[:-1]), int(digits[-1])


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target("sm_80", max_smem_per_block=163 * 1024, smem_per_sm=164 * 1024, sm_count=108),  # A100
        Target("sm_86", max_smem_per_block=99 * 1024, smem_per_sm=100 * 1024,
               max_warps_per_sm=48, max_blocks_per_sm=16, sm_count=84),  # A40
        Target("sm_89", max_smem_per_block=99 * 1024, smem_per_sm=100 * 1024,
               max_warps_per_sm=48, max_blocks_per_sm=24, sm_count=142, ptx_version=84),  # L40S
        Target("sm_90", max_smem_per_block=227 * 1024, smem_per_sm=228 * 1024, max_cluster_size=8,
               sm_count=132, ptx_version=84),  # H100 / H200 SXM
        # Hopper with its architecture-specific instructions (wgmma, setmaxnreg): the same
        # GPU as sm_90, whose cubins run only there.
        Target("sm_90a", max_smem_per_block=227 * 1024, smem_per_sm=228 * 1024, max_cluster_size=8,
               sm_count=132, ptx_version=84),
    )
}


def get_target(name: str | None) -> Target:
    """The target named `name` (default sm_90); unknown names raise ValueError listing the known ones."""
    name = name or DEFAULT_TARGET
    if name not in TARGETS:
        raise ValueError(f"unknown target {name!r}; known targets: {', '.join(TARGETS)}")
    return TARGETS[name]


def theoretical_occupancy(
    target: Target, block_threads: int, registers: int, smem_per_block: int
) -> float:
    """Resident warps per SM over the maximum, limited by warps, registers and shared memory."""
    if block_threads <= 0:
        return 0.0
    warps_per_block = -(-block_threads // 32)
    limit_warps = target.max_warps_per_sm // warps_per_block
    limit_blocks = target.max_blocks_per_sm
    if registers > 0:
        regs_per_warp = -(-registers * 32 // target.register_granularity) * target.register_granularity
        warps_by_regs = target.registers_per_sm // regs_per_warp
        limit_regs = warps_by_regs // warps_per_block
    else:
        limit_regs = limit_blocks
    if smem_per_block > 0:
        per_block = -(-smem_per_block // target.smem_granularity) * target.smem_granularity
        per_block += target.smem_reserved_per_block
        limit_smem = target.smem_per_sm // per_block
    else:
        limit_smem = limit_blocks
    blocks = max(0, min(limit_warps, limit_blocks, limit_regs, limit_smem))
    return min(1.0, blocks * warps_per_block / target.max_warps_per_sm)
