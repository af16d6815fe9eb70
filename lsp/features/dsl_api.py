"""The `dsl` API as the editor presents it: each name with where it may be used, its
signature and its documentation.

The facts come from the language package: `dsl.__all__` says what exists,
`dsl.language.placement` where each name may be used (device, host, both), the docstrings of
the objects themselves (some are built at import time, like `Dim3("thread_idx", doc)`, which
no static reading sees) and the typed stubs beside them (`intrinsics.pyi`) for parameter
lists, since math intrinsics take `*args` at run time. Nothing is copied here; the catalogue
is built once per process.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import inspect
import os
import types
from dataclasses import dataclass
from typing import Any

from dsl.frontend.launch_syntax import LAUNCH_PARAMETERS
from dsl.language.placement import DEVICE, HOST, allowed, placement
from dsl.language.types import DType
from lsp.features.cursor import HELPER, JIT, KERNEL

_MISSING = object()

# The launch of a kernel applied to its arguments (`saxpy(x, y).launch(...)`): traced, never
# called, so its parameters are the frontend's launch syntax, documented here.
LAUNCH_SIGNATURE = "launch(grid, block, smem=None, stream=None, cluster=None)"
LAUNCH_DOC = ("Launches the kernel on `grid` blocks of `block` threads (an int or up to three ints each). "
              "`smem`: dynamic shared memory in bytes (None: what the kernel's `SharedAllocator(dynamic=True)` "
              "needs); `stream`: the CUDA stream (None: the default stream); `cluster`: blocks per cluster "
              "(sm_90).")
LAUNCH_KEYWORDS: dict[str, str] = {
    "grid": "Blocks in the grid: an int or up to three ints (x, y, z).",
    "block": "Threads per block: an int or up to three ints; kept against the kernel's `known_block_size`.",
    "smem": "Dynamic shared memory in bytes; None passes what the kernel's dynamic `SharedAllocator` needs.",
    "stream": "The CUDA stream to launch on (a stream object or handle); None is the default stream.",
    "cluster": "Blocks per thread-block cluster, up to three ints (sm_90 and newer); None launches no cluster.",
}
assert tuple(LAUNCH_KEYWORDS) == LAUNCH_PARAMETERS  # the frontend's launch syntax, documented here


@dataclass(frozen=True)
class ApiName:
    name: str
    where: str | None  # DEVICE, HOST, BOTH, or None: no code of either side (decorators, annotations, ...)
    kind: str  # "function", "class", "type", "variable" or "constant"
    detail: str
    doc: str


def usable(where: str | None, context: str) -> bool:
    """Whether a name placed `where` belongs in code of `context` (a `lsp.features.cursor` kind)."""
    if context == KERNEL:
        return allowed(where, DEVICE)
    if context == JIT:
        return allowed(where, HOST)
    if context == HELPER:  # plain helpers are traced inline into either side
        return where is not None
    return True


def _kind(obj: Any) -> str:
    if isinstance(obj, DType):
        return "type"
    if isinstance(obj, type):
        return "class"
    if callable(obj):
        return "function"
    if isinstance(obj, int | float | str | tuple | frozenset | dict):
        return "constant"
    return "variable"


def _dtype_doc(name: str, dtype: DType) -> str:
    width = "" if dtype.is_bool else f"{dtype.bits}-bit "
    kinds = {"int": "signed integer", "uint": "unsigned integer", "float": "float", "bool": "boolean",
             "index": "index (machine word) integer"}
    alias = "" if name == dtype.name else f" (`{name}` is `{dtype.name}`)"
    return (f"The {width}{kinds.get(dtype.kind, dtype.kind)} scalar type{alias}: an annotation, and a cast "
            f"inside kernels and jit functions: `{name}(x)`.")


@functools.cache
def dsl_names() -> tuple[ApiName, ...]:
    """Every name of `dsl.__all__`, and every other one the package exports that is code of
    the language (`dsl.sm_count`), in alphabetical order."""
    import dsl

    exported = set(dsl.__all__)
    exported |= {name for name, obj in vars(dsl).items()
                 if not name.startswith("_") and not isinstance(obj, types.ModuleType) and placement(obj, name)}
    out = []
    for name in sorted(exported, key=lambda n: (n.lower(), n)):
        obj = vars(dsl).get(name, _MISSING)  # lazy names (the compiler) stay unloaded
        if obj is _MISSING:
            out.append(ApiName(name, None, "function", "", ""))
            continue
        where = placement(obj, name)
        if isinstance(obj, DType):
            detail, doc = f"scalar type {obj.name}", _dtype_doc(name, obj)
        else:
            signature = _signature_of(obj, name)
            detail = f"{name}{signature}" if signature is not None else \
                f"class {name}" if isinstance(obj, type) else type(obj).__name__.lstrip("_")
            doc = own_doc(obj)
        out.append(ApiName(name, where, _kind(obj), detail, doc))
    return tuple(out)


def own_doc(obj: Any) -> str:
    """The object's own docstring (not one inherited from `str` or `int`)."""
    doc = obj.__doc__ if isinstance(obj, type | types.FunctionType) else getattr(obj, "__doc__", None)
    if not isinstance(obj, type | types.FunctionType) and doc == type(obj).__doc__ and \
            type(obj).__module__ == "builtins":
        return ""
    return inspect.cleandoc(doc) if isinstance(doc, str) else ""


