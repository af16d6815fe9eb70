"""What an export holds: its jit functions, each one's C parameters and specializations, and
each specialization's compiled launcher and cubin per target.

Plain data, made by `dsl.export.exporter` (from a file's jit functions) or by
`dsl.export.emit_c.c_stage` (from one compiled function, for the editor's C view), and
rendered by `dsl.export.emit_c`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dsl.compiler.artifacts import KernelInfo
from dsl.export.c_types import CONSTEXPR_C_TYPES, SCALAR_C_TYPES, c_identifier
from dsl.export.launcher_plan import ExportRefused, LauncherPlan
from dsl.targets import get_target


@dataclass(frozen=True)
class CParam:
    """One parameter of an entry point after `CUstream stream`."""

    name: str  # the jit function's parameter
    kind: str  # "tensor", "scalar" or "constexpr" (a Constexpr whose value the caller picks)
    c_type: str  # "const kdsl_tensor *", "float", "int64_t", ...
    dtype: str | None = None  # a scalar's DSL type
    default: Any = None  # the jit's default, for `dsl.load_export` (None: none, or not a number)

    @property
    def c_name(self) -> str:
        return c_identifier(self.name)

    def declaration(self) -> str:
        return f"{self.c_type}{'' if self.c_type.endswith('*') else ' '}{self.c_name}"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "ctype": self.c_type, "dtype": self.dtype,
                "default": self.default}


@dataclass
class Build:
    """One specialization compiled for one target: its launcher, its cubin, its kernels."""

    target: str
    plan: LauncherPlan
    cubin: bytes | None  # None: not embedded (the editor's view)
    kernels: list[KernelInfo] = field(default_factory=list)

    @property
    def arch(self) -> tuple[int, int, bool]:
        """(major, minor, whether the cubin runs only on exactly that GPU: sm_90a)."""
        major, minor = get_target(self.target).compute_capability
        return major, minor, self.target.endswith("a")


@dataclass
class Specialization:
    description: str  # as the launcher states it: "x: Tensor[f32, 1], a: f32, BLOCK=256"
    constexprs: dict[str, Any]  # the values of the Constexpr C arguments, which it must be called with
    builds: list[Build]
    values: dict[str, Any] = field(default_factory=dict)  # every Constexpr's value (fixed ones too)

    def variants(self) -> list[list[Build]]:
        """The builds grouped by what their launchers do (usually one group for all targets)."""
        groups: dict[str, list[Build]] = {}
        for build in self.builds:
            groups.setdefault(build.plan.body, []).append(build)
        return list(groups.values())

    @property
    def specificity(self) -> tuple[int, int]:
        """What the dispatcher tries first: more alignment asked of the tensors, then more
        run-time asserts (a specialization with fewer requirements is the fallback)."""
        plan = self.builds[0].plan
        return sum(align for align, _, _ in plan.access.values()), len(plan.checks)


@dataclass
class FunctionExport:
    name: str  # the C entry point
    jit_name: str
    where: str  # "examples/saxpy.py:14"
    params: list[CParam]
    specs: list[Specialization]  # in dispatch order: most specific first
    written: list[str] = field(default_factory=list)  # tensors a kernel writes

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "jit": self.jit_name, "where": self.where,
                "params": [p.to_json() for p in self.params], "written": self.written,
                "specializations": [s.description for s in self.specs]}


@dataclass
class Export:
    base: str  # file names and the NAME_error_string() prefix
    functions: list[FunctionExport]
    command: str = ""  # the command that made it, for the files' first lines


def params_from_plan(plan: LauncherPlan, constexpr_args: dict[str, Any] | None = None,
                     defaults: dict[str, Any] | None = None) -> list[CParam]:
    """The entry point's parameters of a launcher's run-time parameters, in order, plus the
    Constexpr ones the caller picks (`constexpr_args`: name -> a value, for its C type), in
    the jit signature's order given by `defaults` (name -> default, every parameter)."""
    order = list(defaults) if defaults is not None else [e.name for e in plan.entries]
    entries = {e.name: e for e in plan.entries}
    out = []
    for name in order:
        default = (defaults or {}).get(name)
        default = default if isinstance(default, bool | int | float) else None
        if name in entries:
            entry = entries[name]
            if entry.rank is not None:
                out.append(CParam(name, "tensor", "const kdsl_tensor *"))
            elif entry.dtype not in SCALAR_C_TYPES:
                raise ExportRefused(f"parameter '{name}' is a {entry.dtype} scalar, which the launcher cannot pass "
                                    "to a kernel")
            else:
                out.append(CParam(name, "scalar", SCALAR_C_TYPES[entry.dtype], entry.dtype, default))
        elif constexpr_args is not None and name in constexpr_args:
            value = constexpr_args[name]
            out.append(CParam(name, "constexpr", CONSTEXPR_C_TYPES[type(value)], None, default))
    return out
