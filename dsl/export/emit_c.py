"""Rendering an export: `NAME.h` (entry points), `NAME_launch_config.h` (each launch's
kernel, block, shared memory, registers and target), `NAME.c` (the support code, the
cubins, the translated launchers, the dispatching entry points) and the editor's `c`
stage of one compiled jit function (`c_stage`).

Numbering, used by the tables in `NAME.c`: specializations are numbered across the
export's functions in dispatch order; a variant is one launcher of one specialization
(targets whose launchers read alike share one); a kernel index is a (variant, kernel)
pair; an image is one cubin of one specialization for one target.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from dsl.export.c_expr import c_string
from dsl.export.c_support import PRELUDE, RUNTIME, TABLE_TYPES
from dsl.export.c_types import DTYPE_CODES, MAX_RANK
from dsl.export.launcher_plan import ExportRefused, read_launcher
from dsl.export.model import Build, Export, FunctionExport, Specialization, params_from_plan
from dsl.export.variant_c import variant_function
from dsl.language.device import ATTRIBUTES

_CUDA_ERRORS = {"CUDA_SUCCESS": 0, "CUDA_ERROR_INVALID_VALUE": 1, "CUDA_ERROR_OUT_OF_MEMORY": 2,
                "CUDA_ERROR_NOT_INITIALIZED": 3, "CUDA_ERROR_NO_DEVICE": 100, "CUDA_ERROR_NO_BINARY_FOR_GPU": 209,
                "CUDA_ERROR_NOT_FOUND": 500, "CUDA_ERROR_NOT_SUPPORTED": 801, "CUDA_ERROR_UNKNOWN": 999}
BUILD_COMMAND = "gcc -std=c11 -O2 -shared -fPIC -o lib{base}.so {base}.c -ldl -lpthread -lm"


def _guard(name: str) -> str:
    return re.sub(r"[^A-Z0-9]", "_", name.upper())


@dataclass
class _Numbered:
    """The export's specializations, variants, kernels, images and device attributes, numbered."""

    specs: list[tuple[FunctionExport, Specialization]] = field(default_factory=list)
    variants: list[tuple[int, list[Build]]] = field(default_factory=list)  # (spec, builds)
    kernels: list[tuple[int, str, int]] = field(default_factory=list)  # (variant, symbol, static smem)
    images: list[tuple[int, int, Build]] = field(default_factory=list)  # (spec, variant, build)
    attributes: list[str] = field(default_factory=list)

    def attribute(self, name: str) -> str:
        if name not in ATTRIBUTES:
            raise ExportRefused(f"the device attribute {name!r}")
        if name not in self.attributes:
            self.attributes.append(name)
        return f"(int64_t)C->context->attributes[{self.attributes.index(name)}]"


def _number(export: Export) -> _Numbered:
    n = _Numbered()
    for fn in export.functions:
        for spec in fn.specs:
            s = len(n.specs)
            n.specs.append((fn, spec))
            for builds in spec.variants():
                v = len(n.variants)
                n.variants.append((s, builds))
                for build in builds:
                    n.images.append((s, v, build))
                static = {k.symbol: (k.resources.static_smem if k.resources else 0) for k in builds[0].kernels}
                for kernel in builds[0].plan.kernels.values():
                    n.kernels.append((v, kernel.symbol, static.get(kernel.symbol, 0)))
    return n


