"""Checks that need only the AST: the editor's instant tier and `kdsl lint --no-exec`.

They never run user code. The compiler reuses the same functions for the same checks, so
a mistake found in both tiers produces the identical diagnostic (and is shown once).
Messages follow the wording kernel authors know from FlyDSL.
"""

from __future__ import annotations

import ast
from typing import Any

from dsl.diagnostics import Diagnostic, Fix, Related, SourceRange, TextEdit
from dsl.frontend.launch_syntax import launch_syntax
from dsl.frontend.source import SourceFile
from dsl.targets import get_target

DSL_TYPE_NAMES = {
    "Tensor", "Constexpr", "TensorSpec", "Boolean", "Int8", "Int16", "Int32", "Int64", "Uint8", "Uint16",
    "Uint32", "Uint64", "Float16", "BFloat16", "Float32", "Float64", "Index", "boolean", "i8", "i16", "i32",
    "i64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "f64", "index",
}
NOT_DSL_TYPES = {"int", "float", "bool", "str", "list", "dict", "tuple", "bytes", "object", "complex"}


def annotation_mismatch_message(context: str, name: str, annotated: str, actual: str) -> str:
    return (f"{context} parameter '{name}' is annotated as '{annotated}', but the argument resolves to "
            f"'{actual}'. The annotation is not enforced; the actual value type is used.")


def not_dsl_type_message(context: str, name: str, annotation: str) -> str:
    return f"{context} parameter '{name}' is annotated as '{annotation}', which is not a DSL value type."


_DSL_SPELLING = {"int": "dsl.Int32", "float": "dsl.Float32", "bool": "dsl.Boolean"}


def annotation_fixes(annotation: str, rng: SourceRange, has_default: bool) -> list[Fix]:
    """DSL102's fixes: the DSL type a Python scalar annotation means, or Constexpr for a
    parameter with a default (a compile-time value)."""
    fixes = []
    if annotation in _DSL_SPELLING:
        fixes.append(Fix(f"Annotate as {_DSL_SPELLING[annotation]}",
                         (TextEdit(rng, _DSL_SPELLING[annotation]),)))
        if has_default:
            fixes.append(Fix(f"Annotate as dsl.Constexpr[{annotation}]",
                             (TextEdit(rng, f"dsl.Constexpr[{annotation}]"),)))
    return fixes


def mismatch_fixes(annotation: str | None, annotated: str, actual: str, annotation_range: SourceRange | None,
                   argument: str | None = None, argument_range: SourceRange | None = None) -> list[Fix]:
    """DSL101's fixes: make the annotation say the actual type, or cast a scalar argument."""
    fixes = []
    if annotation is not None and annotation_range is not None:
        new = _retyped(annotation, annotated, actual)
        if new is not None:
            fixes.append(Fix(f"Change the annotation to {new}", (TextEdit(annotation_range, new),)))
    if argument is not None and argument_range is not None and "[" not in annotated:
        fixes.append(Fix(f"Cast the argument to dsl.{annotated}",
                         (TextEdit(argument_range, f"dsl.cast({argument}, dsl.{annotated})"),)))
    return fixes


