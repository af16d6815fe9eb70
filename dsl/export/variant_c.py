"""One launcher, translated: the C function that does what a specialization's Python
launcher does, step for step.

    static int NAME_vN(const NAME_args *A, kdsl_call *C)

returns `KDSL_NO_FIT` (with the reason in `C->why`) when the arguments are not this
specialization's: a Constexpr argument of another value, a tensor the argument reader
refuses (element type, rank, layout, alignment), a failing `assert`. Otherwise it
launches, in order, and returns CUDA_SUCCESS or the error of the first launch that
failed (its message in `NAME_error_string()`). Per launch, in the Python launcher's order:
the grid, block and smem expressions; `rt.check_block` / `rt.check_smem`; the kernel
arguments (tensor maps encoded); the kernel loaded; an empty grid skipped; the
parameters packed (each checked against its type's range, as `struct` checks it); the
launch.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from dsl.export.c_expr import CValue, ExprTranslator, TensorRef, c_string
from dsl.export.c_types import (
    FLOAT_PARAMS,
    INT_PARAMS,
    SWIZZLES,
    TENSOR_MAP_TYPES,
    dtype_enum,
    nbytes,
)
from dsl.export.launcher_plan import ExportRefused, Launch, LauncherPlan
from dsl.export.model import CParam

_TEMP_TYPES = {"int": "int64_t", "float": "double", "bool": "bool", "u64": "uint64_t", "ptr": "CUdeviceptr"}


def translator(plan: LauncherPlan, params: list[CParam], attribute: Callable[[str], str]) -> ExprTranslator:
    """The names a launcher reads, as C reaches them through the argument struct `A`."""
    by_name = {p.name: p for p in params}
    names: dict[str, CValue] = {}
    tensors: dict[str, TensorRef] = {}
    for entry in plan.entries:
        c = f"A->{by_name[entry.name].c_name}"
        if entry.rank is not None:
            tensors[entry.name] = TensorRef(c, entry.rank)
            names[f"{entry.name}_ptr"] = CValue(f"{c}->data", "ptr")
        elif entry.dtype in ("f16", "bf16", "f32", "f64"):
            names[entry.name] = CValue(f"(double){c}", "float")
        elif entry.dtype == "bool":
            names[entry.name] = CValue(c, "bool")
        elif entry.dtype == "u64":
            names[entry.name] = CValue(c, "u64")
        else:
            names[entry.name] = CValue(f"(int64_t){c}", "int")
    return ExprTranslator(names, tensors, attribute)


def variant_function(fn_name: str, index: int, plan: LauncherPlan, params: list[CParam], constexprs: dict,
                     kernel_index: dict[str, int], attribute: Callable[[str], str], targets: list[str]) -> str:
    """The C of one variant (`index`): a specialization's launcher for `targets`."""
    tr = translator(plan, params, attribute)
    out = [f"/* {fn_name} [{plan.specialization}] for {', '.join(targets)}: the Python launcher, translated */",
           f"static int {fn_name}_v{index}(const {fn_name}_args *A, kdsl_call *C)", "{",
           "    kdsl_eval ev_;", "    kdsl_eval *ev = &ev_;", "    ev_.fault = NULL;", "    (void)A;", "    (void)ev;"]
    by_name = {p.name: p for p in params}
    for name, value in constexprs.items():
        out += _constexpr_check(by_name[name], value)
    if any(e.rank is not None for e in plan.entries):
        out.append("    /* the arguments, as the launcher's argument reader checks them */")
    for entry in plan.entries:
        if entry.rank is None:
            continue
        align, site, _writer = plan.access.get(entry.name, (nbytes(entry.dtype), None, None))
        out.append(f"    if (kdsl_check_tensor(C, {c_string(entry.name)}, A->{by_name[entry.name].c_name}, "
                   f"{dtype_enum(entry.dtype)}, {entry.rank}, {nbytes(entry.dtype)}, {align}, "
                   f"{c_string(site) if site else 'NULL'}))")
        out.append("        return KDSL_NO_FIT;")
    for check in plan.checks:
        try:
            out += _assert(tr, check.condition, check.message, check.where)
        except ExportRefused as err:
            raise ExportRefused(f"{fn_name}, the assert at {check.where}: {err}") from None
    for i, launch in enumerate(plan.launches):
        try:
            out += _launch(tr, launch, index, kernel_index[launch.kernel.symbol], i + 1, len(plan.launches))
        except ExportRefused as err:
            raise ExportRefused(f"{fn_name}, the launch at {launch.where}: {err}") from None
    out += ["    return CUDA_SUCCESS;", "}", ""]
    return "\n".join(out)