def header(export: Export) -> str:
    guard = f"KDSL_EXPORT_{_guard(export.base)}_H"
    errors = ", ".join(f"{name} = {value}" for name, value in _CUDA_ERRORS.items())
    dtypes = ", ".join(f"KDSL_{name.upper()} = {code}" for name, code in DTYPE_CODES.items())
    out = [f"/* {export.base}.h: C entry points of kdsl jit functions, made by `{export.command or 'kdsl export'}`.",
           " *",
           " * Build (no CUDA toolkit needed; libcuda.so.1 is loaded at the first call):",
           f" *   {BUILD_COMMAND.format(base=export.base)}",
           " *   -DKDSL_EXPORT_NVTX   an NVTX range named after the kernel around each launch (libnvToolsExt)",
           " *   -DKDSL_EXPORT_DEBUG  synchronize and check after every launch; check that pointers are GPU memory",
           " * Every entry point returns CUDA_SUCCESS or the CUresult of what failed; "
           f"{export.base}_error_string() says what",
           " * failed and where (this thread's last failed call). Include cuda.h, if you use it, before this file.",
           " */", f"#ifndef {guard}", f"#define {guard}", "", "#include <stdbool.h>", "#include <stdint.h>", "",
           "#if !defined(__cuda_cuda_h__) && !defined(KDSL_CUDA_TYPES_DEFINED)", "#define KDSL_CUDA_TYPES_DEFINED",
           f"typedef enum cudaError_enum {{ {errors} }} CUresult;", "typedef struct CUstream_st *CUstream;",
           "typedef unsigned long long CUdeviceptr;", "#endif", "", "#ifndef KDSL_TENSOR_DEFINED",
           "#define KDSL_TENSOR_DEFINED", f"#define KDSL_MAX_RANK {MAX_RANK}",
           f"typedef enum kdsl_dtype {{ {dtypes} }} kdsl_dtype;",
           "/* A tensor argument, as DLPack describes arrays: the address of its first element, its extents and",
           " * strides (in elements, outer first) and the CUDA device ordinal of its memory. */",
           "typedef struct kdsl_tensor {", "    CUdeviceptr data;", "    int32_t dtype; /* a kdsl_dtype */",
           "    int32_t rank;", "    int32_t device;", "    int32_t reserved;", "    int64_t shape[KDSL_MAX_RANK];",
           "    int64_t strides[KDSL_MAX_RANK];", "} kdsl_tensor;", "#endif", "", "#ifdef __cplusplus",
           'extern "C" {', "#endif", ""]
    for fn in export.functions:
        out += declaration(fn) + [""]
    out += [f"/* What this thread's last failed call of an entry point of {export.base}.h failed at. */",
            f"const char *{export.base}_error_string(void);", "", "#ifdef __cplusplus", "}", "#endif",
            f"#endif /* {guard} */", ""]
    return "\n".join(out)


def declaration(fn: FunctionExport) -> list[str]:
    """The commented prototype of one entry point."""
    args = ", ".join(["CUstream stream", *(p.declaration() for p in fn.params)])
    origin = f" from {fn.where}" if fn.where else ""
    out = [f"/* {fn.jit_name}{origin}; specializations, tried in this order:"]
    for i, spec in enumerate(fn.specs):
        targets = ", ".join(b.target for b in spec.builds)
        out.append(f" *   [{i}] {spec.description} ({targets})")
    picked = [p.name for p in fn.params if p.kind == "constexpr"]
    if picked:
        out.append(f" * Constexpr arguments ({', '.join(picked)}) choose among them; the others are fixed.")
    out += [" */", f"CUresult {fn.name}({args});"]
    return out


