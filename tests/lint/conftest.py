"""Fixtures for `kdsl lint` tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A fresh project folder; no pyproject.toml above it has a [tool.kdsl] table."""
    return tmp_path / "project"