def _constexpr_check(param: CParam, value: object) -> list[str]:
    if isinstance(value, bool):
        shown, test, fmt, arg = repr(value), f"A->{param.c_name} != {'true' if value else 'false'}", "%s", \
            f'A->{param.c_name} ? "True" : "False"'
    elif isinstance(value, int):
        shown, test, fmt, arg = repr(value), f"A->{param.c_name} != {value}", "%lld", f"(long long)A->{param.c_name}"
    else:
        shown, test, fmt, arg = repr(value), f"A->{param.c_name} != {float(value).hex()}", "%.17g", \
            f"A->{param.c_name}"
    return [f"    if ({test}) {{",
            f"        kdsl_reason(C, \"{param.name}={fmt}, but this specialization has {param.name}={shown}\", {arg});",
            "        return KDSL_NO_FIT;", "    }"]


def _assert(tr: ExprTranslator, condition: ast.expr, message: ast.expr, where: str) -> list[str]:
    cond = tr.truth(tr.expr(condition))
    text = tr.message(message)
    return [f"    {{   /* assert at {where} */", f"        const bool ok = {cond};",
            "        if (ev->fault != NULL)", f"            return kdsl_argument_fault(C, ev, {c_string(where)});",
            "        if (!ok) {", "            kdsl_msg m = kdsl_why(C);", "            kdsl_msg *msg = &m;",
            *[f"            {line}" for line in text],
            f"            kdsl_msg_text(msg, {c_string(f' (assert at {where})')});",
            "            if (ev->fault != NULL)",
            f"                return kdsl_argument_fault(C, ev, {c_string(where)});",
            "            return KDSL_NO_FIT;", "        }", "    }"]


def _int_dims(tr: ExprTranslator, dims: list[ast.expr]) -> str:
    return "{" + ", ".join(_as_int(tr, d) for d in dims) + "}"


def _as_int(tr: ExprTranslator, node: ast.expr) -> str:
    """A grid, block or smem value: Python's `int(...)` of it."""
    v = tr.expr(node)
    return f"kdsl_float_to_int(ev, {v.code})" if v.type == "float" else tr.as_int(v)


def _launch(tr: ExprTranslator, launch: Launch, variant: int, kernel: int, number: int, count: int) -> list[str]:
    codes = launch.kernel.codes
    if len(codes) != len(launch.args):
        raise ExportRefused(f"launch {number} passes {len(launch.args)} arguments to {len(codes)} kernel parameters")
    symbol = launch.kernel.symbol
    site = f"{{{variant}, {kernel}, {number}, {count}, {c_string(launch.where)}}}"
    fault = "            return kdsl_launch_fail(C, &site, grid, block, smem, CUDA_ERROR_INVALID_VALUE, ev->fault);"
    out = [f"    {{   /* launch {number} of {count}: kernel '{symbol}' at {launch.where} */",
           f"        static const kdsl_site site = {site};",
           f"        const int64_t grid[3] = {_int_dims(tr, launch.grid)};",
           f"        const int64_t block[3] = {_int_dims(tr, launch.block)};",
           f"        const int64_t smem = {_as_int(tr, launch.smem)};",
           "        int r;",
           "        if (ev->fault != NULL)", fault]
    if launch.contract is not None:
        out += [f"        static const int64_t known[3] = {{{', '.join(map(str, launch.contract))}}};",
                "        if ((r = kdsl_check_block(C, &site, grid, block, known)) != 0)", "            return r;"]
    if launch.smem_required is not None:
        out += [f"        const int64_t required = {_as_int(tr, launch.smem_required)};",
                "        if (ev->fault != NULL)", fault,
                "        if ((r = kdsl_check_smem(C, &site, grid, block, smem, required)) != 0)",
                "            return r;"]
    values = [tr.expr(a) for a in launch.args]
    for i, (v, code) in enumerate(zip(values, codes)):
        if v.type == "tmap":
            out += _tensor_map(v, i, code)
        else:
            out.append(f"        const {_TEMP_TYPES[v.type]} a{i} = {v.code};")
    out += ["        r = kdsl_begin_launch(C, &site, ev, grid, block, smem);", "        if (r == 0) {"]
    for i, (v, code) in enumerate(zip(values, codes)):
        if v.type != "tmap":
            what = f"kernel {symbol!r} gets `{ast.unparse(launch.args[i])}`"
            out.append(f"            {_pack(tr, v, code, i, what)}")
    out += ["            if (ev->fault != NULL)",
            "                return kdsl_argument_error(C, &site, grid, block, smem, ev);"]
    if codes:
        pointers = ", ".join(f"&m{i}" if v.type == "tmap" else f"&p{i}" for i, v in enumerate(values))
        out.append(f"            void *params[] = {{{pointers}}};")
    else:
        out.append("            void **params = NULL;")
    cluster = "NULL"
    if launch.kernel.cluster is not None:
        dims = tuple(ast.literal_eval(launch.kernel.cluster))
        out.append(f"            static const unsigned int cluster[3] = {{{', '.join(map(str, dims))}}};")
        cluster = "cluster"
    out += [f"            r = kdsl_launch(C, &site, grid, block, smem, params, {cluster});", "        }",
            "        if (r != 0 && r != KDSL_SKIPPED)", "            return r;", "    }"]
    return out


