"""Per-document state of the language server: what is open, at which version, and what is known.

Concurrency rule (the one place it is stated): every `DocumentState` is read and written
only on the server's event loop — by handlers, which are coroutines or plain functions run
there. Background work, the compiler tier in the analysis worker, is handed an immutable
snapshot `(text, version)` and never touches the state; its result comes back through
`DocumentStore.accept_report`, which drops it unless the document is still open and still at
that version. A newer edit cancels the older analysis before scheduling its own, so at most
one analysis per document is in flight.

The text lives in a `TextBuffer` (LSP's line model); `DocumentStore.change` applies the
client's edits to it and refuses a version that does not increase, so the version every
publication carries is never older than the text it describes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lsprotocol import types

from dsl.compiler.artifacts import ModuleReport
from dsl.diagnostics import Diagnostic
from lsp.static_tier import DocumentIndex
from lsp.text_model import TextBuffer


@dataclass
class DocumentState:
    uri: str
    path: str
    version: int
    buffer: TextBuffer
    static_diagnostics: list[Diagnostic] = field(default_factory=list)
    report: ModuleReport | None = None  # latest compiler-tier result, possibly for an older version
    report_version: int | None = None
    report_text: str | None = None  # the text `report` was computed from (its ranges refer to it)
    report_imported: list[str] | None = None  # what the run that made `report` imported (None: unknown)
    # the report of `traced_version` as tracing left it (no compiled results), while the rest
    # of that analysis runs: what the tracer found is shown before ptxas is done
    traced: ModuleReport | None = None
    traced_version: int | None = None
    traced_text: str | None = None  # the text `traced` was made from
    traced_fresh: asyncio.Event = field(default_factory=asyncio.Event)  # set once `traced` is for `version`
    # the latest report of a version that ran (it has functions), or what tracing found of a
    # newer one, and its text: while typing breaks the syntax, the facts the editor shows
    # (inlay types, semantic tokens) come from it, in whatever order requests and reports came
    ran: ModuleReport | None = None
    ran_text: str | None = None
    analysis: asyncio.Task[None] | None = None  # the debounced compiler-tier run, if any
    static_run: asyncio.Task[None] | None = None  # the instant tier of a big document, if running
    fresh: asyncio.Event = field(default_factory=asyncio.Event)  # set once `report` is for `version`
    index: DocumentIndex = field(default_factory=DocumentIndex)  # static results per group of lines
    # What features work out from the current text (hover's parse), kept until the next change,
    # so a second request on the same version does not parse the document again; `earlier` is
    # the last version's that had any, which a feature may build on (hover reparses less).
    derived: dict[str, Any] = field(default_factory=dict)
    earlier: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return self.buffer.text

    @property
    def lines(self) -> Sequence[str]:
        """The lines with their endings, as `lsp.convert` takes them (cheaper than `text`)."""
        return self.buffer.lines

    @property
    def report_is_current(self) -> bool:
        return self.report is not None and self.report_version == self.version


class DocumentStore:
    """Open documents by URI."""

    def __init__(self) -> None:
        self._docs: dict[str, DocumentState] = {}

    def get(self, uri: str) -> DocumentState | None:
        return self._docs.get(uri)

    def __contains__(self, uri: str) -> bool:
        return uri in self._docs

    def open(self, uri: str, path: str, version: int, text: str) -> DocumentState:
        self.close(uri)
        state = DocumentState(uri=uri, path=path, version=version, buffer=TextBuffer(text))
        self._docs[uri] = state
        return state

    def change(
        self, uri: str, version: int, changes: Sequence[types.TextDocumentContentChangeEvent]
    ) -> tuple[DocumentState | None, list[str]]:
        """Applies `changes` as the new `version`; returns the state (None when nothing
        changed) and what was wrong with the request. Cancels the old version's analysis and
        wakes its waiters."""
        state = self._docs.get(uri)
        if state is None:
            return None, [f"{uri} is not open"]
        if version <= state.version:
            return None, [f"version {version} of {uri} is not newer than {state.version}; change ignored"]
        problems: list[str] = []
        for change in changes:
            if isinstance(change, types.TextDocumentContentChangePartial):
                rng = change.range
                problems += state.buffer.apply(
                    (rng.start.line, rng.start.character), (rng.end.line, rng.end.character), change.text
                )
            else:
                state.buffer.replace_all(change.text)
        self._cancel(state)
        state.version = version
        state.earlier, state.derived = state.derived or state.earlier, {}
        state.fresh.set()  # waiters for the old version wake up and see it is gone
        state.fresh = asyncio.Event()
        state.traced_fresh.set()
        state.traced_fresh = asyncio.Event()
        return state, problems

    def close(self, uri: str) -> None:
        state = self._docs.pop(uri, None)
        if state is not None:
            self._cancel(state)
            state.fresh.set()
            state.traced_fresh.set()

    def accept_report(
        self, uri: str, version: int, text: str, report: ModuleReport, imported: list[str] | None = None
    ) -> DocumentState | None:
        """Stores `report` if it is for the open document's current version; else drops it."""
        state = self._docs.get(uri)
        if state is None or state.version != version:
            return None
        if report.functions:
            state.ran, state.ran_text = report, text
        elif state.traced is not None:  # tracing of a version newer than any report that ran
            state.ran, state.ran_text = state.traced, state.traced_text
        state.report, state.report_version, state.report_text = report, version, text
        state.traced = state.traced_version = state.traced_text = None
        state.report_imported = imported
        state.fresh.set()
        return state

    def all(self) -> list[DocumentState]:
        return list(self._docs.values())

    @staticmethod
    def _cancel(state: DocumentState) -> None:
        for task in (state.analysis, state.static_run):
            if task is not None and not task.done():
                task.cancel()
        state.analysis = state.static_run = None