def _retyped(annotation: str, annotated: str, actual: str) -> str | None:
    """The annotation's text with the annotated element type replaced by the actual one."""
    old_dtype = annotated.split("[")[-1].split(",")[0].rstrip("]").strip()
    new_dtype = actual.split("[")[-1].split(",")[0].rstrip("]").strip()
    if "[" in annotated:  # a tensor: keep the user's spelling, swap the element type
        if annotated.split(",")[-1] != actual.split(",")[-1]:
            rank = actual.split(",")[-1].rstrip("]").strip()
            dtype_part = annotation.split("[", 1)[1].split(",")[0].rstrip("]").strip()
            prefix = dtype_part.rsplit(".", 1)[0] + "." if "." in dtype_part else ""
            return f"{annotation.split('[', 1)[0]}[{prefix}{new_dtype}, {rank}]"
        import re

        new, count = re.subn(rf"\b{re.escape(old_dtype)}\b", new_dtype, annotation, count=1)
        return new if count else None
    import re

    names = {"f32": "Float32", "f16": "Float16", "bf16": "BFloat16", "f64": "Float64", "i32": "Int32",
             "i64": "Int64", "i16": "Int16", "i8": "Int8", "u32": "Uint32", "u64": "Uint64", "u16": "Uint16",
             "u8": "Uint8", "bool": "Boolean", "index": "Index"}
    for old, new_name in ((old_dtype, new_dtype), (names.get(old_dtype, ""), names.get(new_dtype, ""))):
        if old and new_name:
            new, count = re.subn(rf"\b{re.escape(old)}\b", new_name, annotation, count=1)
            if count:
                return new
    return f"dsl.{new_dtype}" if new_dtype in names else None


def contract_message(kernel: str, axis: int, launched: int, declared: int) -> str:
    label = "xyz"[axis]
    return (f"launch block {label}={launched} differs from known_block_size {label}={declared} declared on "
            f"kernel '{kernel}'.")


def decorator_kind(decorator: ast.expr) -> str | None:
    """"kernel" or "jit" for `@dsl.kernel`, `@kernel(...)`, `@x.jit`, ...; None otherwise. The
    one test of what a DSL function's decorator is (the compiler's checks and the editor's)."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
    return name if name in ("kernel", "jit") else None


def decorator_info(fn: ast.FunctionDef) -> tuple[str | None, ast.expr | None, ast.expr | None]:
    """('kernel' | 'jit' | None, the decorator node, its known_block_size value node)."""
    for dec in fn.decorator_list:
        name = decorator_kind(dec)
        if name is not None:
            kbs = None
            if isinstance(dec, ast.Call):
                kbs = next((kw.value for kw in dec.keywords if kw.arg == "known_block_size"), None)
            return name, dec, kbs
    return None, None, None


def check_known_block_size(file: SourceFile, fn: ast.FunctionDef, value: Any
                           ) -> tuple[Diagnostic | None, SourceRange | None]:
    """DSL201 for a malformed contract; also returns the range of the decorator value."""
    _, dec, node = decorator_info(fn)
    rng = file.range_of(node) if node is not None else (file.range_of(dec) if dec is not None
                                                         else file.def_name_range(fn))
    message = _known_block_size_problem(value)
    if message is None:
        return None, rng
    return Diagnostic.make("DSL201", message, rng, fixes=_kbs_fixes(value, rng)), rng


def hint_nodes(fn: ast.FunctionDef) -> dict[str, ast.expr]:
    """The decorator's keyword value node per compile hint (`maxnreg=...` and the rest)."""
    _, dec, _ = decorator_info(fn)
    if not isinstance(dec, ast.Call):
        return {}
    return {kw.arg: kw.value for kw in dec.keywords if kw.arg in _HINT_CHECKS}


def check_hints(file: SourceFile, fn: ast.FunctionDef, hints: dict[str, Any], target_name: str | None
                ) -> list[Diagnostic]:
    """DSL201 for each malformed compile hint, at its decorator argument."""
    target = get_target(target_name)
    nodes = hint_nodes(fn)
    _, dec, _ = decorator_info(fn)
    out = []
    for name, value in hints.items():
        message = _HINT_CHECKS[name](value, target) if name in _HINT_CHECKS else None
        if message is None:
            continue
        node = nodes.get(name)
        rng = file.range_of(node) if node is not None else (
            file.range_of(dec) if dec is not None else file.def_name_range(fn))
        out.append(Diagnostic.make("DSL201", f"{name} {message}", rng))
    return out


