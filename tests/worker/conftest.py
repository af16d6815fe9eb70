"""Fixtures for analysis worker tests: small limits keep pathological cases quick."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from server_session import session  # noqa: F401 - a real server over stdio, for the trust tests

from lsp.worker import AnalysisWorker

TIMEOUT_S = 2.0
MEMORY_MB = 2048


@pytest.fixture
async def worker() -> AsyncIterator[AnalysisWorker]:
    w = AnalysisWorker(timeout=TIMEOUT_S, memory_mb=MEMORY_MB)
    yield w
    await w.close()
