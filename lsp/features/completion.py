"""Completion inside kernel and jit bodies: only what is valid where the cursor is.

- after `dsl.` (or an alias of the module): the API, each name with its signature and
  documentation, filtered by where it may be used (`dsl.language.placement`): no host-only
  API in a kernel body, no device intrinsic in a jit body, every name at module level;
- after a tensor (`x.`): its members valid on that side (`shape`, `strides`, `dtype`, and in
  kernels `rank`, `vload`, `vstore`); after `dsl.thread_idx.` the axes; after a kernel
  applied to its arguments (`saxpy(x, y).`) its `launch`;
- inside `.launch(...)`: the launch keywords not given yet (`grid=`, `block=`, `smem=`,
  `stream=`, `cluster=`), next to the DSL names the module imported (`from dsl import f32`).

jedi resolves what the receiver is (imports, aliases, annotations read through the typed
stubs), on a snippet of the document: its imports and the enclosing function up to the
cursor's line (`lsp.features.cursor`), so a keystroke in a file of a hundred kernels costs
a few milliseconds of jedi, not a parse of the whole file. Items are built once per context.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import attrs
from lsprotocol import types

from dsl.frontend.launch_syntax import LAUNCH_PARAMETERS
from dsl.language.placement import DEVICE, TENSOR_MEMBERS
from lsp.convert import from_lsp_position
from lsp.features import cursor, jedi_use
from lsp.features.cursor import HELPER, JIT, KERNEL, MODULE, Enclosing
from lsp.features.dsl_api import LAUNCH_DOC, LAUNCH_KEYWORDS, LAUNCH_SIGNATURE, ApiName, dsl_names, usable
from lsp.text_model import line_content

if TYPE_CHECKING:
    from lsp.server import KdslLanguageServer

TRIGGERS = [".", "(", ","]

_KINDS = {
    "function": types.CompletionItemKind.Function,
    "class": types.CompletionItemKind.Class,
    "type": types.CompletionItemKind.Class,  # a dtype is a type, as Python's `int` is (not a generic's parameter)
    "constant": types.CompletionItemKind.Constant,
    "variable": types.CompletionItemKind.Variable,
}
_DIM3 = "dsl.language.intrinsics.Dim3"
_TENSORS = ("dsl.language.types.Tensor", "dsl.language.types.TypedTensor")
_SHARED_ARRAY = "dsl.language.types.SharedArray"
_ALLOCATOR = "dsl.language.intrinsics.SharedAllocator"
_KERNEL_LAUNCH = "dsl.language.decorators.KernelLaunch"


def _item(label: str, kind: types.CompletionItemKind, detail: str, doc: str, insert: str | None = None
          ) -> types.CompletionItem:
    return types.CompletionItem(
        label=label, kind=kind, detail=detail or None, insert_text=insert,
        documentation=types.MarkupContent(kind=types.MarkupKind.Markdown, value=doc) if doc else None,
    )


def _api_item(api: ApiName, label: str | None = None) -> types.CompletionItem:
    return _item(label or api.name, _KINDS[api.kind], api.detail, api.doc)


@functools.cache
def api_items(context: str) -> tuple[types.CompletionItem, ...]:
    """The `dsl.` names valid in code of `context` (a `cursor` kind)."""
    return tuple(_api_item(api) for api in dsl_names() if usable(api.where, context))


def _side(context: str) -> str | None:
    return DEVICE if context == KERNEL else "host" if context == JIT else None


_METHODS = ("vload", "vstore", "view")  # the members that are called, of tensors and shared arrays


def _member_kind(name: str) -> types.CompletionItemKind:
    return types.CompletionItemKind.Method if name in _METHODS else types.CompletionItemKind.Property


@functools.cache
def tensor_items(context: str) -> tuple[types.CompletionItem, ...]:
    side = _side(context)
    out = []
    for name, (where, doc) in TENSOR_MEMBERS.items():
        if side is None or usable(where, context):
            out.append(_item(name, _member_kind(name), f"Tensor.{name}", doc))
    return tuple(out)


@functools.cache
def _fixed_items(which: str) -> tuple[types.CompletionItem, ...]:
    if which == "dim3":
        return tuple(_item(axis, types.CompletionItemKind.Property, "i32", f"The {axis} coordinate, an i32 value.")
                     for axis in "xyz")
    if which == "allocator":
        return (_item("array", types.CompletionItemKind.Method, "array(dtype, shape, align=16)",
                      "A shared-memory array of `dtype` and `shape` carved from this allocator."),)
    if which == "shared":
        return tuple(_item(name, _member_kind(name), f"shared array.{name}", doc)
                     for name, (_, doc) in TENSOR_MEMBERS.items() if name in ("shape", "dtype", *_METHODS))
    return (_item("launch", types.CompletionItemKind.Method, LAUNCH_SIGNATURE, LAUNCH_DOC),)


def launch_keyword_items(given: frozenset[str], positional: int) -> list[types.CompletionItem]:
    """`grid=`, `block=`, ... for the launch parameters not given yet."""
    taken = set(given) | set(LAUNCH_PARAMETERS[:positional])
    return [_item(f"{name}=", types.CompletionItemKind.Variable, f"launch {name}", doc, insert=f"{name}=")
            for name, doc in LAUNCH_KEYWORDS.items() if name not in taken]


def _imported_dsl_names(lines: Sequence[str]) -> list[tuple[str, str]]:
    """(name in `dsl`, the name it is bound to) for each `from dsl import ...` of the module."""
    out = []
    statement = " ".join(line_content(text) for text in cursor.imports(lines))
    for match in re.finditer(r"from\s+dsl\s+import\s+\(?([\w\s,]+)\)?", statement):
        for part in match.group(1).split(","):
            words = part.split()
            if len(words) == 1:
                out.append((words[0], words[0]))
            elif len(words) == 3 and words[1] == "as":
                out.append((words[0], words[2]))
    return out


def _infer(lines: Sequence[str], where: Enclosing, path: str, line: int, column: int) -> list[tuple[str, str]]:
    """(full name, jedi type) of what the expression ending at 0-based (`line`, `column`) is."""

    piece = cursor.snippet(lines, where, line)
    with jedi_use.LOCK:  # reading a jedi name may ask jedi's subprocess too
        try:
            names = jedi_use.resolved(lambda: jedi_use.script(piece.text, path).infer(piece.line_of(line), column))
        except Exception:  # jedi can fail on half-written code: no completion is the answer then
            return []
        return [(name.full_name or "", name.type) for name in names]


def completions(lines: Sequence[str], path: str, line: int, column: int,
                kernels: Callable[[], dict[str, str]] | None = None, trigger: str | None = None
                ) -> list[types.CompletionItem]:
    """Completion items at 0-based `line`, character `column` (pure: no server state).
    `kernels()` gives `cursor.dsl_function_kinds(lines)` (the handler keeps it per version);
    `trigger` is the character that asked, if one did: `(` and `,` ask only inside a launch."""
    if not 0 <= line < len(lines):
        return []
    where = cursor.enclosing_function(lines, line, column)
    before = line_content(lines[line])[:column]
    word = re.search(r"\w*$", before)
    start = word.start() if word else column
    if start > 0 and before[start - 1] == ".":
        return _members(lines, path, where, line, before, start - 1, kernels)
    out: list[types.CompletionItem] = []
    call = cursor.call_at(lines, where, line, column)
    in_launch = call is not None and call.callee.endswith(".launch") and call.keyword is None
    if call is not None and in_launch:
        out += launch_keyword_items(call.keywords, call.argument)
    elif trigger in ("(", ","):
        return []  # an argument list of any other call: nothing to pop up uninvited
    by_name = {api.name: api for api in dsl_names()}
    for name, bound in _imported_dsl_names(lines):
        api = by_name.get(name)
        if api is not None and usable(api.where, where.kind):
            out.append(_api_item(api, bound))
    return out


def _members(lines: Sequence[str], path: str, where: Enclosing, line: int, before: str, dot: int,
             kernels: Callable[[], dict[str, str]] | None) -> list[types.CompletionItem]:
    """What may follow the `.` at `dot` of the line's text `before` the cursor."""
    receiver = before[cursor.callee_start(before, dot):dot]
    if not receiver or receiver[0].isdigit():
        return []
    if receiver.endswith(")"):  # `saxpy(x, y).`: a kernel applied to its arguments
        name = receiver[: receiver.find("(")].rsplit(".", 1)[-1]
        kinds = kernels() if kernels is not None else cursor.dsl_function_kinds(lines)
        return list(_fixed_items("launch")) if kinds.get(name) == "kernel" and where.kind != KERNEL else []
    for full_name, kind in _infer(lines, where, path, line, dot):
        if kind == "module" and full_name == "dsl":
            return list(api_items(where.kind))
        if kind != "instance":
            continue
        if full_name in _TENSORS:
            return list(tensor_items(where.kind))
        if full_name == _DIM3 and where.kind in (KERNEL, HELPER, MODULE):
            return list(_fixed_items("dim3"))
        if full_name == _ALLOCATOR:
            return list(_fixed_items("allocator"))
        if full_name == _SHARED_ARRAY:
            return list(_fixed_items("shared"))
        if full_name == _KERNEL_LAUNCH:
            return list(_fixed_items("launch"))
    return []


