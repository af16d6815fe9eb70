"""Hover: what the compiler made of the code under the cursor.

- a kernel or jit name (its `def`, or any reference to it): resource figures and the
  lowered MLIR of that function;
- a `launch` call: grid, block and smem as written and as compiled, and whether the
  launch keeps the kernel's `known_block_size` contract;
- a DSL API name (`dsl.barrier`, `Tensor`, an alias of either): its documentation, found
  with jedi so imports and aliases resolve the way Python would;
- any other line of a kernel or jit body (or of a helper they inline): the MLIR and PTX
  lines that line produced, read from the stages' source maps.

`hover_markdown` is pure (text, position, report -> markdown); the handler only fetches
the document and the current report, and answers in the client's `contentFormat`: markdown,
or plain text (`markdown_to_plaintext`) for a client that takes only that.

On a file of a hundred kernels, parsing it is most of a hover's time, so the parse and the
list of functions (`HoverContext`) are kept with the document until its next change, and
the search for what is under the cursor walks only the top-level statement holding the line.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from dsl.compiler.artifacts import CompiledFunction, FunctionReport, ModuleReport, Resources
from dsl.diagnostics import SourceRange
from dsl.frontend.launch_syntax import launch_syntax
from dsl.frontend.source import parse_module
from lsp.convert import from_lsp_position, source_lines
from lsp.features import jedi_use, profile
from lsp.features.diagnostics import current_report
from lsp.features.symbols import DslFunction, dsl_functions, node_range

if TYPE_CHECKING:
    from lsp.server import KdslLanguageServer

MAX_IR_LINES = 200  # whole-function MLIR in a hover
MAX_LINE_IR = 40  # IR lines shown for one source line


def _fence(language: str, lines: list[str], limit: int) -> str:
    shown = lines[:limit]
    if len(lines) > limit:
        shown.append(f"// ... {len(lines) - limit} more lines (Show IR for the full text)")
    return f"```{language}\n" + "\n".join(shown) + "\n```"


_CONSTANT = re.compile(r"^\s*%[\w.#]+(?::\d+)? = (?:llvm\.mlir|arith)\.constant\b")


def body_first(lines: list[str]) -> list[str]:
    """The function's IR with its constants folded into one line where the first stood: a
    Hopper GEMM's lowered MLIR opens with ~130 `llvm.mlir.constant`s, which would fill the
    visible part of a hover."""
    constants = sum(1 for line in lines if _CONSTANT.match(line))
    if constants < 8:
        return lines
    out: list[str] = []
    for line in lines:
        if not _CONSTANT.match(line):
            out.append(line)
        elif constants:
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}// {constants} constants not shown (Show IR for the full text)")
            constants = 0
    return out


def _contains(rng: SourceRange, line: int, col: int) -> bool:
    if (line, col) < (rng.line, rng.column):
        return False
    return (line, col) <= (rng.end_line, rng.end_column)


# -- what is under the cursor -------------------------------------------------------------


@dataclass(frozen=True)
class HoverContext:
    """One version of a document as hover reads it: its AST (None when it does not parse),
    its lines and its kernel and jit functions (by top-level statement, for the next version)."""

    text: str
    tree: ast.Module | None
    lines: list[str]
    functions: list[DslFunction]
    by_statement: dict[int, tuple[ast.stmt, list[DslFunction]]]


def hover_context(text: str, path: str, previous: HoverContext | None = None) -> HoverContext:
    """The context of `text`; what `previous` (an earlier version's) found in the top-level
    statements that did not change is taken over (`parse_module` keeps their nodes)."""
    try:
        tree: ast.Module | None = parse_module(text, path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        tree = None
    known = previous.by_statement if previous is not None else {}
    body = tree.body if tree is not None else []
    changed = [stmt for stmt in body if known.get(id(stmt), (None,))[0] is not stmt]
    fresh = dsl_functions(text, path, ast.Module(body=changed, type_ignores=[])) if changed else []
    by_statement: dict[int, tuple[ast.stmt, list[DslFunction]]] = {}
    functions: list[DslFunction] = []
    for stmt in body:
        found = known.get(id(stmt))
        if found is None or found[0] is not stmt:
            first, last = _first_line(stmt), stmt.end_lineno or stmt.lineno
            found = (stmt, [f for f in fresh if first <= f.range.line <= last])
        by_statement[id(stmt)] = found
        functions.extend(found[1])
    return HoverContext(text, tree, list(source_lines(text)), functions, by_statement)


def _first_line(stmt: ast.stmt) -> int:
    return min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))])


def _around(tree: ast.Module, line: int) -> list[ast.AST]:
    """The nodes of the top-level statements that span 1-based `line` (decorators included):
    nothing else can hold a position on it."""
    spanning = [stmt for stmt in tree.body if _first_line(stmt) <= line <= (stmt.end_lineno or stmt.lineno)]
    return [node for stmt in spanning for node in ast.walk(stmt)]


def _identifier_at(tree: ast.Module, path: str, lines: list[str], line: int, col: int) -> ast.AST | None:
    """The innermost Name, Attribute (on its attribute token) or def name at the position."""
    best: ast.AST | None = None
    best_size = None
    for node in _around(tree, line):
        if isinstance(node, ast.Name):
            rng = node_range(node, path, lines)
        elif isinstance(node, ast.Attribute):
            full = node_range(node, path, lines)
            rng = SourceRange(
                path, full.end_line, full.end_column - len(node.attr), full.end_line, full.end_column
            )
        else:
            continue
        if _contains(rng, line, col):
            size = (rng.end_line - rng.line, rng.end_column - rng.column)
            if best_size is None or size < best_size:
                best, best_size = node, size
    return best


def _def_name_at(functions: list[DslFunction], line: int, col: int) -> DslFunction | None:
    return next((f for f in functions if _contains(f.name_range, line, col)), None)


def _launch_call_at(tree: ast.Module, path: str, lines: list[str], line: int, col: int) -> ast.Call | None:
    """The innermost `<kernel>(...).launch(...)` call whose text holds the position."""
    found: ast.Call | None = None
    for node in _around(tree, line):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "launch"
            and _contains(node_range(node, path, lines), line, col)
        ):
            found = node
    return found


# -- the four kinds of hover --------------------------------------------------------------


def _resources_table(compiled: CompiledFunction) -> str:
    rows = [
        "| kernel | registers | spills (st/ld) | smem (static + dynamic) | occupancy | tensor cores (SASS) |",
        "|---|---|---|---|---|---|",
    ]
    for kernel in compiled.kernels:
        r: Resources | None = kernel.resources
        if r is None:
            rows.append(f"| `{kernel.symbol}` | ? | ? | ? | ? | ? |")
            continue
        occupancy = "?" if r.occupancy is None else f"{r.occupancy:.0%}"
        if r.occupancy is not None and r.block_threads:
            occupancy += f" @ {r.block_threads} threads"
        mix = " ".join(f"{n} {op}" for op, n in sorted(r.tensor_cores.items())) or "none"
        rows.append(
            f"| `{kernel.symbol}` | {r.registers} | {r.spill_stores} B / {r.spill_loads} B "
            f"| {r.static_smem} + {r.dynamic_smem} B | {occupancy} | {mix} |"
        )
    return "\n".join(rows) if compiled.kernels else ""


def function_hover(fn: FunctionReport) -> str:
    parts = [f"**@{fn.kind} `{fn.name}`**"]
    compiled = fn.compiled
    if compiled is None:
        parts.append("compile failed:")
        parts.extend(f"- `{d.code}` {d.message} (line {d.range.line})" for d in fn.diagnostics)
        return "\n\n".join(parts)
    parts[0] += f" · {compiled.target}"
    table = _resources_table(compiled)
    if table:
        parts.append(table)
    stage = "lowered" if "lowered" in compiled.stages else "traced"
    text = compiled.stages.get(stage, "")
    if text:
        parts.append(f"{stage} MLIR:\n" + _fence("mlir", body_first(text.splitlines()), MAX_IR_LINES))
    return "\n\n".join(parts)


def _segment(lines: list[str], node: ast.AST | None, path: str) -> str | None:
    if node is None:
        return None
    rng = node_range(node, path, lines)
    if rng.line == rng.end_line:
        return lines[rng.line - 1][rng.column : rng.end_column]
    return ast.unparse(node)


def _literal_block(node: ast.AST | None) -> tuple[int, int, int] | None:
    try:
        value = ast.literal_eval(node) if node is not None else None
    except ValueError:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return (value, 1, 1)
    if isinstance(value, (list, tuple)) and 1 <= len(value) <= 3 and all(isinstance(v, int) for v in value):
        return tuple(list(value) + [1] * (3 - len(value)))  # type: ignore[return-value]
    return None


def _known_block_size(fn: DslFunction | None) -> tuple[ast.AST | None, tuple[int, int, int] | None]:
    if fn is None or not isinstance(fn.decorator, ast.Call):
        return None, None
    for kw in fn.decorator.keywords:
        if kw.arg == "known_block_size":
            return kw.value, _literal_block(kw.value)
    return None, None


def launch_hover(
    call: ast.Call, lines: list[str], path: str, functions: list[DslFunction], report: ModuleReport | None
) -> str:
    syntax = launch_syntax(call)
    assert syntax is not None
    short = (syntax.kernel_name or "?").rsplit(".", 1)[-1]
    args = syntax.arguments

    kernel_def = next((f for f in functions if f.name == short and f.kind == "kernel"), None)
    contract_node, contract = _known_block_size(kernel_def)
    info, fact = None, None
    if report is not None:
        line = call.lineno
        owners = [f for f in functions if f.range.contains_line(line)]
        for owner in owners:  # the jit function's own record of this launch: its exact specialization
            compiled = report.function(owner.name)
            fact = compiled.compiled.launch_at(path, line) if compiled and compiled.compiled else None
            if fact is not None:
                info = next((k for k in compiled.compiled.kernels if k.symbol == fact.symbol), None)
                contract = fact.contract or contract
                break
        candidates = [report.function(f.name) for f in owners] + [report.function(short)]
        for fn in candidates if info is None else []:
            if fn is not None and fn.compiled is not None:
                info = next((k for k in fn.compiled.kernels if k.source_name == short), None)
                if info is not None:
                    break

    written_block = _segment(lines, args.get("block"), path)
    block = (fact.block_static if fact is not None and fact.block_static else
             info.block if info is not None and info.block else _literal_block(args.get("block")))
    rows = [
        f"**launch of `{short}`**",
        "",
        "| | |",
        "|---|---|",
        f"| grid | `{_segment(lines, args.get('grid'), path) or '?'}` |",
        f"| block | `{written_block or '?'}`" + (f" → {block}" if block else "") + " |",
    ]
    smem_written = _segment(lines, args.get("smem"), path)
    if info is not None:
        smem = f"{info.dynamic_smem} B dynamic" + (f" (`{smem_written}`)" if smem_written else " (inferred)")
    else:
        smem = f"`{smem_written}`" if smem_written else "inferred from the kernel's allocations"
    rows.append(f"| smem | {smem} |")
    if contract_node is None:
        status = "no `known_block_size` contract"
    elif contract is None:
        status = f"`known_block_size={_segment(lines, contract_node, path)}` is not a literal"
    elif block is None:
        status = f"`known_block_size={list(contract)}`; block not known statically"
    elif tuple(block) == contract:
        status = f"✓ block {list(block)} keeps `known_block_size={list(contract)}`"
    else:
        status = f"✗ block {list(block)} differs from `known_block_size={list(contract)}`"
    rows.append(f"| contract | {status} |")
    if info is not None and info.resources is not None:
        rows.append(f"| resources | {info.resources.summary()} |")
    text = "\n".join(rows)
    if report is not None:
        span = node_range(call, path, lines)
        notes = [
            d
            for d in report.all_diagnostics()
            if os.path.abspath(d.range.file) == os.path.abspath(path)
            and span.line <= d.range.line <= span.end_line
        ]
        if notes:
            text += "\n\n" + "\n".join(f"- `{d.code}` {d.message}" for d in notes)
    return text


def dsl_api_doc(text: str, path: str, line: int, col: int) -> str | None:
    """Documentation of the DSL object at the position, resolved by jedi (aliases, imports)."""
    with jedi_use.LOCK:  # reading a jedi name (docstring, signatures) may ask jedi's subprocess too
        return _dsl_api_doc(text, path, line, col)


def _dsl_api_doc(text: str, path: str, line: int, col: int) -> str | None:

    try:
        # goto, not infer: a local variable assigned from a DSL call is the user's, not the DSL's.
        names = jedi_use.resolved(lambda: jedi_use.script(text, path).goto(line, col, follow_imports=True))
    except Exception:  # jedi can fail on half-typed code; no hover is the right answer then
        return None
    for name in names:
        full = name.full_name or ""
        if full != "dsl" and not full.startswith("dsl."):
            continue
        doc = _runtime_doc(full) or name.docstring(raw=True) or ""
        signature = ""
        try:
            sigs = name.get_signatures()
            if sigs:
                signature = sigs[0].to_string()
        except Exception:
            signature = ""
        head = f"```python\n{signature or full}\n```" + (f"\n\n`{full}`" if signature else "")
        return head + (f"\n\n{doc.strip()}" if doc.strip() else "")
    return None


def _runtime_doc(full_name: str) -> str | None:
    """The docstring of the imported `dsl` object: some are built at import time (intrinsic
    tables, `Dim3("thread_idx", doc)`), which jedi's static view cannot see. Importing `dsl`
    runs only our own package, never the user's module."""
    import importlib
    import inspect

    parts = full_name.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        try:
            for attr in parts[split:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return inspect.getdoc(obj)
    return None


def line_ir_hover(report: ModuleReport, path: str, line: int) -> str | None:
    """The MLIR (lowered, else traced) and PTX lines that source `line` produced, per function."""
    parts: list[str] = []
    for fn in report.functions:
        compiled = fn.compiled
        if compiled is None:
            continue
        section: list[str] = []
        for stages, language in ((("lowered", "traced"), "mlir"), (("ptx",), "ptx")):
            for stage in stages:
                smap, stage_text = compiled.source_maps.get(stage), compiled.stages.get(stage)
                if smap is None or not stage_text:
                    continue
                ir_lines = _ir_lines(smap, path, line)
                if ir_lines:
                    text_lines = stage_text.splitlines()
                    picked = [text_lines[i] for i in ir_lines if 0 <= i < len(text_lines)]
                    section.append(f"{stage}:\n" + _fence(language, picked, MAX_LINE_IR))
                    break
        if section:
            parts.append(f"**`{fn.name}`**, line {line}\n\n" + "\n\n".join(section))
    return "\n\n---\n\n".join(parts) or None


def _ir_lines(smap, path: str, line: int) -> list[int]:
    lines = smap.ir_lines_for(path, line)
    if not lines:
        wanted = os.path.abspath(path)
        lines = [
            ir for ir, rng in smap.entries if os.path.abspath(rng.file) == wanted and rng.contains_line(line)
        ]
    return sorted(set(lines))


def hover_markdown(
    text: str, path: str, line: int, col: int, report: ModuleReport | None, context: HoverContext | None = None,
    uri: str | None = None,
) -> str | None:
    """Hover text for 1-based `line`, 0-based character `col`, or None when there is nothing to
    say; `context` is `hover_context(text, path)` when the caller kept it."""
    context = context if context is not None and context.text is text else hover_context(text, path)
    tree, lines, functions = context.tree, context.lines, context.functions
    if tree is not None:
        fn_def = _def_name_at(functions, line, col)
        node = _identifier_at(tree, path, lines, line, col)
        name = fn_def.name if fn_def else node.id if isinstance(node, ast.Name) else None
        if name is None and isinstance(node, ast.Attribute):
            name = node.attr
        fn = report.function(name) if name is not None and report is not None else None
        if fn is not None and (fn_def is not None or any(f.name == name for f in functions)):
            profiled = profile.kernel_hover(uri, fn.name) if uri else None
            return function_hover(fn) + (f"\n\n{profiled}" if profiled else "")
        is_launch_token = isinstance(node, ast.Attribute) and node.attr == "launch"
        on_import = any(
            isinstance(n, (ast.Import, ast.ImportFrom)) and _contains(node_range(n, path, lines), line, col)
            for n in tree.body
        )
        if (node is not None or on_import) and not is_launch_token:
            doc = dsl_api_doc(text, path, line, col)
            if doc:
                return doc
        call = _launch_call_at(tree, path, lines, line, col)
        if call is not None:
            return launch_hover(call, lines, path, functions, report)
    if report is not None:
        return line_ir_hover(report, path, line)
    return None


def register(server: KdslLanguageServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(ls: KdslLanguageServer, params: types.HoverParams) -> types.Hover | None:
        uri = params.text_document.uri
        state = ls.documents.get(uri)
        if state is None:
            return None
        line, col = from_lsp_position(params.position, state.lines)
        report = await current_report(ls, uri)
        state = ls.documents.get(uri)
        if state is None:
            return None
        # On a big document only the imports and the block around the line are parsed.
        text = state.index.hover_source(state.buffer, state.version, line)
        context = state.derived.get("hover")
        if not isinstance(context, HoverContext) or context.text != text:
            earlier = state.derived.get("hover") or state.earlier.get("hover")
            context = hover_context(text, state.path, earlier if isinstance(earlier, HoverContext) else None)
            state.derived["hover"] = context
        markdown = hover_markdown(context.text, state.path, line, col, report, context, uri)
        if markdown is None:
            return None
        if not wants_markdown(ls.client_capabilities):
            return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.PlainText,
                                                            value=markdown_to_plaintext(markdown)))
        return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=markdown))


