"""Signature help for the calls a kernel author writes: intrinsics, kernels and launches.

- `dsl.shfl_xor(`, or any alias of an intrinsic: its parameters as the typed stubs declare
  them (without their type variables) and its documentation, resolved with jedi;
- `saxpy(` for a kernel or jit function of the document: its parameters with their DSL types
  (`x: Tensor[f32, 1]`, `a: f32`, `BLOCK: Constexpr[int] = 256`);
- `.launch(`: `grid, block, smem=None, stream=None, cluster=None`, each documented.

The active parameter follows the argument being written, by position or by `name=`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs
from lsprotocol import types

from dsl.frontend.launch_syntax import LAUNCH_PARAMETERS
from dsl.language.types import DType
from lsp.convert import from_lsp_position
from lsp.features import cursor, dsl_api, jedi_use
from lsp.features.completion import dsl_functions_of
from lsp.features.cursor import CallAtCursor

if TYPE_CHECKING:
    from lsp.server import KdslLanguageServer

TRIGGERS = ["(", ","]
RETRIGGERS = [")"]


def _markdown(text: str) -> types.MarkupContent | None:
    return types.MarkupContent(kind=types.MarkupKind.Markdown, value=text) if text else None


def _active(params: list[str], call: CallAtCursor) -> int:
    """The parameter the cursor's argument fills: its `name=`, else its position (a trailing
    `*args` takes every later position)."""
    names = [p.lstrip("*").split("=")[0].split(":")[0].strip() for p in params]
    if call.keyword is not None and call.keyword in names:
        return names.index(call.keyword)
    for index, param in enumerate(params):
        if param.startswith("*") and not param.startswith("**") and call.argument >= index:
            return index
    return min(call.argument, max(len(params) - 1, 0))


def _signature(name: str, params: list[str], doc: str, call: CallAtCursor,
               param_docs: dict[str, str] | None = None) -> types.SignatureInformation:
    param_docs = param_docs or {}
    return types.SignatureInformation(
        label=f"{name}({', '.join(params)})",
        documentation=_markdown(doc),
        parameters=[types.ParameterInformation(label=p, documentation=_markdown(param_docs.get(p.split("=")[0], "")))
                    for p in params],
        active_parameter=_active(params, call),
    )


def launch_signature(call: CallAtCursor) -> types.SignatureInformation:
    params = ["grid", "block", *(f"{name}=None" for name in LAUNCH_PARAMETERS[2:])]
    return _signature("launch", params, dsl_api.LAUNCH_DOC, call, dsl_api.LAUNCH_KEYWORDS)


def _function_signature(lines: Sequence[str], name: str, kind: str, call: CallAtCursor
                        ) -> types.SignatureInformation | None:
    node = cursor.def_header(lines, name)
    if node is None:
        return None
    doc = (f"`@dsl.kernel`: launch it from a `@dsl.jit` function with `{name}(...).launch(grid=..., block=...)`."
           if kind == "kernel" else "`@dsl.jit`: call it with arrays (any DLPack array) and Python numbers.")
    return _signature(name, dsl_api.function_parameters(node), doc, call)


def _api_signatures(lines: Sequence[str], path: str, where: cursor.Enclosing, line: int, call: CallAtCursor
                    ) -> list[types.SignatureInformation]:
    """The signatures of the DSL function the callee resolves to (through imports and aliases)."""

    callee_line, callee_column = call.callee_end
    piece = cursor.snippet(lines, where, line, first=min(callee_line, where.start if where.kind != "module"
                                                         else callee_line))
    with jedi_use.LOCK:  # reading a jedi name may ask jedi's subprocess too
        try:
            names = jedi_use.resolved(lambda: jedi_use.script(piece.text, path).goto(
                piece.line_of(callee_line), callee_column, follow_imports=True))
        except Exception:  # half-written code jedi cannot read: no help is the answer
            return []
        full_names = [found.full_name or "" for found in names]
    for full_name in full_names:
        resolved = dsl_api.resolve(full_name)
        if resolved is None:
            continue
        obj, module, qualname = resolved
        short = call.callee.rsplit(".", 1)[-1]
        doc = dsl_api.own_doc(obj)
        if isinstance(obj, DType):
            return [_signature(short, ["value"], f"Casts `value` to `{obj.name}`.", call)]
        lookup = f"{qualname}.__init__" if isinstance(obj, type) else qualname
        labels = dsl_api.stub_signatures(module, lookup) or dsl_api.stub_signatures(module, short)
        out = []
        for label in labels:
            params = _split_params(label[label.index("(") + 1 : -1])
            out.append(_signature(short, params, doc, call))
        return out
    return []


def _split_params(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current.strip())
    return parts


def signature_help(lines: Sequence[str], path: str, line: int, column: int,
                   functions: Callable[[], dict[str, str]] | None = None) -> types.SignatureHelp | None:
    """Signature help at 0-based `line`, character `column`, or None outside a known call."""
    where = cursor.enclosing_function(lines, line, column)
    call = cursor.call_at(lines, where, line, column)
    if call is None:
        return None
    signatures: list[types.SignatureInformation] = []
    if call.callee.endswith(".launch") and call.callee[: -len(".launch")].endswith(")"):
        signatures = [launch_signature(call)]
    elif call.callee.isidentifier():
        kinds = functions() if functions is not None else cursor.dsl_function_kinds(lines)
        if call.callee in kinds:
            found = _function_signature(lines, call.callee, kinds[call.callee], call)
            signatures = [found] if found is not None else []
    if not signatures and "(" not in call.callee:
        signatures = _api_signatures(lines, path, where, line, call)
    if not signatures:
        return None
    return types.SignatureHelp(signatures=signatures, active_signature=0,
                               active_parameter=signatures[0].active_parameter)


def register(server: KdslLanguageServer) -> None:
    @server.feature(
        types.TEXT_DOCUMENT_SIGNATURE_HELP,
        types.SignatureHelpOptions(trigger_characters=TRIGGERS, retrigger_characters=RETRIGGERS),
    )
    def signature(ls: KdslLanguageServer, params: types.SignatureHelpParams) -> types.SignatureHelp | None:
        state = ls.documents.get(params.text_document.uri)
        if state is None:
            return None
        lines = state.lines
        line, column = from_lsp_position(params.position, lines)

        def functions() -> dict[str, Any]:
            return dsl_functions_of(state.uri, state.version, lines)

        help_ = signature_help(lines, state.path, line - 1, column, functions)
        return help_ if help_ is None or _markdown_ok(ls) else _as_plain_text(help_)


def _markdown_ok(ls: KdslLanguageServer) -> bool:
    """Whether the client reads Markdown documentation in signature help."""
    document = ls.client_capabilities.text_document
    info = document.signature_help.signature_information if document and document.signature_help else None
    return bool(info and info.documentation_format and types.MarkupKind.Markdown in info.documentation_format)


def _plain(doc: Any) -> Any:
    return doc.value if isinstance(doc, types.MarkupContent) else doc


def _as_plain_text(help_: types.SignatureHelp) -> types.SignatureHelp:
    """`help_` with every documentation as a plain string, for clients without Markdown."""
    signatures = [
        attrs.evolve(s, documentation=_plain(s.documentation),
                     parameters=[attrs.evolve(p, documentation=_plain(p.documentation)) for p in s.parameters or []])
        for s in help_.signatures
    ]
    return attrs.evolve(help_, signatures=signatures)