def _signature_of(obj: Any, name: str) -> str | None:
    """`(params)` of a function or class as the typed stubs declare it, without annotations."""
    if not isinstance(obj, type | types.FunctionType):
        return None
    qualname = obj.__qualname__ if isinstance(obj, types.FunctionType) else f"{obj.__qualname__}.__init__"
    found = stub_signatures(obj.__module__, qualname) or stub_signatures(obj.__module__, name)
    return found[0][len(found[0].split("(", 1)[0]):] if found else None


# -- signatures from the stubs ----------------------------------------------------------------


@functools.cache
def _stub_defs(module: str) -> dict[str, list[list[str]]]:
    """The parameters of every function of `module`'s stub (or source), per declaration, by
    qualified name (`Class.method`)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return {}
    origin = spec.origin if spec is not None else None
    if not origin:
        return {}
    path = os.path.splitext(origin)[0] + ".pyi"
    if not os.path.exists(path):
        path = origin
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
        tree = ast.parse(source)
    except (OSError, SyntaxError, ValueError):
        return {}
    out: dict[str, list[list[str]]] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef):
                out.setdefault(prefix + node.name, []).append(parameters(node, source))
            elif isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")
            elif (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                  and isinstance(node.value, ast.Name) and prefix + node.value.id in out):
                out[prefix + node.targets[0].id] = out[prefix + node.value.id]  # `min = minimum`

    visit(tree.body, "")
    return out


def parameters(node: ast.FunctionDef, source: str | None = None) -> list[str]:
    """The parameters of a `def` as a call writes them: names and defaults (as written in
    `source`, `0xFFFFFFFF` rather than 4294967295), no annotations."""
    args = node.args

    def default(d: ast.expr) -> str:
        return (ast.get_source_segment(source, d) if source is not None else None) or ast.unparse(d)

    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    out = [a.arg if d is None else f"{a.arg}={default(d)}" for a, d in zip(positional, defaults)]
    if args.vararg is not None:
        out.append(f"*{args.vararg.arg}")
    elif args.kwonlyargs:
        out.append("*")
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        out.append(a.arg if d is None else f"{a.arg}={default(d)}")
    if args.kwarg is not None:
        out.append(f"**{args.kwarg.arg}")
    return [p for p in out if p not in ("self", "cls")]


def stub_signatures(module: str, qualname: str) -> list[str]:
    """`name(params)` of each declaration (overload) of `module.qualname`, distinct ones once."""
    name = qualname.rsplit(".", 1)[-1]
    if name == "__init__":
        name = qualname.rsplit(".", 2)[-2]
    labels: list[str] = []
    for params in _stub_defs(module).get(qualname, []):
        label = f"{name}({', '.join(params)})"
        if label not in labels:
            labels.append(label)
    return labels


def resolve(full_name: str) -> tuple[Any, str, str] | None:
    """(object, its module, its qualified name) for a jedi full name such as
    `dsl.language.intrinsics.shfl_xor` or `dsl.cdiv`; importing only `dsl`'s own modules."""
    if full_name != "dsl" and not full_name.startswith("dsl."):
        return None
    parts = full_name.split(".")
    for split in range(len(parts), 0, -1):
        module_name = ".".join(parts[:split])
        try:
            obj: Any = importlib.import_module(module_name)
        except ImportError:
            continue
        try:
            for attr in parts[split:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        if isinstance(obj, types.FunctionType | type):
            return obj, obj.__module__, obj.__qualname__
        return obj, module_name, ".".join(parts[split:])
    return None


def type_text(annotation: ast.expr | None) -> str | None:
    """An annotation as the DSL type it names: `Float32` and `dsl.Float32` read `f32`,
    `Tensor[dsl.f32, 2]` reads `Tensor[f32, 2]`; anything else as written."""
    if annotation is None:
        return None
    from dsl.language import types as dsl_types

    if isinstance(annotation, ast.Name | ast.Attribute):
        name = annotation.id if isinstance(annotation, ast.Name) else annotation.attr
        value = getattr(dsl_types, name, None)
        if isinstance(value, DType):
            return value.name
        return name if isinstance(annotation, ast.Attribute) and name in ("Tensor", "Constexpr") else \
            ast.unparse(annotation)
    if isinstance(annotation, ast.Subscript):
        items = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
        inner = ", ".join(type_text(item) or "" for item in items)
        return f"{type_text(annotation.value)}[{inner}]"
    return ast.unparse(annotation)


def function_parameters(node: ast.FunctionDef) -> list[str]:
    """A kernel's or jit function's parameters with their DSL types: `x: Tensor[f32, 1]`,
    `a: f32`, `BLOCK: Constexpr[int] = 256`."""
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    pairs = [*zip(positional, defaults), *zip(args.kwonlyargs, args.kw_defaults)]
    out = []
    for arg, default in pairs:
        text = arg.arg
        typed = type_text(arg.annotation)
        if typed:
            text += f": {typed}"
        if default is not None:
            text += f" = {ast.unparse(default)}"
        out.append(text)
    return out