def config_header(export: Export) -> str:
    guard = f"KDSL_EXPORT_{_guard(export.base)}_LAUNCH_CONFIG_H"
    rows = config_rows(export)
    out = [f"/* {export.base}_launch_config.h: every kernel launch in {export.base}.c, per specialization and target:",
           " * the kernel's symbol, its block and dynamic shared memory (when the launch fixes them), its static",
           " * shared memory, registers and spills (ptxas) and the target, made by `kdsl export`. */",
           f"#ifndef {guard}", f"#define {guard}", "", "#ifndef KDSL_KERNEL_CONFIG_DEFINED",
           "#define KDSL_KERNEL_CONFIG_DEFINED", "typedef struct kdsl_kernel_config {",
           "    const char *function;       /* the entry point */",
           "    const char *specialization; /* as the entry point's comment lists it */",
           "    const char *target;         /* sm_90, ... */",
           "    const char *symbol;         /* the kernel in the cubin */",
           "    int launch;                 /* 1, 2, ... in the jit function */",
           "    int block[3];               /* 0, 0, 0: computed at each launch */",
           "    int dynamic_smem;           /* bytes; -1: computed at each launch */",
           "    int static_smem, registers, spill_stores, spill_loads;", "} kdsl_kernel_config;", "#endif", "",
           f"#define {_guard(export.base)}_KERNEL_CONFIG_COUNT {len(rows)}", ""]
    for row in rows:
        out.append(f"/* {row['function']} [{row['specialization']}] {row['target']} launch {row['launch']}: "
                   f"{row['symbol']}, block {_shown(row['block'])}, dynamic smem "
                   f"{row['dynamic_smem'] if row['dynamic_smem'] >= 0 else 'computed'}, static smem "
                   f"{row['static_smem']}, {row['registers']} registers */")
    out += ["", "#ifdef __cplusplus", 'extern "C" {', "#endif",
            f"extern const kdsl_kernel_config {export.base}_kernel_configs[];",
            f"extern const int {export.base}_kernel_config_count;", "#ifdef __cplusplus", "}", "#endif",
            f"#endif /* {guard} */", ""]
    return "\n".join(out)


def _shown(block: list[int]) -> str:
    return f"({block[0]}, {block[1]}, {block[2]})" if any(block) else "computed"


def config_rows(export: Export) -> list[dict]:
    """One row per (specialization, target, launch): what the config header lists."""
    rows = []
    for fn in export.functions:
        for spec in fn.specs:
            for build in spec.builds:
                kernels = {k.symbol: k for k in build.kernels}
                for number, launch in enumerate(build.plan.launches, 1):
                    info = kernels.get(launch.kernel.symbol)
                    res = info.resources if info is not None else None
                    block = [_constant(d) for d in launch.block]
                    smem = _constant(launch.smem)
                    rows.append({
                        "function": fn.name, "specialization": spec.description, "target": build.target,
                        "symbol": launch.kernel.symbol, "launch": number,
                        "block": block if all(b > 0 for b in block) else [0, 0, 0],
                        "dynamic_smem": smem if smem >= 0 else -1,
                        "static_smem": res.static_smem if res else 0, "registers": res.registers if res else 0,
                        "spill_stores": res.spill_stores if res else 0, "spill_loads": res.spill_loads if res else 0})
    return rows


def _constant(node: object) -> int:
    import ast

    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    return -1


def source(export: Export) -> str:
    """`NAME.c`: the support code, the tables (cubins embedded), the translated launchers and
    the entry points."""
    n = _number(export)
    functions = _functions(export, n)  # first: translating fills the attribute table
    head = [f"/* {export.base}.c: made by `{export.command or 'kdsl export'}`; do not edit (export again instead).",
            f" * Build: {BUILD_COMMAND.format(base=export.base)} */",
            f'#include "{export.base}.h"', f'#include "{export.base}_launch_config.h"', "",
            f"#define KDSL_SPECS {len(n.specs)}", f"#define KDSL_VARIANTS {max(1, len(n.variants))}",
            f"#define KDSL_KERNELS {max(1, len(n.kernels))}", f"#define KDSL_IMAGES {max(1, len(n.images))}",
            f"#define KDSL_ATTRIBUTES {max(1, len(n.attributes))}"]
    body = [PRELUDE, TABLE_TYPES, _tables(n, embed=True), RUNTIME, functions, _config_table(export)]
    return "\n".join(head) + "\n" + "\n".join(body)