def _tensor_map(v: CValue, i: int, code: str) -> list[str]:
    if code != "tmap" or v.tensor_map is None:
        raise ExportRefused(f"kernel argument {i} is a tensor map where the kernel takes a {code}")
    _tensor, dtype, box, swizzle = v.tensor_map
    if dtype not in TENSOR_MAP_TYPES or swizzle not in SWIZZLES:
        raise ExportRefused(f"a tensor map of {dtype} with swizzle {swizzle}")
    return [f"        static const uint32_t box{i}[{len(box)}] = {{{', '.join(map(str, box))}}};",
            f"        CUtensorMap m{i};",
            f"        if ((r = kdsl_tensor_map(C, &site, &m{i}, {v.code}, {TENSOR_MAP_TYPES[dtype]}, "
            f"{c_string(dtype)}, {nbytes(dtype)}, {len(box)}, box{i}, {swizzle}, {SWIZZLES[swizzle]})) != 0)",
            "            return r;"]


def _pack(tr: ExprTranslator, v: CValue, code: str, i: int, what: str) -> str:
    """The parameter variable `p<i>` of type `code` from the value `a<i>`, as `struct` packs it;
    `what` names the argument in a refusal."""
    a = f"a{i}"
    if code == "ptr":
        if v.type != "ptr":
            raise ExportRefused(f"{what}, a {v.type}, for a pointer parameter")
        return f"CUdeviceptr p{i} = {a};"
    if v.type in ("ptr", "tmap"):
        raise ExportRefused(f"{what}, a {v.type}, for a {code} parameter")
    if code == "bool":
        return f"bool p{i} = {tr.truth(CValue(a, v.type))};"
    if code in INT_PARAMS:
        if v.type == "float":
            raise ExportRefused(f"{what}, a float, for an {code} parameter: the Python launcher's struct refuses it "
                                "on every call")
        c_type, lo, hi = INT_PARAMS[code]
        if code == "u64":
            return f"uint64_t p{i} = {a};" if v.type == "u64" else f"uint64_t p{i} = kdsl_arg_u64(ev, {i}, {a});"
        value = tr.as_int(CValue(a, v.type))
        if code in ("i64", "index"):
            return f"int64_t p{i} = {value};"
        return f"{c_type} p{i} = ({c_type})kdsl_arg_int(ev, {i}, \"{code}\", {value}, {lo}, {hi});"
    if code in FLOAT_PARAMS:
        d = tr.as_float(CValue(a, v.type))
        if code == "f64":
            return f"double p{i} = {d};"
        if code == "f32":
            return f"float p{i} = kdsl_arg_f32(ev, {i}, \"f32\", {d});"
        return f"uint16_t p{i} = kdsl_arg_{code}(ev, {i}, {d});"
    raise ExportRefused(f"{what} for a {code} parameter, which the Python launcher cannot pack")
