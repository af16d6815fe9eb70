"""The NVIDIA tools outside MLIR: ptxas (cubin + resource figures), nvdisasm (SASS), libdevice.

They come from the `nvidia-cuda-nvcc` / `nvidia-cuda-nvdisasm` wheels, so no CUDA toolkit
is needed; `KDSL_PTXAS` / `KDSL_NVDISASM` or a toolkit under `CUDA_HOME` take precedence.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

from dsl import environment
from dsl.compiler.artifacts import Resources


def _wheel_roots() -> list[Path]:
    try:
        import nvidia  # namespace package of the NVIDIA wheels
    except ImportError:
        return []
    return [Path(p) for p in getattr(nvidia, "__path__", [])]


def _candidates(tool: str) -> list[str]:
    """Where `tool` may be, in order of preference: `CUDA_HOME`, the NVIDIA wheels, the
    default toolkit, `PATH`."""
    candidates = []
    if os.environ.get("CUDA_HOME"):
        candidates.append(Path(os.environ["CUDA_HOME"]) / "bin" / tool)
    for root in _wheel_roots():
        candidates += sorted(root.glob(f"cu*/bin/{tool}"), reverse=True) + [root / "cuda_nvcc" / "bin" / tool]
    candidates.append(Path("/usr/local/cuda/bin") / tool)
    found = [str(c) for c in candidates if c.is_file() and os.access(c, os.X_OK)]
    on_path = shutil.which(tool)
    return found + ([on_path] if on_path and on_path not in found else [])


def _find(tool: str, env_var: str) -> str | None:
    if environment.path(env_var):
        return environment.path(env_var)
    found = _candidates(tool)
    return found[0] if found else None


# ptxas releases that compile some programs wrongly, found by generated programs (tests/fuzz)
# compared on an H200, and what each gets wrong. Another ptxas found is preferred.
KNOWN_BAD_PTXAS = {
    (13, 0): "miscompiles 8- and 16-bit integer code: it drops the sign extension after an operation "
             "whose result leaves the 16-bit range (`-x` of an i16 -32768, widened to i64, gave 32768; 13.5 "
             "gives -32768), folds `max(x, 1) == 1` of a u16 the wrong way round, and compares a "
             "sign-extended i8 as u16 in 32 bits; it computes `b + ((-a) >> k)` as `b - (a >> k)`; "
             "and it can hang a warp: a loop counter it keeps in a uniform (warp-wide) register is counted down "
             "once by each group of lanes that a branch out of a divergent region split, so the last group "
             "starts at zero and loops about 2**32 times",
}


@functools.cache
def ptxas_release(path: str) -> tuple[int, int] | None:
    """(major, minor) of the CUDA release a ptxas belongs to, from `ptxas --version` (about 6 ms)."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"release (\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


@functools.cache
def ptxas_path() -> str | None:
    """`KDSL_PTXAS`, else the first ptxas found whose release is not known to miscompile
    (else the first found: `ptxas_problem` says what it gets wrong)."""
    if environment.path("KDSL_PTXAS"):
        return environment.path("KDSL_PTXAS")
    found = _candidates("ptxas")
    for path in found:
        if ptxas_release(path) not in KNOWN_BAD_PTXAS:
            return path
    return found[0] if found else None


def usable_ptxas() -> str:
    """The ptxas to run, or a `ToolError` saying why there is none (naming a known problem of
    the one found, once per process, as a `ToolchainWarning`)."""
    path = ptxas_path()
    if path is None:
        raise ToolError("ptxas not found (install nvidia-cuda-nvcc or set KDSL_PTXAS)")
    if not (Path(path).is_file() and os.access(path, os.X_OK)):
        raise ToolError(f"ptxas {path} is not an executable file (KDSL_PTXAS names it)")
    _warn_of_known_problems()
    return path


def ptxas_problem() -> str | None:
    """What the ptxas in use is known to compile wrongly, as a sentence; None when nothing is."""
    path = ptxas_path()
    release = ptxas_release(path) if path else None
    if release is None or release not in KNOWN_BAD_PTXAS:
        return None
    return (f"ptxas {release[0]}.{release[1]} ({path}) {KNOWN_BAD_PTXAS[release]}; kdsl works around the "
            f"miscompiles (8- and 16-bit integer arithmetic and comparisons are done in 32 bits, signed shifts as "
            f"unsigned ones) but not the hang: install nvidia-cuda-nvcc>=13.5 or set KDSL_PTXAS to a newer ptxas")


@functools.cache
def nvdisasm_path() -> str | None:
    return _find("nvdisasm", "KDSL_NVDISASM")


@functools.cache
def libdevice_path() -> str | None:
    if environment.path("KDSL_LIBDEVICE"):
        return environment.path("KDSL_LIBDEVICE")
    roots = [Path(os.environ["CUDA_HOME"])] if os.environ.get("CUDA_HOME") else []
    for root in _wheel_roots():
        roots += sorted(root.glob("cu*"), reverse=True) + [root / "cuda_nvcc"]
    roots.append(Path("/usr/local/cuda"))
    for root in roots:
        for candidate in sorted(root.glob("nvvm/libdevice/libdevice*.bc")):
            return str(candidate)
    return None


@functools.cache
def toolchain_version() -> str:
    """Identifies the toolchain for cache keys: the MLIR library and ptxas files.

    Their path, size and modification time stand for their versions: reading them costs
    microseconds, where asking `ptxas --version` would start a process on every cold run.
    """
    parts = []
    import importlib.util

    spec = importlib.util.find_spec("mlir")  # found, not imported: loading MLIR takes ~0.3 s
    if spec is not None and spec.submodule_search_locations:
        lib_dir = Path(next(iter(spec.submodule_search_locations))) / "_mlir_libs"
        parts += [_file_identity(p) for p in sorted(lib_dir.glob("_mlir.*.so"))]
    else:
        parts.append("mlir-missing")
    path = ptxas_path()
    parts.append(_file_identity(Path(path)) if path and Path(path).is_file() else f"no-ptxas:{path}")
    return "+".join(parts)


def _file_identity(path: Path) -> str:
    st = path.stat()
    return f"{path.name}:{st.st_size}:{int(st.st_mtime)}"


class ToolError(Exception):
    """A backend tool failed; the message holds its output."""


def strip_debug_sections(ptx: str) -> str:
    """Keeps `.file`/`.loc` line info but drops the `debug` target flag and DWARF sections.

    Like `nvcc -lineinfo`: ptxas then optimises exactly as without line info (the `debug`
    flag alone made ptxas spend registers), yet profilers and our maps still see lines.
    """
    ptx = re.sub(r"^(\.target[ \t]+sm_\w+),[ \t]*debug[ \t]*$", r"\1", ptx, flags=re.M)
    ptx = re.sub(r"^\s*\.section\s+\.debug_\w+\s*\{.*?^\s*\}\s*$\n?", "", ptx, flags=re.M | re.S)
    ptx = re.sub(r"^\s*\.section\s+\.debug_\w+\s*\{\s*\}\s*$\n?", "", ptx, flags=re.M)
    return ptx


_FUNC = re.compile(r"Compiling entry function '([^']+)'")
_PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:, used \d+ barriers)?(?:, (\d+) bytes smem)?")