def _tables(n: _Numbered, embed: bool) -> str:
    """The cubins (or, not `embed`ded, their sizes) and what the support code looks up."""
    out = ["/* ----- the cubins ----- */"]
    for i, (s, _v, build) in enumerate(n.images):
        fn, spec = n.specs[s]
        size = len(build.cubin) if build.cubin else 0
        out.append(f"/* {fn.name} [{spec.description}] for {build.target}: {size} bytes */")
        if embed and build.cubin:
            data = build.cubin
            rows = [", ".join(f"0x{b:02x}" for b in data[j:j + 20]) for j in range(0, len(data), 20)]
            out.append(f"KDSL_ALIGNAS(64) static const unsigned char kdsl_cubin_{i}[] = {{\n    "
                       + ",\n    ".join(rows) + "\n};")
        else:
            out.append(f"static const unsigned char kdsl_cubin_{i}[] = {{0 /* embedded by `kdsl export` */}};")
    images = [f"    {{{s}, {v}, {b.arch[0]}, {b.arch[1]}, {int(b.arch[2])}, {c_string(b.target)}, kdsl_cubin_{i}, "
              f"sizeof kdsl_cubin_{i}}}," for i, (s, v, b) in enumerate(n.images)]
    kernels = [f"    {{{v}, {c_string(sym)}, {static}}}," for v, sym, static in n.kernels] or ['    {0, "", 0},']
    specs = [f"    {c_string(spec.description)}," for _fn, spec in n.specs]
    ids = ", ".join(str(ATTRIBUTES_IDS[a]) for a in n.attributes) or "0"
    names = ", ".join(c_string(a) for a in n.attributes) or '""'
    out += ["static const kdsl_image kdsl_images[KDSL_IMAGES] = {\n" + "\n".join(images) + "\n};",
            "static const kdsl_kernel kdsl_kernels[KDSL_KERNELS] = {\n" + "\n".join(kernels) + "\n};",
            "static const char *const kdsl_specs[KDSL_SPECS] = {\n" + "\n".join(specs) + "\n};",
            "static const int kdsl_variant_spec[KDSL_VARIANTS] = {"
            + (", ".join(str(s) for s, _ in n.variants) or "0") + "};",
            f"static const int kdsl_attribute_ids[KDSL_ATTRIBUTES] = {{{ids}}}; /* CUdevice_attribute */",
            f"static const char *const kdsl_attribute_names[KDSL_ATTRIBUTES] = {{{names}}};", ""]
    return "\n".join(out)


# CU_DEVICE_ATTRIBUTE_<NAME> values (cuda.h) of the attributes `dsl.device_attribute` knows
ATTRIBUTES_IDS = {
    "multiprocessor_count": 16, "max_threads_per_block": 1, "max_block_dim_x": 2, "max_block_dim_y": 3,
    "max_block_dim_z": 4, "max_grid_dim_x": 5, "max_grid_dim_y": 6, "max_grid_dim_z": 7,
    "max_shared_memory_per_block": 8, "max_shared_memory_per_block_optin": 97,
    "max_shared_memory_per_multiprocessor": 81, "max_registers_per_block": 12, "max_registers_per_multiprocessor": 82,
    "max_threads_per_multiprocessor": 39, "max_blocks_per_multiprocessor": 106, "warp_size": 10,
    "compute_capability_major": 75, "compute_capability_minor": 76,
}
assert set(ATTRIBUTES_IDS) == set(ATTRIBUTES)


def _functions(export: Export, n: _Numbered) -> str:
    out = []
    spec_base = 0
    for fn in export.functions:
        fields = [f"    {p.declaration()};" for p in fn.params] or ["    int unused;"]
        out += [f"typedef struct {fn.name}_args {{", *fields, f"}} {fn.name}_args;", ""]
        cases = []
        for s, spec in enumerate(fn.specs, spec_base):
            for v, (vs, builds) in enumerate(n.variants):
                if vs != s:
                    continue
                kernel_index = {sym: k for k, (kv, sym, _) in enumerate(n.kernels) if kv == v}
                out.append(variant_function(fn.name, v, builds[0].plan, fn.params, spec.constexprs, kernel_index,
                                            n.attribute, [b.target for b in builds]))
                cases.append(f"        case {v}: r = {fn.name}_v{v}(&args, &call); break;")
        spec_base += len(fn.specs)
        out.append(_entry(fn, spec_base - len(fn.specs), cases))
    out += [f"const char *{export.base}_error_string(void)", "{", "    return kdsl_error_text;", "}", ""]
    return "\n".join(out)


