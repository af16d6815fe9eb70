"""On-disk cache of compiled jit specializations, shared by processes.

A fresh process that calls a `@dsl.jit` function it (or another process) already ran skips
tracing, lowering and ptxas: it reads the cubin, the PTX (the fallback the driver can
compile), the generated launcher, kernel figures and the warnings from here.

- Where: `$KDSL_CACHE_DIR`, else `$XDG_CACHE_HOME/kdsl`, else `~/.cache/kdsl`.
  `KDSL_NO_DISK_CACHE=1` turns the cache off.
- Key: `dsl.compiler.cache.function_key` — the function's source and every helper and
  kernel it reaches, the constants it reads, the specialization, target, stage and
  toolchain version. Editing a helper therefore misses the old entry.
- One file per entry: a magic line, a SHA-256 digest, the length of a JSON header, the
  header, the cubin. Writes go to a temporary file renamed over the entry (atomic); an
  entry that fails any check (truncated, corrupted, older format) is removed and
  recompiled, never trusted. `lock(key)` (fcntl) lets concurrent processes compile an
  entry once.
- Other results kept for later runs (`kdsl lint`'s per-file results) live in the same
  folder, each kind in a subfolder of its own, as sealed blobs (`store_blob` / `load_blob`:
  a magic line and a SHA-256 of the content, written the same atomic way), so there is one
  store to find, clear and turn off.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsl import environment

MAGIC = b"kdsl-cache-1\n"
_HEADER = struct.Struct("<32sQ")  # sha256 of (json + cubin), json length


@dataclass
class CacheEntry:
    """What running a jit specialization needs, without the MLIR stages."""

    name: str
    target: str
    cubin: bytes | None
    ptx: str | None
    launcher: str
    kernels: list[dict[str, Any]] = field(default_factory=list)  # KernelInfo.to_dict()
    launch_ranges: dict[str, dict[str, Any]] = field(default_factory=dict)  # symbol -> SourceRange.to_dict()
    diagnostics: list[dict[str, Any]] = field(default_factory=list)  # warnings, Diagnostic.to_dict()


def enabled() -> bool:
    return not environment.switch("KDSL_NO_DISK_CACHE")


def cache_dir() -> Path:
    if environment.path("KDSL_CACHE_DIR"):
        return Path(environment.path("KDSL_CACHE_DIR"))  # type: ignore[arg-type]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kdsl"


def _path(key: str) -> Path:
    return cache_dir() / key[:2] / f"{key}.bin"


def encode(entry: CacheEntry) -> bytes:
    header = {
        "name": entry.name, "target": entry.target, "ptx": entry.ptx, "launcher": entry.launcher,
        "kernels": entry.kernels, "launch_ranges": entry.launch_ranges, "diagnostics": entry.diagnostics,
        "has_cubin": entry.cubin is not None,
    }
    body = json.dumps(header, separators=(",", ":")).encode()
    cubin = entry.cubin or b""
    digest = hashlib.sha256(body + cubin).digest()
    return MAGIC + _HEADER.pack(digest, len(body)) + body + cubin


def decode(data: bytes) -> CacheEntry | None:
    """The entry in `data`, or None when it is not a complete, intact entry."""
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + _HEADER.size:
        return None
    digest, body_len = _HEADER.unpack_from(data, len(MAGIC))
    start = len(MAGIC) + _HEADER.size
    if start + body_len > len(data):
        return None
    body, cubin = data[start:start + body_len], data[start + body_len:]
    if hashlib.sha256(body + cubin).digest() != digest:
        return None
    try:
        h = json.loads(body)
        return CacheEntry(name=h["name"], target=h["target"], cubin=cubin if h["has_cubin"] else None,
                          ptx=h["ptx"], launcher=h["launcher"], kernels=h["kernels"],
                          launch_ranges=h["launch_ranges"], diagnostics=h["diagnostics"])
    except (ValueError, KeyError, TypeError):
        return None


def load(key: str) -> CacheEntry | None:
    """The cached entry for `key`; None on a miss or a damaged entry (which is removed)."""
    if not enabled():
        return None
    path = _path(key)
    try:
        data = path.read_bytes()
    except OSError:
        return None
    entry = decode(data)
    if entry is None:
        with contextlib.suppress(OSError):
            path.unlink()
    return entry


def store(key: str, entry: CacheEntry) -> bool:
    """Writes the entry atomically; returns False (and leaves no partial file) on failure."""
    if not enabled():
        return False
    return _write_atomic(_path(key), encode(entry))


def _write_atomic(path: Path, data: bytes) -> bool:
    """`data` as the whole of `path`, or nothing: written beside it, then renamed over it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.stem[:16]}-", suffix=".tmp", dir=path.parent)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        return True
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return False


BLOB_MAGIC = b"kdsl-blob-1\n"


def _blob_path(kind: str, key: str) -> Path:
    return cache_dir() / kind / key[:2] / f"{key}.bin"


def store_blob(kind: str, key: str, data: bytes) -> bool:
    """Keeps `data` under `key` among the `kind` entries (atomic, sealed with its digest);
    False when the cache is off or the write failed."""
    if not enabled():
        return False
    return _write_atomic(_blob_path(kind, key), BLOB_MAGIC + hashlib.sha256(data).digest() + data)


def load_blob(kind: str, key: str) -> bytes | None:
    """The `kind` entry for `key`; None on a miss or a damaged entry (which is removed)."""
    if not enabled():
        return None
    path = _blob_path(kind, key)
    try:
        sealed = path.read_bytes()
    except OSError:
        return None
    start = len(BLOB_MAGIC) + hashlib.sha256().digest_size
    data = sealed[start:]
    if sealed.startswith(BLOB_MAGIC) and hashlib.sha256(data).digest() == sealed[len(BLOB_MAGIC):start]:
        return data
    with contextlib.suppress(OSError):
        path.unlink()
    return None


@contextlib.contextmanager
def lock(key: str) -> Iterator[None]:
    """An exclusive cross-process lock for compiling `key` (a no-op where locking fails)."""
    if not enabled():
        yield
        return
    try:
        import fcntl
    except ImportError:  # not POSIX: atomic renames still keep entries whole
        yield
        return
    path = _path(key).with_suffix(".lock")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def clear() -> None:
    """Removes every entry, of every kind (for tests and `rm -rf`-shy users)."""
    root = cache_dir()
    if not root.is_dir():
        return
    for sub in root.iterdir():
        if not sub.is_dir():
            continue
        # kernels sit in <2 hex digits>/, other kinds in <kind>/<2 hex digits>/
        shards = [sub] if len(sub.name) == 2 else [d for d in sub.iterdir() if d.is_dir() and len(d.name) == 2]
        for shard in shards:
            for f in shard.iterdir():
                with contextlib.suppress(OSError):
                    f.unlink()
