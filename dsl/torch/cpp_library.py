"""`python -m dsl.torch.cpp_library FILE::NAME... -o DIR [kdsl export's options] [--build]`:
jit functions as a C export plus `torch.ops.kdsl` operators in C++ over its entry points.

It is `kdsl export` (`dsl.cli_export`: the same options and files) with an `Extension`: FILE::NAME
may also name a `dsl.torch.op` functional form, it also writes `DIR/NAME_torch.cpp`, and
`--build` also builds `DIR/libNAME_torch.so` against the installed torch. It lives in the torch
layer, which reads the schemas, so that the rest of `dsl` (`kdsl export` too) never imports it.

Why: an AOTInductor package (`torch._inductor.aoti_compile_and_package`) calls a custom operator
through torch's dispatcher by name and schema (the proxy executor), so a C++ process with no
Python (`torch::inductor::AOTIModelPackageLoader`) needs `kdsl::<name>` registered in C++.
`NAME_torch.cpp` holds `TORCH_LIBRARY_FRAGMENT(kdsl, m)`, defining each operator with the
schema and tag (`pt2_compliant_tag`) the Python registration gives it
(`dsl.torch.registry.function_schema`, `FunctionalOp.operator_schema`: the same code, so the
same text; writing it imports no torch) under the name a process of its own gives it
(`<function>`, `<function>_functional` or `name=`), and `TORCH_LIBRARY_IMPL(kdsl, CUDA, m)`,
implementing it by calling the export's C entry point. `dsl.export.torch_build` compiles it
with `NAME.c` into `libNAME_torch.so`, which `torch.ops.load_library` (Python) or `dlopen`
(C++) loads in place of kdsl's Python registration (not beside it: both define the operators).

What an implementation does, per call: each `at::Tensor` becomes the entry point's
`kdsl_tensor` (its data pointer with the storage offset, element-type code, rank, CUDA ordinal,
sizes and strides in elements, as `dsl.load_export` fills it; the entry point itself checks
element types, ranks, strides and alignment against its specializations); a tensor not on a
CUDA device, of an element type kdsl has no code for, or of rank above `KDSL_MAX_RANK` is
refused first. The device of the first tensor is made current (`c10::DeviceGuard`, so its
primary context is current, which the entry point uses), and the stream is torch's current
one for that device, from the AOTInductor C shim's `aoti_torch_get_current_cuda_stream` (in
`libtorch_cuda.so`, declared weak here: no CUDA toolkit header is needed, and the library
still loads, and defines its schemas, in a CPU-only torch). A `CUresult` other than
`CUDA_SUCCESS` becomes a `TORCH_CHECK` failure naming the operator, the entry point and the
entry point's own message (`NAME_error_string()`).

Arguments: a schema `float` is passed as the entry point's `float` (refused when it
overflows one, as the Python launcher refuses it) or `double`; `SymInt` as its integer type
(refused outside its range); `bool` as `bool`. A Constexpr attribute the export made an
argument of the entry point (its values differ between the specializations) is passed as
it; one every specialization fixes to one value is checked against that value (another is
refused, naming it and saying to export with an example of it). Refused when generating,
naming the function and the parameter: a Constexpr the entry point chooses (`--choose`),
since the schema's value would pick a specialization the entry point picks by itself; an
entry point argument the schema lacks (an autotuned parameter that differs between
examples); an optional (`= None`) scalar; specializations that write a tensor the schema
does not mark mutated.

Functional forms (`dsl.torch.op(fn, outputs=...)`, named as `FILE::NAME` of the op object):
only outputs allocated like an input (`outputs={"y": "x"}`) are supported, by
`at::empty_like(x, contiguous)`, which is what the Python form does for them; an output made
by a Python function is refused (no C++ can run it). No fake (Meta) kernel, autograd or CPU
kernel is registered: the library serves compiled packages; tracing and export need kdsl's
Python registration.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsl.cli_export import Extension
from dsl.cli_export import main as export_main
from dsl.export.c_expr import c_float, c_int, c_string
from dsl.export.c_types import c_identifier
from dsl.export.exporter import ExportFailed
from dsl.export.model import CParam, Export, FunctionExport
from dsl.language.decorators import JitFunction
from dsl.torch.cpp_support import SUPPORT
from dsl.torch.functional import FunctionalOp
from dsl.torch.registry import function_schema
from dsl.torch.signature import UnsupportedSignature

PROG = "python -m dsl.torch.cpp_library"

_CONSTEXPR_C = {"int": "int64_t", "float": "double", "bool": "bool"}  # schema type -> C type of the argument
_CXX_TYPES = {"SymInt": "int64_t", "int": "int64_t", "float": "double", "bool": "bool", "str": "c10::string_view"}
_INTEGERS = ("int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t")


class TorchLibraryRefused(ExportFailed):
    """An operator that the C++ library cannot implement soundly (the message says why)."""


@dataclass(frozen=True)
class TorchOperator:
    """One `kdsl::<name>` operator over one exported entry point."""

    name: str
    schema: str  # "(Tensor x, Tensor(a!) y, float a, int BLOCK=64) -> ()", as Python registers it
    entry: FunctionExport
    mutated: tuple[str, ...]  # tensor inputs it writes
    outputs: tuple[tuple[str, str], ...]  # functional form: (output, the input it is allocated like)
    params: tuple[tuple[str, str, Any], ...]  # schema arguments in order: (name, schema type, fixed value or None)

    @property
    def definition(self) -> str:
        """What `m.def` is given: the name and the schema."""
        return f"{self.name}{self.schema}"


def torch_operator(obj: Any, entry: FunctionExport, chosen: set[str]) -> TorchOperator:
    """The operator of a jit function or a `dsl.torch.op` functional form, over `entry`
    (its export); `chosen` are the `--choose` Constexpr names. `TorchLibraryRefused` says
    what cannot be mapped."""
    functional = not isinstance(obj, JitFunction)
    jit_fn = obj.fn if functional else obj
    where = f"{jit_fn.fn.__qualname__} ({entry.where})" if entry.where else jit_fn.fn.__qualname__

    def refuse(why: str) -> TorchLibraryRefused:
        return TorchLibraryRefused(f"{where}: {why}")

    try:
        if functional:
            sig = obj.signature
            mutated, schema = obj.operator_schema()
            name = obj.base_name
            made = [(out, obj.like.get(out)) for out in obj.outputs]
            for out, like in made:
                if like is None:
                    raise refuse(f"output '{out}' is allocated by a Python function, which a C++ operator cannot run; "
                                 f"allocate it like an input (outputs={{'{out}': '<input>'}}) or export the in-place "
                                 f"operator (FILE::{jit_fn.fn.__name__})")
            outputs = tuple((out, like) for out, like in made if like is not None)
        else:
            sig, mutated, schema = function_schema(jit_fn)
            name, outputs = jit_fn.fn.__name__, ()
    except (UnsupportedSignature, TypeError) as err:
        raise refuse(f"it has no torch schema: {err}") from None
    out_names = {out for out, _ in outputs}
    unmarked = sorted(set(entry.written) - set(mutated) - out_names)
    if unmarked:
        raise refuse(f"the exported specializations write {', '.join(map(repr, unmarked))}, which the operator's "
                     f"schema {schema} (made from the function's examples= or annotations) does not mark mutated; "
                     "add an example that writes it to its @dsl.jit(examples=[...])")
    c_params = {p.name: p for p in entry.params}
    params = []
    for p in sig.params:
        if p.name in out_names:
            continue
        c = c_params.get(p.name)
        where_p = f"parameter '{p.name}'"
        if p.kind == "tensor":
            if c is None or c.kind != "tensor":
                raise refuse(f"{where_p} is a tensor in the schema but not of the entry point {entry.name}")
            params.append((p.name, "Tensor", None))
        elif p.kind == "scalar":
            if p.default is None:
                raise refuse(f"{where_p} is optional ({p.schema_type}?, default None) in the schema, but the entry "
                             f"point {entry.name} takes a value")
            if c is None or c.kind != "scalar" or not _scalar_fits(p.schema_type, c.c_type):
                raise refuse(f"{where_p} is {p.schema_type} in the schema, but the entry point {entry.name} takes "
                             f"{c.c_type if c else 'no such argument'}")
            params.append((p.name, p.schema_type, None))
        elif c is not None:
            if c.kind != "constexpr" or _CONSTEXPR_C.get(p.schema_type) != c.c_type:
                raise refuse(f"Constexpr {where_p} is {p.schema_type} in the schema, but the entry point {entry.name} "
                             f"takes it as {c.c_type}; give it values of one type in the examples")
            params.append((p.name, p.schema_type, None))
        else:
            values = [s.values[p.name] for s in entry.specs if p.name in s.values]
            if len(values) != len(entry.specs) or not values:
                raise refuse(f"Constexpr {where_p} has no value in some exported specialization")
            if any(v != values[0] or type(v) is not type(values[0]) for v in values):
                raise refuse(f"Constexpr {where_p} is chosen by the entry point (--choose {p.name}) among "
                             f"{', '.join(map(repr, values))}, but the operator's schema passes it, and the value "
                             f"passed would not be the one run; export without --choose {p.name} (it is then an "
                             "argument of the entry point)")
            fixed = values[0]
            if not _fixed_fits(p.schema_type, fixed):
                raise refuse(f"Constexpr {where_p} is {p.schema_type} in the schema, but the export fixes it to "
                             f"{fixed!r}")
            params.append((p.name, p.schema_type, fixed))
    in_schema = {p.name for p in sig.params}
    extra = [c.name for c in entry.params if c.name not in in_schema]
    if extra:
        raise refuse(f"the entry point {entry.name} takes {', '.join(map(repr, extra))}, which the operator's schema "
                     "does not (an autotuned parameter whose value differs between examples); fix it in the examples "
                     "(--example)")
    return TorchOperator(name, schema, entry, mutated, outputs, tuple(params))


def _scalar_fits(schema_type: str, c_type: str) -> bool:
    return {"float": c_type in ("float", "double"), "bool": c_type == "bool",
            "SymInt": c_type in _INTEGERS}.get(schema_type, False)


def _fixed_fits(schema_type: str, value: Any) -> bool:
    if schema_type == "bool" or isinstance(value, bool):
        return schema_type == "bool" and isinstance(value, bool)
    if schema_type == "int":
        return isinstance(value, int)
    if schema_type == "float":
        return isinstance(value, int | float) and math.isfinite(value)
    return schema_type == "str" and isinstance(value, str)


def check_names(operators: list[TorchOperator]) -> None:
    """Refuses two operators of one name (a torch library defines each name once)."""
    seen: dict[str, str] = {}
    for op in operators:
        if op.name in seen:
            raise TorchLibraryRefused(f"the entry points {seen[op.name]} and {op.entry.name} would both be "
                                      f"torch.ops.kdsl.{op.name}")
        seen[op.name] = op.entry.name


def library_source(export: Export, operators: list[TorchOperator]) -> str:
    """`NAME_torch.cpp`: the operators' definitions and their CUDA implementations."""
    check_names(operators)
    base = export.base
    out = [f"// {base}_torch.cpp: torch.ops.kdsl operators over the entry points of {base}.h, made by",
           f"// `{export.command or PROG}`; do not edit (export again instead).",
           f"// Build: `{PROG} ... --build` builds lib{base}_torch.so from this file and {base}.c against",
           "// the installed torch (dsl/export/torch_build.py); load it with torch.ops.load_library or dlopen.",
           "#include <cmath>", "#include <cstdint>", "#include <limits>", "#include <string>", "#include <tuple>",
           "#include <dlfcn.h>", "", "#include <ATen/core/Tensor.h>", "#include <ATen/ops/empty_like.h>",
           "#include <c10/core/DeviceGuard.h>", "#include <torch/library.h>", "", f'#include "{base}.h"', "",
           SUPPORT, ""]
    for op in operators:
        out += _implementation(base, op) + [""]
    out.append("TORCH_LIBRARY_FRAGMENT(kdsl, m)\n{")
    out += [f"    m.def({c_string(op.definition)}, {{at::Tag::pt2_compliant_tag}});" for op in operators]
    out.append("}\n\nTORCH_LIBRARY_IMPL(kdsl, CUDA, m)\n{")
    out += [f"    m.impl({c_string(op.name)}, &kdsl_op_{op.name});" for op in operators]
    out += ["}", ""]
    return "\n".join(out)


