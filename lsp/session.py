"""Per-document state of the language server: what is open, at which version, and what is known.

Concurrency rule (the one place it is stated): every `DocumentState` is read and written
only on the server's event loop — by handlers, which are coroutines or plain functions run
there. Background work, the compiler tier in the analysis worker, is handed an immutable
snapshot `(text, version)` and never touches the state; its result comes back through
`DocumentStore.accept_report`, which drops it unless the document is still open and still at
that version. A newer edit cancels the older analysis before scheduling its own, so at most
one analysis per document is in flight.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from dsl.compiler.artifacts import ModuleReport
from dsl.diagnostics import Diagnostic


@dataclass
class DocumentState:
    uri: str
    path: str
    version: int
    text: str
    static_diagnostics: list[Diagnostic] = field(default_factory=list)
    report: ModuleReport | None = None  # latest compiler-tier result, possibly for an older version
    report_version: int | None = None
    report_text: str | None = None  # the text `report` was computed from (its ranges refer to it)
    analysis: asyncio.Task[None] | None = None  # the debounced compiler-tier run, if any
    fresh: asyncio.Event = field(default_factory=asyncio.Event)  # set once `report` is for `version`

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
        state = DocumentState(uri=uri, path=path, version=version, text=text)
        self._docs[uri] = state
        return state

    def change(self, uri: str, version: int, text: str) -> DocumentState | None:
        """Records a new version; cancels the analysis of the old one and wakes its waiters."""
        state = self._docs.get(uri)
        if state is None:
            return None
        self._cancel(state)
        state.version = version
        state.text = text
        state.fresh.set()  # waiters for the old version wake up and see it is gone
        state.fresh = asyncio.Event()
        return state

    def close(self, uri: str) -> None:
        state = self._docs.pop(uri, None)
        if state is not None:
            self._cancel(state)
            state.fresh.set()

    def accept_report(self, uri: str, version: int, text: str, report: ModuleReport) -> DocumentState | None:
        """Stores `report` if it is for the open document's current version; else drops it."""
        state = self._docs.get(uri)
        if state is None or state.version != version:
            return None
        state.report, state.report_version, state.report_text = report, version, text
        state.fresh.set()
        return state

    def all(self) -> list[DocumentState]:
        return list(self._docs.values())

    @staticmethod
    def _cancel(state: DocumentState) -> None:
        if state.analysis is not None and not state.analysis.done():
            state.analysis.cancel()
        state.analysis = None
