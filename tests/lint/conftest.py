"""Fixtures for `kdsl lint` tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache of lint's results (and compiled kernels) of the test's own, empty at its start,
    so that no test sees another's results and none writes to the user's cache."""
    folder = tmp_path / "kdsl-cache"
    monkeypatch.setenv("KDSL_CACHE_DIR", str(folder))
    monkeypatch.delenv("KDSL_NO_DISK_CACHE", raising=False)
    return folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A fresh project folder; no pyproject.toml above it has a [tool.kdsl] table."""
    return tmp_path / "project"
