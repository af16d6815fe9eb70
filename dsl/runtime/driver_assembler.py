"""PTX to cubin inside this process, with the PTX compiler built into the CUDA driver.

Run-time compiles use it where the toolkit's ptxas is missing, or when asked to
(`KDSL_ASSEMBLER=driver`). It is ptxas at the driver's own version, so its cubin always
loads on the machine that compiled it, and it runs in-process (2-3 ms against 22-30 ms for
the ptxas process on a small kernel, H200 host). It is not the default because its code
can be slower: with driver 580 the softmax example ran at 3.84 TB/s against 4.00-4.04
with the toolkit's ptxas 13 (`benchmarks/RESULTS.md`). Its verbose log gives registers,
shared memory and the stack frame; spill figures, which it lacks, come from the toolkit's
ptxas when a kernel has a stack frame and ptxas is there. Its cubins go into the disk cache
under the same keys as ptxas' (one cubin per specialization, whichever built it first).
"""

from __future__ import annotations

import ctypes
import os

from dsl.compiler.artifacts import Resources
from dsl.compiler.toolchain import ToolError, parse_ptxas_info, ptxas_path
from dsl.compiler.toolchain import assemble as assemble_with_ptxas
from dsl.runtime.driver import driver, error_text
from dsl.targets import TARGETS, get_target

LOG_BYTES = 1 << 16


def wanted(target: str, gpu_arch: str) -> bool:
    """Whether a run-time compile for `target` on a `gpu_arch` GPU uses the driver's compiler:
    when asked to (`KDSL_ASSEMBLER=driver`) or when the toolkit's ptxas is missing, and only
    for the GPU's own architecture (the driver compiles for nothing else)."""
    if os.environ.get("KDSL_ASSEMBLER", "ptxas") != "driver" and ptxas_path() is not None:
        return False
    return target == gpu_arch


def assemble(ptx: str, arch: str) -> tuple[bytes, dict[str, Resources], str]:
    """(cubin, resources per kernel, log) for the current context's GPU, which is `arch`."""
    drv = driver()
    opt = drv.CUjit_option
    info, errors = bytearray(LOG_BYTES), bytearray(LOG_BYTES)  # the driver writes its logs here
    options = [opt.CU_JIT_INFO_LOG_BUFFER, opt.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, opt.CU_JIT_ERROR_LOG_BUFFER,
               opt.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, opt.CU_JIT_LOG_VERBOSE, opt.CU_JIT_GENERATE_LINE_INFO]
    values = [info, LOG_BYTES, errors, LOG_BYTES, 1, 1]
    err, link = drv.cuLinkCreate(len(options), options, values)
    if err:
        raise ToolError(f"cuLinkCreate failed: {' '.join(error_text(err))}")
    try:
        data = ptx.encode() + b"\0"
        (err,) = drv.cuLinkAddData(link, drv.CUjitInputType.CU_JIT_INPUT_PTX, data, len(data), b"kernel.ptx",
                                   0, [], [])
        if not err:
            err, address, size = drv.cuLinkComplete(link)
        if err:
            log = _text(errors) or _text(info)
            raise ToolError(f"the driver's PTX compiler ({arch}) failed: {' '.join(error_text(err))}\n{log}")
        cubin = ctypes.string_at(address, size)  # owned by the link state: copy before destroying it
    finally:
        drv.cuLinkDestroy(link)
    log = _text(info)
    resources = parse_ptxas_info(log)
    reserved = get_target(arch).smem_reserved_per_block if arch in TARGETS else 0
    for figures in resources.values():  # the driver counts the block's system reservation too
        if figures.static_smem >= reserved:
            figures.static_smem -= reserved
    if any(r.stack_bytes for r in resources.values()) and ptxas_path() is not None:
        _spills_from_ptxas(ptx, arch, resources)
    return cubin, resources, log


def _spills_from_ptxas(ptx: str, arch: str, resources: dict[str, Resources]) -> None:
    """The driver's log gives a kernel's stack frame but not its spills; a frame means there
    may be some, and then the toolkit's ptxas (when installed) says how many bytes."""
    try:
        _, exact, _ = assemble_with_ptxas(ptx, arch)
    except ToolError:
        return
    for symbol, figures in exact.items():
        if symbol in resources:
            resources[symbol].spill_stores, resources[symbol].spill_loads = figures.spill_stores, figures.spill_loads


def _text(buffer: bytearray) -> str:
    return bytes(buffer).split(b"\0", 1)[0].decode(errors="replace").strip()