def _entry(fn: FunctionExport, first_spec: int, cases: list[str]) -> str:
    tensors = [p for p in fn.params if p.kind == "tensor"]
    args = ", ".join(["CUstream stream", *(p.declaration() for p in fn.params)])
    fields = ", ".join(p.c_name for p in fn.params) or "0"
    order = ", ".join(str(first_spec + i) for i in range(len(fn.specs)))
    out = [f"CUresult {fn.name}({args})", "{"]
    if tensors:
        out += [f"    static const char *const names[] = {{{', '.join(c_string(p.name) for p in tensors)}}};",
                f"    const kdsl_tensor *const tensors[] = {{{', '.join(p.c_name for p in tensors)}}};"]
    out += [f"    const {fn.name}_args args = {{{fields}}};", "    kdsl_call call;",
            f"    int r = kdsl_enter(&call, {c_string(fn.name)}, {'tensors' if tensors else 'NULL'}, "
            f"{'names' if tensors else 'NULL'}, {len(tensors)}, stream);",
            "    if (r != 0)", "        return (CUresult)r;",
            f"    static const int order[] = {{{order}}}; /* the specializations, most specific first */",
            "    for (size_t i = 0; i < sizeof order / sizeof order[0]; ++i) {",
            "        switch (kdsl_variant_for(&call, order[i])) {", *cases,
            "        default: r = KDSL_NO_FIT; break;", "        }", "        if (r != KDSL_NO_FIT)",
            "            return (CUresult)r;", "        kdsl_note(&call, order[i]);", "    }",
            "    return (CUresult)kdsl_no_fit(&call);", "}", ""]
    return "\n".join(out)


def _config_table(export: Export) -> str:
    rows = config_rows(export)
    lines = [f"    {{{c_string(r['function'])}, {c_string(r['specialization'])}, {c_string(r['target'])}, "
             f"{c_string(r['symbol'])}, {r['launch']}, {{{', '.join(map(str, r['block']))}}}, {r['dynamic_smem']}, "
             f"{r['static_smem']}, {r['registers']}, {r['spill_stores']}, {r['spill_loads']}}},"
             for r in rows] or ['    {"", "", "", "", 0, {0, 0, 0}, 0, 0, 0, 0, 0},']
    return "\n".join([f"const kdsl_kernel_config {export.base}_kernel_configs[] = {{", *lines, "};",
                      f"const int {export.base}_kernel_config_count = {len(rows)};", ""])


def c_stage(compiled: object) -> str:
    """The `c` stage of a compiled jit function: the entry point and translated launcher
    `kdsl export` writes for this one specialization and target (the support code and the
    cubin left out), or why it cannot be exported."""
    launcher = getattr(compiled, "stages", {}).get("launcher")
    name = getattr(compiled, "name", "")
    if launcher is None:
        return f"// {name}: only jit functions have a C entry point\n"
    try:
        plan = read_launcher(launcher)
        target = getattr(compiled, "target", plan.target)
        assembled = getattr(compiled, "assembled_cubin", None)  # an editor's result makes its cubin on request
        cubin = assembled() if assembled is not None else getattr(compiled, "cubin", None)
        fn = FunctionExport(name, name, "", params_from_plan(plan), [Specialization(
            plan.specialization, {}, [Build(target, plan, cubin,
                                        list(getattr(compiled, "kernels", [])))])])
        export = Export(name, [fn], "kdsl export")
        n = _number(export)
        functions = _functions(export, n)
        return "\n".join([f"/* {name}: the C entry point `kdsl export` writes for this specialization ({target}) */",
                          *declaration(fn), "", functions,
                          "/* ----- its tables (`kdsl export` embeds the cubin and kdsl's support code) ----- */",
                          _tables(n, embed=False)])
    except ExportRefused as err:
        return f"// {name} cannot be exported to C: {err}\n"
