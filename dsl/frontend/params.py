"""A specialization's parameters, kept free of MLIR imports: the run-time cache path reads
them to build keys without loading the compiler."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dsl.language.types import DType, i32


@dataclass(frozen=True)
class FlatArg:
    """One kernel argument a tensor parameter becomes."""

    role: str  # "ptr", "shape" or "stride"
    axis: int = -1

    def expr(self, name: str) -> str:
        """The launcher's name for it: `x_ptr`, `x_shape[k]`, `x_strides[k]`."""
        if self.role == "ptr":
            return f"{name}_ptr"
        return f"{name}_{'shape' if self.role == 'shape' else 'strides'}[{self.axis}]"

    @property
    def type_code(self) -> str:
        return "ptr" if self.role == "ptr" else "i32"


def tensor_layout(rank: int) -> list[FlatArg]:
    """How a tensor argument reaches a kernel: its data pointer, each extent (i32), then each
    stride but the innermost (i32; the innermost is 1, checked at launch). Written here once:
    the kernel's parameters, the host function's view, the launch's operands and the
    launcher's packing all follow it."""
    return ([FlatArg("ptr")] + [FlatArg("shape", k) for k in range(rank)]
            + [FlatArg("stride", k) for k in range(rank - 1)])


@dataclass(frozen=True)
class ParamSpec:
    """One parameter of a specialization: `kind` is 'tensor', 'scalar', 'constexpr' or
    'tensor_map' (a TMA map of a `dtype` tensor of `rank`; `value` is its (box, swizzle))."""

    name: str
    kind: str
    dtype: DType | None = None
    rank: int = 0
    value: Any = None

    def key(self) -> tuple:
        value = self.value if self.kind in ("constexpr", "tensor_map") else None
        try:
            hash(value)
        except TypeError:
            value = repr(value)
        return (self.name, self.kind, self.dtype, self.rank, value)

    def describe(self) -> str:
        """As a user reads it: `x: Tensor[f32, 2]`, `eps: f32` or `BLOCK=512`."""
        if self.kind == "tensor":
            return f"{self.name}: Tensor[{self.dtype.name}, {self.rank}]"
        if self.kind == "scalar":
            return f"{self.name}: {self.dtype.name}"
        if self.kind == "tensor_map":
            return f"{self.name}: TensorMap[{self.dtype.name}, box={list(self.value[0])}, swizzle={self.value[1]}]"
        return f"{self.name}={self.value!r}"

    def flat_types(self) -> list[tuple[str, Any]]:
        """(launcher type code, MLIR type) for each kernel argument this parameter becomes."""
        from mlir import ir

        if self.kind == "tensor":
            pointer = ir.Type.parse("!llvm.ptr<1>")
            return [(a.type_code, pointer if a.role == "ptr" else i32.mlir_type()) for a in tensor_layout(self.rank)]
        if self.kind == "scalar":
            return [(self.dtype.name, self.dtype.mlir_type())]
        if self.kind == "tensor_map":  # the generic pointer of a by-value 128-byte parameter
            return [("tmap", ir.Type.parse("!llvm.ptr"))]
        return []



def flatten_params(params: list[ParamSpec]) -> list[tuple[str, Any]]:
    return [t for p in params for t in p.flat_types()]
