"""Document sync and diagnostics: the instant tier now, the compiler tier after a quiet spell.

On open and on every change the server runs `dsl.static_checks` (AST only, no user code)
and publishes at once. Unless the workspace is untrusted it then schedules the compiler
tier: after `debounceMs` without edits the worker compiles a snapshot of the buffer; a newer
edit cancels that run (killing the user code), and a result that arrives for an older
version, or after the document closed, is dropped. Every publication carries the version
it describes.

Opening a file whose report was kept when it was last saved or closed, for the same text,
dependencies, settings and toolchain (`lsp.result_cache`), publishes that report first; the
worker analyses the file anyway, to be warm for the first edit.

Until the compiler tier catches up, the previous report's diagnostics stay published next
to the fresh static ones, so squiggles do not flicker off on every keystroke (their ranges
are clamped to the current text). Syntax errors (DSL003) come from the instant tier only:
it parses exactly the current buffer, while a report may describe an older one.

`kdsl/text {uri}` -> `{version, text}` answers what the server holds for a document, so a
client (or a test) can check that both sides agree.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from dsl.compiler.artifacts import ModuleReport
from dsl.diagnostics import Diagnostic
from lsp import result_cache
from lsp.analysis import merge
from lsp.convert import to_lsp_diagnostic, uri_to_path
from lsp.session import DocumentState
from lsp.static_tier import LARGE_DOCUMENT

if TYPE_CHECKING:
    from lsp.server import KdslLanguageServer

log = logging.getLogger(__name__)

# How long a request that needs compiler results (hover, IR, lenses) waits for them.
REPORT_WAIT_S = 30.0
TEXT_REQUEST = "kdsl/text"


def diagnostics_of(state: DocumentState, *, current_only: bool = False) -> list[Diagnostic]:
    """Static plus compiler diagnostics; `current_only` leaves out a report for an older version
    (its ranges may no longer fit the text, which matters when applying its fixes)."""
    report = state.report if state.report_is_current or not current_only else None
    if not state.report_is_current and state.traced is not None and state.traced_version == state.version:
        report = state.traced  # this version's, as tracing left it: newer than any full report held
    compiled = [d for d in report.all_diagnostics() if d.code != "DSL003"] if report is not None else []
    return list(merge(state.static_diagnostics, compiled))


def publish(ls: KdslLanguageServer, state: DocumentState) -> None:
    lines = state.lines
    diagnostics = [to_lsp_diagnostic(d, lines, state.uri, state.path) for d in diagnostics_of(state)]
    ls.text_document_publish_diagnostics(
        types.PublishDiagnosticsParams(uri=state.uri, diagnostics=diagnostics, version=state.version)
    )


def check(ls: KdslLanguageServer, state: DocumentState, *, debounce: bool = True, kept: bool = False) -> None:
    """Schedules the compiler tier, runs the instant tier and publishes.

    The compiler tier is scheduled first, so its quiet time counts from the edit, not from
    when the instant tier is done. A big document's instant tier runs as a task that yields
    after each group it checks (`lsp.static_tier`), so opening 5 MB does not stop the server
    answering; a keystroke re-checks one group and publishes within a few event-loop turns.
    Both tiers check for the configured target."""
    if ls.settings.trusted:
        schedule_analysis(ls, state, ls.settings.debounce_ms / 1000 if debounce else 0.0, kept=kept)
    target = ls.settings.target
    if state.buffer.size < LARGE_DOCUMENT:
        state.static_diagnostics = state.index.static_diagnostics(state.buffer, state.version, state.path, target)
        publish(ls, state)
        return
    if state.static_run is not None and not state.static_run.done():
        state.static_run.cancel()
    state.static_run = asyncio.ensure_future(_check_large(ls, state, target))


async def _check_large(ls: KdslLanguageServer, state: DocumentState, target: str | None) -> None:
    version = state.version
    found = await state.index.static_diagnostics_async(state.buffer, version, state.path, target)
    # Runs late: publish only if the document is still open at this version.
    if ls.documents.get(state.uri) is state and state.version == version:
        state.static_diagnostics = found
        publish(ls, state)


def schedule_analysis(ls: KdslLanguageServer, state: DocumentState, delay_s: float, *, kept: bool = False) -> None:
    """The compiler tier for the document's current version after `delay_s`; with `kept`, a
    report kept from an earlier session for this very text is published first."""
    if state.analysis is not None and not state.analysis.done():
        state.analysis.cancel()
    state.analysis = asyncio.ensure_future(
        _analyze_later(ls, state.uri, state.path, state.version, state.text, delay_s, kept)
    )


async def _analyze_later(
    ls: KdslLanguageServer, uri: str, path: str, version: int, text: str, delay_s: float, kept: bool = False
) -> None:
    if delay_s > 0:
        await asyncio.sleep(delay_s)
    if kept:
        await _publish_kept(ls, uri, path, version, text)

    def traced(report: ModuleReport) -> None:  # what tracing found, while lowering and ptxas run
        state = ls.documents.get(uri)
        if state is not None and state.version == version and not state.report_is_current:
            state.traced, state.traced_version, state.traced_text = report, version, text
            state.traced_fresh.set()
            publish(ls, state)

    try:
        analysis = await ls.analyze(text, path, on_traced=traced)
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("analysis of %s failed", uri)
        return
    # Runs late, so the document may have changed or closed meanwhile: accept_report checks.
    state = ls.documents.accept_report(uri, version, text, analysis.report, analysis.imported)
    if state is not None:
        publish(ls, state)
        _refresh_code_lenses(ls)


def _kept_key(ls: KdslLanguageServer, path: str, text: str) -> str:
    s = ls.settings
    options = {"target": s.target, "timeout": s.timeout_seconds, "memory": s.memory_limit_mb, "sandbox": s.sandbox}
    return result_cache.entry_key(result_cache.EDITOR, path, text, options)


async def _publish_kept(ls: KdslLanguageServer, uri: str, path: str, version: int, text: str) -> None:
    """Opening a file whose report was kept (`lsp.result_cache`: same text, dependencies,
    settings and toolchain) publishes that report at once; the worker still analyses the
    file, so that its run process is warm for the first edit, and its report replaces this one."""
    await ls.configuration.ready()
    if not ls.settings.trusted:
        return
    try:
        report = await asyncio.to_thread(result_cache.load_report, _kept_key(ls, path, text))
    except Exception as exc:  # a cache that cannot be read is a cache miss
        log.warning("reading the kept report of %s failed: %s", uri, exc)
        return
    state = ls.documents.accept_report(uri, version, text, report) if report is not None else None
    if state is not None:
        publish(ls, state)
        _refresh_code_lenses(ls)


def keep_report(ls: KdslLanguageServer, state: DocumentState) -> None:
    """Keeps the document's current report for the next time the file is opened (on save and
    on close), in the background."""
    report, text, imported = state.report, state.report_text, state.report_imported
    if not ls.settings.trusted or report is None or text is None or not state.report_is_current:
        return
    if not result_cache.keepable(report.all_diagnostics(), imported):
        return
    key = _kept_key(ls, state.path, text)

    async def store() -> None:
        try:
            await asyncio.to_thread(result_cache.store_report, key, report, imported)
        except Exception as exc:
            log.warning("keeping the report of %s failed: %s", state.uri, exc)

    ls.spawn(store())


def _refresh_code_lenses(ls: KdslLanguageServer) -> None:
    """Lens titles show the latest resources, so ask clients that can to re-request them."""
    workspace = ls.client_capabilities.workspace
    lens = workspace.code_lens if workspace is not None else None
    if lens is not None and lens.refresh_support:
        ls.workspace_code_lens_refresh(None)


async def current_report(
    ls: KdslLanguageServer, uri: str, *, wait_s: float = REPORT_WAIT_S
) -> ModuleReport | None:
    """The compiler report for the document's current version, starting or awaiting it if needed.

    Falls back to the latest older report if the document keeps changing, and returns None
    for untrusted workspaces, closed documents, or before any report exists.
    """
    state = ls.documents.get(uri)
    if state is None or not ls.settings.trusted:
        return None
    if not state.report_is_current:
        if state.analysis is None or state.analysis.done():
            schedule_analysis(ls, state, 0.0)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(state.fresh.wait(), wait_s)
        state = ls.documents.get(uri)
    return state.report if state is not None else None


def register(server: KdslLanguageServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: KdslLanguageServer, params: types.DidOpenTextDocumentParams) -> None:
        doc = params.text_document
        state = ls.documents.open(doc.uri, uri_to_path(doc.uri), doc.version, doc.text)
        check(ls, state, debounce=False, kept=True)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: KdslLanguageServer, params: types.DidChangeTextDocumentParams) -> None:
        doc = params.text_document
        state, problems = ls.documents.change(doc.uri, doc.version, params.content_changes)
        for problem in problems:  # the client's text and ours may differ now: say so
            log.warning("didChange: %s", problem)
            ls.window_log_message(types.LogMessageParams(type=types.MessageType.Warning, message=problem))
        if state is not None:
            check(ls, state)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: KdslLanguageServer, params: types.DidSaveTextDocumentParams) -> None:
        # Saving changes no text, but files the module imports may have changed on disk.
        state = ls.documents.get(params.text_document.uri)
        if state is not None and ls.settings.trusted:
            keep_report(ls, state)
            schedule_analysis(ls, state, 0.0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: KdslLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
        from lsp.features import profile

        state = ls.documents.get(params.text_document.uri)
        if state is not None:
            keep_report(ls, state)
        ls.documents.close(params.text_document.uri)
        profile.forget(params.text_document.uri)  # its hints and hover go with the document
        ls.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[])
        )

    @server.feature(TEXT_REQUEST)
    def text(ls: KdslLanguageServer, params: Any) -> dict[str, Any] | None:
        uri = params.get("uri") if isinstance(params, dict) else getattr(params, "uri", None)
        state = ls.documents.get(uri) if isinstance(uri, str) else None
        return {"version": state.version, "text": state.text} if state is not None else None

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def did_change_configuration(ls: KdslLanguageServer, params: types.DidChangeConfigurationParams) -> None:
        if params.settings is None:  # "settings changed, pull them": the answer arrives later
            ls.configuration.start(ls, on_change=lambda: _settings_changed(ls))
        elif ls.apply_settings(params.settings):
            _settings_changed(ls)


def _settings_changed(ls: KdslLanguageServer) -> None:
    """Re-checks every open document under the new settings (dropping reports if now untrusted),
    and asks the client for its inlay hints again: no edit will, and `inlayHints.lineCost`
    changes what they show."""
    for state in ls.documents.all():
        if not ls.settings.trusted:
            state.report = state.report_version = state.report_text = None
            state.ran = state.ran_text = None
        check(ls, state, debounce=False)
    workspace = ls.client_capabilities.workspace
    hints = workspace.inlay_hint if workspace is not None else None
    if hints is not None and hints.refresh_support:
        ls.workspace_inlay_hint_refresh(None)