def wants_markdown(capabilities: types.ClientCapabilities) -> bool:
    """Markdown unless the client's `textDocument.hover.contentFormat` lists formats and
    markdown is not one of them (a client that renders only plain text)."""
    document = capabilities.text_document
    hover = document.hover if document is not None else None
    formats = hover.content_format if hover is not None else None
    return not formats or types.MarkupKind.Markdown in formats


_FENCE = re.compile(r"^```")
_RULE = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")  # a table's |---|---| line
_CODE = re.compile(r"`([^`]*)`")
_BOLD = re.compile(r"\*\*(.+?)\*\*")


def markdown_to_plaintext(markdown: str) -> str:
    """The hover's markdown as plain text: code fences dropped (their lines kept as they are),
    tables as columns joined by two spaces, no emphasis or backticks outside code."""
    out: list[str] = []
    in_code = False
    for line in markdown.split("\n"):
        if _FENCE.match(line):
            in_code = not in_code
            continue
        if in_code:
            out.append(line)
            continue
        if _RULE.match(line):
            continue
        if line.startswith("|") and line.rstrip().endswith("|"):
            cells = [cell.strip() for cell in line.strip()[1:-1].split("|") if cell.strip()]
            if not cells:  # a table's empty header
                continue
            line = "  ".join(cells)
        out.append(_BOLD.sub(r"\1", _CODE.sub(r"\1", line)))
    return "\n".join(out)
