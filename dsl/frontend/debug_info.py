"""The kernel's variables for cuda-gdb: DWARF variable records in a device-debug build.

In a build with device debug information (`@kernel(debug=True)` or `KDSL_DEBUG=1`), before
each statement of the kernel the tracer describes the names whose values changed since the
last description: an `llvm.intr.dbg.value` of the name's current SSA value, which LLVM turns
into the variable's location from that point on. So cuda-gdb stopped at a line sees each
variable as it is before the line runs, by its Python name.

What is described: the kernel's own scalars (not `index` values, not vectors, not the names of
helpers traced inline, whose frames have no subprogram of their own). The variable records
need the kernel's `DISubprogram`, which the lowering creates
(`ensure-debug-info-scope-on-llvm-func`): here each record points at a stand-in subprogram
named `kdsl.tmp.<kernel>`, and `dsl.compiler.debug_variables` points it at the real one.
"""

from __future__ import annotations

import os
from typing import Any

from mlir import ir

from dsl.frontend import ops
from dsl.frontend.values import Scalar

STAND_IN_PREFIX = "kdsl.tmp."

_ENCODINGS = {"int": "DW_ATE_signed", "uint": "DW_ATE_unsigned", "float": "DW_ATE_float", "bool": "DW_ATE_boolean"}


class KernelVariables:
    """Describes one kernel's variables as tracing goes (see the module docstring)."""

    def __init__(self, symbol: str, path: str):
        self.symbol = symbol
        self.file = f'#llvm.di_file<"{os.path.basename(path)}" in "{os.path.dirname(path)}">'
        self._records: dict[str, Any] = {}
        self._described: dict[str, Any] = {}

    def before(self, env: dict[str, Any], line: int) -> None:
        """Describes the names of `env` whose values changed since they were last described."""
        for name, value in env.items():
            if name.startswith("__") or not isinstance(value, Scalar) or value.dtype.name == "index":
                continue
            if value.dtype.kind not in _ENCODINGS or value.dtype.is_fp8:  # fp8 lives in i8 bits
                continue
            last = self._described.get(name)
            if last is not None and last == value.value:
                continue
            self._described[name] = value.value
            ops.create("llvm.intr.dbg.value", [], [value.value], {"varInfo": self._record(name, value, line)})

    def _record(self, name: str, value: Scalar, line: int) -> Any:
        record = self._records.get(name)
        if record is None:
            dtype = value.dtype
            bits = 8 if dtype.kind == "bool" else dtype.bits
            basic = (f'#llvm.di_basic_type<tag = DW_TAG_base_type, name = "{dtype.name}", sizeInBits = {bits}, '
                     f"encoding = {_ENCODINGS[dtype.kind]}>")
            unit = (f'#llvm.di_compile_unit<id = distinct[0]<>, sourceLanguage = DW_LANG_C, file = {self.file}, '
                    f'producer = "kdsl", isOptimized = false, emissionKind = Full>')
            scope = (f'#llvm.di_subprogram<id = distinct[1]<>, compileUnit = {unit}, scope = {self.file}, '
                     f'name = "{STAND_IN_PREFIX}{self.symbol}", file = {self.file}, line = {line}, '
                     f'subprogramFlags = "Definition">')
            record = self._records[name] = ir.Attribute.parse(
                f'#llvm.di_local_variable<scope = {scope}, name = "{name}", file = {self.file}, line = {line}, '
                f"type = {basic}>")
        return record