_PROPS_FOR = re.compile(r"Function properties for ([^'\s:]+)\s*$")  # a kernel, or a device function it calls
# The CUDA driver's PTX compiler logs one line per kernel instead, without spill figures.
_DRIVER_FUNC = re.compile(r"Function properties for '([^']+)'")
_DRIVER_USED = re.compile(r"used (\d+) registers, used \d+ barriers, (\d+) stack, (\d+) bytes smem")


def parse_ptxas_info(text: str) -> dict[str, Resources]:
    """Per-kernel resources from `ptxas -v` output, or from the driver's verbose JIT log."""
    out: dict[str, Resources] = {}
    current = None
    for line in text.splitlines():
        if m := _FUNC.search(line) or _DRIVER_FUNC.search(line):
            current = out.setdefault(m.group(1), Resources())
        elif m := _PROPS_FOR.search(line):  # a device function's own figures (`__nv_exp2f`) are not the kernel's
            current = out.get(m.group(1))
        elif current is not None and (m := _PROPS.search(line)):
            current.stack_bytes, current.spill_stores, current.spill_loads = map(int, m.groups())
        elif current is not None and (m := _USED.search(line)):
            current.registers = int(m.group(1))
            current.static_smem = int(m.group(2) or 0)
        elif current is not None and (m := _DRIVER_USED.search(line)):
            current.registers, current.stack_bytes, current.static_smem = map(int, m.groups())
    return out


def assemble(ptx: str, arch: str, while_running: Callable[[], None] | None = None, *,
             timeout: float | None = None, device_debug: bool = False) -> tuple[bytes, dict[str, Resources], str]:
    """Runs ptxas: returns (cubin, resources per kernel, ptxas log).

    `device_debug`: `-g`, device debug information without optimisation (what cuda-gdb
    needs to stop at lines and step), instead of `-O3 -lineinfo`.

    `while_running` is called once ptxas has started, to use the time its process takes;
    past `timeout` seconds ptxas is killed and that is a `ToolError`.
    """
    path = usable_ptxas()
    with tempfile.TemporaryDirectory(prefix="kdsl-") as tmp:
        src, dst = Path(tmp) / "k.ptx", Path(tmp) / "k.cubin"
        src.write_text(ptx)
        optimise = ["-g"] if device_debug else ["-O3", "-lineinfo"]
        proc = subprocess.Popen([path, f"-arch={arch}", *optimise, "-v", str(src), "-o", str(dst)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            if while_running is not None:
                while_running()
        finally:
            try:
                log, _ = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                raise ToolError(f"ptxas did not finish within {timeout:g} s") from None
        if proc.returncode != 0:
            raise ToolError(log.strip())
        return dst.read_bytes(), parse_ptxas_info(log), log


class ToolchainWarning(UserWarning):
    """The toolchain in use is known to compile some programs wrongly."""


@functools.cache
def _warn_of_known_problems() -> None:
    """Once per process, at the first assembly: a ptxas known to miscompile is named."""
    problem = ptxas_problem()
    if problem is not None:
        warnings.warn(problem, ToolchainWarning, stacklevel=3)


def disassemble(cubin: bytes) -> str | None:
    """SASS with line annotations, or None when nvdisasm is unavailable. Once per cubin: nvdisasm
    takes most of a second to start whatever the cubin's size, and a kernel that a jit function
    launches is the same cubin in an analysis twice (alone and inside the jit)."""
    path = nvdisasm_path()
    return None if path is None else _run_nvdisasm(path, cubin)


@functools.lru_cache(maxsize=16)  # a tensor-core kernel's SASS is a few hundred KiB
def _run_nvdisasm(path: str, cubin: bytes) -> str:
    with tempfile.TemporaryDirectory(prefix="kdsl-") as tmp:
        src = Path(tmp) / "k.cubin"
        src.write_bytes(cubin)
        proc = subprocess.run([path, "-c", "-g", str(src)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise ToolError(proc.stderr.strip())
        return proc.stdout