# -- the handler ------------------------------------------------------------------------------

_KERNELS: dict[str, tuple[int, dict[str, str]]] = {}  # uri -> (version, its DSL functions by name)


def register(server: KdslLanguageServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=TRIGGERS))
    def completion(ls: KdslLanguageServer, params: types.CompletionParams) -> types.CompletionList | None:
        uri = params.text_document.uri
        state = ls.documents.get(uri)
        if state is None:
            return None
        lines = state.lines
        line, column = from_lsp_position(params.position, lines)
        version = state.version
        context = params.context
        trigger = context.trigger_character if context is not None else None
        items = completions(lines, state.path, line - 1, column, lambda: dsl_functions_of(uri, version, lines),
                            trigger)
        if not _markdown_ok(ls):
            items = [as_plain_text(item) for item in items]
        return types.CompletionList(is_incomplete=False, items=items)


def _markdown_ok(ls: KdslLanguageServer) -> bool:
    """Whether the client reads Markdown documentation in completion items."""
    document = ls.client_capabilities.text_document
    item = document.completion.completion_item if document and document.completion else None
    return bool(item and item.documentation_format and types.MarkupKind.Markdown in item.documentation_format)


def as_plain_text(item: types.CompletionItem) -> types.CompletionItem:
    """`item` with its documentation as a plain string, for clients without Markdown."""
    doc = item.documentation
    if not isinstance(doc, types.MarkupContent):
        return item
    return attrs.evolve(item, documentation=doc.value)


def dsl_functions_of(uri: str, version: int, lines: Sequence[str]) -> dict[str, str]:
    """`cursor.dsl_function_kinds` of a document, kept for its current version."""
    known = _KERNELS.get(uri)
    if known is None or known[0] != version:
        if len(_KERNELS) > 64:
            _KERNELS.clear()
        known = _KERNELS[uri] = (version, cursor.dsl_function_kinds(lines))
    return known[1]