def _int_problem(value: Any, low: int, high: int, target_name: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        return f"must be an int from {low} to {high}, got {type(value).__name__}"
    if not low <= value <= high:
        return f"must be from {low} to {high} on {target_name}, got {value}"
    return None


def _maxnreg(value: Any, target: Any) -> str | None:
    """ptxas raises a smaller count to its lower bound and ignores a larger one: both are mistakes."""
    return _int_problem(value, target.min_registers_per_thread, target.max_registers_per_thread, target.name)


def _minnctapersm(value: Any, target: Any) -> str | None:
    return _int_problem(value, 1, target.max_blocks_per_sm, target.name)


def _bool_hint(value: Any, target: Any) -> str | None:
    if isinstance(value, bool):
        return None
    return f"must be True or False, got {type(value).__name__} ({value!r})"


_HINT_CHECKS = {
    "maxnreg": _maxnreg,
    "minnctapersm": _minnctapersm,
    "fastmath": _bool_hint,
    "contract": _bool_hint,
    "ftz": _bool_hint,
    "debug": _bool_hint,
}


def _known_block_size_problem(value: Any) -> str | None:
    try:
        elems = list(value)
    except TypeError:
        return f"known_block_size must be a sequence of 3 positive integers, got {type(value).__name__}"
    if len(elems) != 3:
        return f"known_block_size must have exactly 3 elements (x, y, z), got {len(elems)}"
    for i, v in enumerate(elems):
        if isinstance(v, bool) or not isinstance(v, int):
            return f"known_block_size[{i}] must be an int, got {type(v).__name__}"
        if v <= 0:
            return f"known_block_size[{i}] must be positive, got {v}"
    return None


def _kbs_fixes(value: Any, rng: SourceRange) -> list[Fix]:
    try:
        elems = [int(v) for v in list(value) if not isinstance(v, bool)]
    except (TypeError, ValueError):
        return []
    elems = [max(1, v) for v in elems][:3]
    elems += [1] * (3 - len(elems))
    if elems[0] * elems[1] * elems[2] > 1024:
        return []
    return [Fix(f"Use known_block_size={elems}", (TextEdit(rng, str(elems)),))]


def _literal(node: ast.expr | None) -> Any:
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None


def _is_literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, SyntaxError, TypeError):
        return False


def _dim3(value: Any) -> tuple[int, int, int] | None:
    items = list(value) if isinstance(value, tuple | list) else [value]
    if not 1 <= len(items) <= 3 or not all(isinstance(v, int) and not isinstance(v, bool) for v in items):
        return None
    items += [1] * (3 - len(items))
    return tuple(items)  # type: ignore[return-value]


def contract_diagnostic(kernel: str, block: tuple[int, int, int], known: tuple[int, int, int],
                        block_range: SourceRange, known_range: SourceRange | None, block_is_scalar: bool
                        ) -> Diagnostic:
    """DSL202 with the seed's message, the decorator as related information and both fixes."""
    axis = next(i for i in range(3) if block[i] != known[i])
    literal = str(known[0]) if block_is_scalar and known[1:] == (1, 1) else f"({known[0]}, {known[1]}, {known[2]})"
    fixes = [Fix(f"Launch with block={literal}", (TextEdit(block_range, literal),))]
    related = []
    if known_range is not None:
        fixes.append(Fix(f"Change known_block_size to {list(block)}",
                         (TextEdit(known_range, f"[{block[0]}, {block[1]}, {block[2]}]"),)))
        related.append(Related(known_range, f"known_block_size={list(known)} declared here"))
    return Diagnostic.make("DSL202", contract_message(kernel, axis, block[axis], known[axis]), block_range,
                           related=related, fixes=fixes)


def block_limit_diagnostic(block: tuple[int, int, int], target_name: str | None, rng: SourceRange
                           ) -> Diagnostic | None:
    target = get_target(target_name)
    threads = block[0] * block[1] * block[2]
    if threads <= target.max_threads_per_block and all(
            1 <= b <= m for b, m in zip(block, target.max_block_dims)):
        return None
    return Diagnostic.make(
        "DSL203", f"block {list(block)} ({threads} threads) exceeds {target.name} limits: at most "
        f"{target.max_threads_per_block} threads and {list(target.max_block_dims)} per dimension", rng)


