"""Which files `kdsl lint PATH...` checks.

Directories are walked for `.py` files, skipping hidden folders and the usual
environment and cache folders. A file named on the command line is checked even if it
does not end in `.py`. Exclusion patterns apply to both, so a pre-commit hook that passes
file names one by one honours `[tool.kdsl] exclude` too.

A pattern matches a path if it matches the whole path relative to the pattern's anchor
folder (`tests/data/*.py`) or any single component of it (`build`, `*_pb2.py`), the way
people expect `.gitignore`-style names to work.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path, PurePosixPath

SKIPPED_DIRS = frozenset({"__pycache__", ".venv", "venv", "node_modules", "build", "dist", "site-packages"})


def _is_skipped_dir(name: str) -> bool:
    return name.startswith(".") or name in SKIPPED_DIRS or name.endswith(".egg-info")


def _relative(path: Path, anchor: Path) -> PurePosixPath | None:
    try:
        return PurePosixPath(path.relative_to(anchor).as_posix())
    except ValueError:
        return None


def matches(path: Path, patterns: Sequence[str], anchor: Path) -> bool:
    """True if an fnmatch `pattern` matches `path` relative to `anchor`, or one of its parts."""
    if not patterns:
        return False
    rel = _relative(path, anchor)
    candidates = [rel.as_posix(), *rel.parts] if rel is not None else list(path.parts)
    return any(fnmatch.fnmatch(c, p.rstrip("/")) for p in patterns for c in candidates)


class Excluder:
    """The exclusion rules of one run: patterns anchored at the config root and at the cwd."""

    def __init__(
        self, config_patterns: Sequence[str], config_root: Path, cli_patterns: Sequence[str], cwd: Path
    ):
        self._rules = [(tuple(config_patterns), config_root), (tuple(cli_patterns), cwd)]

    def __call__(self, path: Path) -> bool:
        return any(matches(path, patterns, anchor) for patterns, anchor in self._rules)


def _walk(folder: Path, excluded: Excluder) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(folder):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not _is_skipped_dir(d) and not excluded(here / d))
        for name in sorted(filenames):
            candidate = here / name
            if name.endswith(".py") and not excluded(candidate):
                yield candidate


def discover(paths: Iterable[str], excluded: Excluder) -> tuple[list[Path], list[str]]:
    """Absolute, deduplicated files to lint in a stable order, and the paths that do not exist."""
    found: dict[Path, None] = {}
    missing: list[str] = []
    for given in paths:
        path = Path(given).absolute()
        if path.is_dir():
            for file in _walk(path, excluded):
                found.setdefault(file)
        elif path.exists() or path.is_symlink():
            if not excluded(path):
                found.setdefault(path)
        else:
            missing.append(given)
    return list(found), missing