def _implementation(base: str, op: TorchOperator) -> list[str]:
    mutated = set(op.mutated)
    declared, body = [], []
    for name, kind, _ in op.params:
        cxx = c_identifier(name)
        if kind == "Tensor":
            declared.append(f"{'at::Tensor&' if name in mutated else 'const at::Tensor&'} {cxx}")
        else:
            declared.append(f"{_CXX_TYPES[kind]} {cxx}")
    returns = ("void" if not op.outputs else "at::Tensor" if len(op.outputs) == 1
               else "std::tuple<" + ", ".join(["at::Tensor"] * len(op.outputs)) + ">")
    label = c_string(f"kdsl::{op.name}")
    body.append(f"    static const char kdsl_op[] = {label};")
    for name, kind, fixed in op.params:
        if fixed is not None:
            body.append(_fixed_check(name, kind, fixed))
    for out, like in op.outputs:
        body.append(f"    at::Tensor {c_identifier(out)} = at::empty_like({c_identifier(like)}, "
                    f"{c_identifier(like)}.options(), at::MemoryFormat::Contiguous);")
    tensors = [p for p in op.entry.params if p.kind == "tensor"]
    if tensors:
        body.append(f"    kdsl_tensor kdsl_kt[{len(tensors)}];")
        for i, p in enumerate(tensors):
            written = p.name in mutated or any(p.name == out for out, _ in op.outputs)
            body.append(f"    kdsl_kt[{i}] = kdsl_tensor_of(kdsl_op, {c_string(p.name)}, {c_identifier(p.name)}, "
                        f"{'true' if written else 'false'});")
        first = c_identifier(tensors[0].name)
        body += [f"    const c10::DeviceGuard kdsl_guard({first}.device());",
                 f"    const CUstream kdsl_stream = kdsl_current_stream(kdsl_op, {first}.get_device());"]
    else:
        body.append("    const CUstream kdsl_stream = nullptr; // no tensor: the default stream, as the C takes it")
    args = ["kdsl_stream"]
    t = 0
    for p in op.entry.params:
        args.append(_argument(p, t))
        t += p.kind == "tensor"
    body += [f"    const CUresult kdsl_result = {op.entry.name}({', '.join(args)});",
             f"    kdsl_check(kdsl_op, {c_string(op.entry.name)}, kdsl_result, {base}_error_string);"]
    if op.outputs:
        names = [c_identifier(out) for out, _ in op.outputs]
        body.append(f"    return {names[0]};" if len(names) == 1 else f"    return {{{', '.join(names)}}};")
    header = [f"// kdsl::{op.definition}", f"// over {op.entry.name}{f' ({op.entry.where})' if op.entry.where else ''}",
              f"{returns} kdsl_op_{op.name}({', '.join(declared)})", "{"]
    return header + body + ["}"]


