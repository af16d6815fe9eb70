"""Opening a file again shows the compiler's results at once: the report kept when it was
closed (`lsp.result_cache`: same text, dependencies, settings, toolchain) is published first,
and the worker analyses the file anyway, so that its run process is warm for the first edit.

Fixture: data/slow_start.py, whose top level takes 3 s and notes each run in `$RUNS_LOG`,
and ends with a DSL001 that only the compiler tier reports. Two servers share a cache folder
of this module's own: the first opens and closes the file, the second opens it again.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.lsp.conftest import diagnostics_for, has_code, initialize, make_client, open_file, pos, tdi, wait_until

_FOLDER = Path(tempfile.mkdtemp(prefix="kdsl-reopen-"))
RUNS_LOG = _FOLDER / "runs.log"
CACHE = _FOLDER / "cache"
_ENV = dict(os.environ, KDSL_CACHE_DIR=str(CACHE), RUNS_LOG=str(RUNS_LOG))
_CONFIG = ClientServerConfig(server_command=[sys.executable, "-m", "lsp"], client_factory=make_client, server_env=_ENV)


@pytest_lsp.fixture(config=_CONFIG)
async def first(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=_CONFIG)
async def second(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


def runs() -> int:
    return len(RUNS_LOG.read_text().splitlines()) if RUNS_LOG.exists() else 0


def kept_reports() -> list[Path]:
    return list((CACHE / "editor").rglob("*.bin"))


async def test_a_reopened_file_shows_its_kept_report_first(first, second):
    await initialize(first)
    uri = open_file(first, "slow_start.py")
    compiled = await diagnostics_for(first, uri, 1, has_code("DSL001"))
    assert runs() == 1 and not kept_reports()
    first.text_document_did_close(types.DidCloseTextDocumentParams(text_document=tdi(uri)))
    await wait_until(kept_reports, what="the report kept on close")

    await initialize(second)
    assert open_file(second, "slow_start.py") == uri
    kept = await diagnostics_for(second, uri, 1, has_code("DSL001"))
    assert runs() == 1  # published before the second server's own run got past its 3 s
    assert kept == compiled
    hover = await second.text_document_hover_async(types.HoverParams(text_document=tdi(uri), position=pos(15, 4)))
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    assert hover.contents.value.startswith("**@kernel `k`**")  # from the kept report, with its resources
    await wait_until(lambda: runs() == 2, what="the second server's own analysis")
    fresh = await wait_until(
        lambda: [p for p in second.published if p.uri == uri and p.version == 1][2:],
        what="the fresh report's publication",
    )
    assert list(fresh[-1].diagnostics) == compiled
