"""Results of running and compiling a file, kept for the next run that sees the same file.

Checking a file with execution means starting a run process, running the module and
compiling every kernel: a tenth of a second and more per file, seconds for a file of a
hundred kernels. Two front ends keep what that gave:

- `kdsl lint` keeps each file's diagnostics (kind "lint"), so a second lint skips what did not
  change;
- the language server keeps a document's whole report when it is saved or closed (kind
  "editor"), so opening the file again shows the compiler's results at once (the worker
  still analyses it, to be warm for the first edit).

A result is a function of named parts, joined in one place (`entry_key`):

- the file: its absolute path (diagnostics name it) and a SHA-256 of its text;
- the options that change what is found, which each front end names (target, execution,
  time and memory limits, sandbox, IR views);
- the toolchain (`toolchain_version`: the MLIR library and ptxas), kdsl's own code
  (`kdsl_identity`: dsl/ and lsp/), Python's version and the environment variables the
  compiler reads (`KDSL_*`, `CUDA_HOME`, `PYTHONPATH`);
- and, checked when the entry is read, its dependencies: the files of the modules the run
  imported (the user's own by a SHA-256 of their text, libraries by size and modification
  time), each as it was when the result was made. A changed one is a miss.

Not kept: a result holding a DSL002 (the file could not be read, or its run failed, timed
out or ran out of memory: that depends on the machine as much as on the file), or one from
a run in which an import failed (the missing module may appear). What a module reads other
than by importing (a data file it opens) is not tracked.

Entries live in the compiler's disk cache (`dsl.compiler.disk_cache`: the same folder, its
atomic writes and sealed blobs, `KDSL_NO_DISK_CACHE=1` turns it off), as JSON: the
dependencies with their fingerprints, and the diagnostics or the report.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dsl.compiler import disk_cache
from dsl.compiler.artifacts import ModuleReport
from dsl.diagnostics import Diagnostic

FORMAT = "kdsl-results-1"
LINT, EDITOR = "lint", "editor"  # the kinds, each a subfolder of the disk cache
_ENVIRONMENT = ("CUDA_HOME", "PYTHONPATH")  # besides every KDSL_* variable
_MAX_DEPENDENCIES = 20_000
_MAX_HASHED_BYTES = 8 * 1024 * 1024


def entry_key(kind: str, path: str, source: str, options: Mapping[str, object]) -> str:
    """The key of `path`'s result when its text is `source`: every named part, in one place."""
    from dsl.compiler.cache import kdsl_identity
    from dsl.compiler.toolchain import toolchain_version

    environment = sorted((k, v) for k, v in os.environ.items() if k.startswith("KDSL_") or k in _ENVIRONMENT)
    parts = [
        "format=" + FORMAT,
        "kind=" + kind,
        "path=" + path,
        "source=" + hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest(),
        *(f"{name}={value!r}" for name, value in sorted(options.items())),
        "toolchain=" + toolchain_version(),
        "kdsl=" + kdsl_identity(),
        "python=" + sys.version,
        "environment=" + repr(environment),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


@dataclass
class Fingerprints:
    """Dependency fingerprints, each file read at most once per `Fingerprints`."""

    known: dict[str, str] = field(default_factory=dict)

    def of(self, path: str) -> str:
        found = self.known.get(path)
        if found is None:
            found = self.known[path] = _fingerprint(path)
        return found


def _fingerprint(path: str) -> str:
    """What stands for a dependency's content. The path came from a module's run, so it is
    only ever stat-ed, and read only when it is a regular file of bounded size."""
    from dsl.frontend.source import is_user_code
    from lsp.analysis import read_regular

    try:
        info = os.stat(path)
    except OSError:
        return "missing"
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    if not is_user_code("", path) or info.st_size > _MAX_HASHED_BYTES:
        return f"stat:{info.st_size}:{info.st_mtime_ns}"
    data = read_regular(path, _MAX_HASHED_BYTES)
    if isinstance(data, str):
        return f"stat:{info.st_size}:{info.st_mtime_ns}"
    return "sha256:" + hashlib.sha256(data).hexdigest()


def keepable(diagnostics: Sequence[Diagnostic], imported: Sequence[str] | None) -> bool:
    """Whether a result may hold next time (see the module docstring); `imported` is None when
    what the run imported is unknown."""
    return (
        imported is not None
        and len(imported) <= _MAX_DEPENDENCIES
        and not any(d.code == "DSL002" for d in diagnostics)
    )


def _store(kind: str, key: str, imported: Sequence[str], fingerprints: Fingerprints, **value: Any) -> bool:
    entry = {"dependencies": [[p, fingerprints.of(p)] for p in imported], **value}
    return disk_cache.store_blob(kind, key, json.dumps(entry).encode())


def _load(kind: str, key: str, fingerprints: Fingerprints) -> dict[str, Any] | None:
    data = disk_cache.load_blob(kind, key)
    if data is None:
        return None
    try:
        entry = json.loads(data)
        for path, fingerprint in entry["dependencies"]:
            if fingerprints.of(str(path)) != fingerprint:
                return None
    except (ValueError, KeyError, TypeError):
        return None
    return entry if isinstance(entry, dict) else None


# -- lint: a file's diagnostics, before --select / --ignore


def store_diagnostics(
    key: str, diagnostics: Sequence[Diagnostic], imported: Sequence[str] | None, fingerprints: Fingerprints
) -> bool:
    """Keeps lint's result for a file, if it may hold next time; returns whether it was kept."""
    if imported is None or not keepable(diagnostics, imported):
        return False
    return _store(LINT, key, imported, fingerprints, diagnostics=[d.to_dict() for d in diagnostics])


def load_diagnostics(key: str, fingerprints: Fingerprints) -> list[Diagnostic] | None:
    """The kept diagnostics for `key`, or None: no entry, a damaged one, or a dependency changed."""
    entry = _load(LINT, key, fingerprints)
    try:
        return None if entry is None else [Diagnostic.from_dict(d) for d in entry["diagnostics"]]
    except (ValueError, KeyError, TypeError):
        return None


# -- the editor: a document's report


def store_report(key: str, report: ModuleReport, imported: Sequence[str] | None) -> bool:
    """Keeps a document's report (with its IR texts), if it may hold next time."""
    if imported is None or not keepable(report.all_diagnostics(), imported):
        return False
    return _store(EDITOR, key, imported, Fingerprints(), report=report.to_dict())


def load_report(key: str) -> ModuleReport | None:
    """The kept report for `key`, or None (no entry, a damaged one, a dependency changed)."""
    entry = _load(EDITOR, key, Fingerprints())
    try:
        return None if entry is None else ModuleReport.from_dict(entry["report"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