def _argument(p: CParam, tensor_index: int) -> str:
    """The C argument of entry point parameter `p` in the implementation's terms."""
    name = c_identifier(p.name)
    if p.kind == "tensor":
        return f"&kdsl_kt[{tensor_index}]"
    if p.kind == "constexpr" or p.c_type in ("double", "bool"):
        return name
    if p.c_type == "float":
        return f"kdsl_to_float(kdsl_op, {c_string(p.name)}, {name})"
    return f"kdsl_to_int<{p.c_type}>(kdsl_op, {c_string(p.name)}, {name})"


def _fixed_check(name: str, kind: str, value: Any) -> str:
    cxx = c_identifier(name)
    shown = c_string(f"{name}={value!r}")
    if kind == "str":
        test = f"std::string({cxx}.data(), {cxx}.size()) == {c_string(value)}"
    elif kind == "bool":
        test = f"{cxx} == {'true' if value else 'false'}"
    elif kind == "float":
        test = f"{cxx} == {c_float(float(value))}"
    else:
        test = f"{cxx} == {c_int(value)}"
    return (f"    TORCH_CHECK({test}, kdsl_op, \": this library was exported with {shown[1:-1]} only, not \", {cxx}, "
            f"\"; export again with an --example for that value\");")


class TorchLibrary(Extension):
    """`kdsl export` plus the C++ operators (see the module docstring)."""

    prog = PROG
    description = "Export jit functions as a C library and as torch.ops.kdsl operators in C++."

    def jit_function_of(self, obj: Any) -> Any:
        return obj.fn if isinstance(obj, FunctionalOp) else None

    def files(self, export: Any, objects: list[Any], choose: set[str]) -> dict[str, str]:
        operators = [torch_operator(o, f, choose) for o, f in zip(objects, export.functions)]
        return {f"{export.base}_torch.cpp": library_source(export, operators)}

    def build(self, folder: str) -> list[Path]:
        from dsl.export.torch_build import build_torch_library

        return [build_torch_library(folder)]

    def build_hint(self, folder: str) -> str:
        return (f"build the operators: python -c \"from dsl.export.torch_build import build_torch_library; "
                f"build_torch_library({str(folder)!r})\"")


def main(argv: list[str] | None = None) -> int:
    return export_main(argv, TorchLibrary())


if __name__ == "__main__":
    sys.exit(main())
