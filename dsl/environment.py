"""Every `KDSL_*` environment variable, parsed and validated in one place.

Switches take `1`/`true`/`yes`/`on` and `0`/`false`/`no`/`off` (any case) or nothing; any other
value is a mistake, said once as a warning, and the switch keeps its default. Values are read
when asked for (tests and programs set them at run time), not at import, except where a module
decides once at import what it loads (`KDSL_PURE_PYTHON`). The README's table lists the same
variables from `VARIABLES`.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass


@dataclass(frozen=True)
class Variable:
    name: str
    kind: str  # "switch" | "path" | "choice"
    help: str
    choices: tuple[str, ...] = ()


VARIABLES: dict[str, Variable] = {v.name: v for v in (
    Variable("KDSL_CACHE_DIR", "path", "where compiled kernels are cached (default: $XDG_CACHE_HOME/kdsl)"),
    Variable("KDSL_NO_DISK_CACHE", "switch", "compile in memory only: no on-disk kernel cache"),
    Variable("KDSL_PTXAS", "path", "the ptxas to assemble with (default: the first found not known to miscompile)"),
    Variable("KDSL_NVDISASM", "path", "the nvdisasm that makes the SASS view"),
    Variable("KDSL_LIBDEVICE", "path", "the libdevice bitcode that math functions link"),
    Variable("KDSL_ASSEMBLER", "choice", "who assembles PTX into a cubin", ("ptxas", "driver")),
    Variable("KDSL_PURE_PYTHON", "switch", "launch through the Python launcher only (no C fast path)"),
    Variable("KDSL_NO_TORCH_READER", "switch", "read torch tensor arguments through torch's Python API, not the "
             "C++ reader built against the installed torch"),
    Variable("KDSL_NVTX", "switch", "wrap each launch in an NVTX range"),
    Variable("KDSL_FULL_TRACEBACK", "switch", "show kdsl's own frames in errors raised at a jit call"),
    Variable("KDSL_DEBUG", "switch", "compile every kernel with device debug information for cuda-gdb (ptxas -g, "
             "no optimisation)"),
    Variable("KDSL_INTERPRET", "switch", "run @dsl.jit calls in the interpreter, on the CPU, with NumPy arrays"),
    Variable("KDSL_NCU", "path", "the Nsight Compute `ncu` that `kdsl profile` runs (default: on PATH, then the "
                                 "CUDA toolkit's and /opt/nvidia/nsight-compute's)"),
    Variable("KDSL_PROFILE_REQUEST", "path", "set by `dsl.profile` in the run it starts under ncu (not for users)"),
)}

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")
_warned: set[tuple[str, str]] = set()


def _warn_once(name: str, value: str, expected: str) -> None:
    if (name, value) not in _warned:
        _warned.add((name, value))
        warnings.warn(f"{name}={value!r} is not {expected}; it is ignored", RuntimeWarning, stacklevel=3)


def switch(name: str) -> bool:
    """A switch variable: on, or off (unset, empty or an unrecognised value)."""
    assert VARIABLES[name].kind == "switch", name
    value = os.environ.get(name, "").strip().lower()
    if value in _TRUE:
        return True
    if value not in _FALSE:
        _warn_once(name, value, "one of 1/true/yes/on or 0/false/no/off")
    return False


def path(name: str) -> str | None:
    """A path variable, or None when unset or empty."""
    assert VARIABLES[name].kind == "path", name
    return os.environ.get(name) or None


def choice(name: str) -> str:
    """A choice variable's value; its first choice when unset or not one of them."""
    var = VARIABLES[name]
    assert var.kind == "choice", name
    value = os.environ.get(name, "").strip().lower()
    if value in var.choices:
        return value
    if value:
        _warn_once(name, value, "one of " + ", ".join(var.choices))
    return var.choices[0]