def static_checks(source: str, path: str, target: str | None = None) -> list[Diagnostic]:
    """Every check that needs no execution, for one file's text; never raises."""
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as err:
        line = err.lineno or 1
        col = max((err.offset or 1) - 1, 0)
        end_line = err.end_lineno or line
        end_col = max((err.end_offset or (col + 2)) - 1, col + 1) if end_line == line else (err.end_offset or 1) - 1
        return [Diagnostic.make("DSL003", f"syntax error: {err.msg}", SourceRange(path, line, col, end_line, end_col))]
    file = SourceFile(path, source, tree)
    out: list[Diagnostic] = []
    kernels: dict[str, tuple[tuple[int, int, int] | None, SourceRange | None]] = {}
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    for fn in functions:
        kind, dec, kbs_node = decorator_info(fn)
        if kind is None:
            continue
        context = "@kernel" if kind == "kernel" else "@jit"
        defaults = _with_defaults(fn)
        for arg in fn.args.args + fn.args.kwonlyargs:
            if arg.annotation is not None and _is_not_dsl_type(arg.annotation):
                text, rng = ast.unparse(arg.annotation), file.range_of(arg.annotation)
                out.append(Diagnostic.make("DSL102", not_dsl_type_message(context, arg.arg, text), rng,
                                           fixes=annotation_fixes(text, rng, arg.arg in defaults)))
        if kind == "kernel":
            literal_hints = {name: _literal(node) for name, node in hint_nodes(fn).items()
                             if _is_literal(node)}
            out.extend(check_hints(file, fn, literal_hints, target))
            known = None
            if kbs_node is not None:
                value = _literal(kbs_node)  # None when it names variables: the compiler checks it
                if value is not None:
                    diag, rng = check_known_block_size(file, fn, value)
                    if diag is not None:
                        out.append(diag)
                    else:
                        known = tuple(value)
                    kernels[fn.name] = (known, rng)  # type: ignore[assignment]
                    continue
            kernels[fn.name] = (None, None)
    for fn in functions:
        kind, _, _ = decorator_info(fn)
        if kind != "jit":
            continue
        for node in ast.walk(fn):
            launch = _launch_call(node)
            if launch is None:
                continue
            callee, block_node = launch
            block = _dim3(_literal(block_node))
            if block is None:
                continue
            rng = file.range_of(block_node)
            limit = block_limit_diagnostic(block, target, rng)
            if limit is not None:
                out.append(limit)
                continue
            known, known_range = kernels.get(callee, (None, None))
            if known is not None and known != block:
                out.append(contract_diagnostic(callee, block, known, rng, known_range,
                                               isinstance(block_node, ast.Constant)))
    return out


def _with_defaults(fn: ast.FunctionDef) -> set[str]:
    """Names of the parameters that have a default value."""
    positional = fn.args.posonlyargs + fn.args.args
    names = {a.arg for a in positional[len(positional) - len(fn.args.defaults):]} if fn.args.defaults else set()
    return names | {a.arg for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults) if d is not None}


def _is_not_dsl_type(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in NOT_DSL_TYPES
    if isinstance(node, ast.Subscript):
        return _is_not_dsl_type(node.value)
    if isinstance(node, ast.Attribute):
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        return isinstance(root, ast.Name) and root.id in ("torch", "np", "numpy", "cupy", "cp", "jax", "jnp")
    return False


def _launch_call(node: ast.AST) -> tuple[str, ast.expr] | None:
    """`kernel(...).launch(..., block=B)` -> ('kernel', B)."""
    launch = launch_syntax(node)
    if launch is None or launch.kernel_call is None or not isinstance(launch.kernel, ast.Name):
        return None
    block = launch.arguments.get("block")
    return None if block is None else (launch.kernel.id, block)
