"""jedi for the features that resolve Python names (completion, hover, signature help), one thread
at a time.

jedi is not thread-safe. Its first inference loads its picture of the `dsl` package and the
builtins (about 0.3 s), and the `dsl` catalogue takes another 0.1 s to build; `warm_up`
does both in a thread once the documents opened at start-up have their first reports
(`KdslLanguageServer.warm_up_names`), so the first completion does not wait for them. The
handlers take `LOCK` around every use of jedi, so a request made during the warm-up waits for
it instead of sharing jedi with it. The lock covers reading the names jedi returns too
(their types, docstrings, signatures): those talk to jedi's subprocess, and two threads on
its pipes lose each other's answers and wait for ever.

`script` makes every `jedi.Script`: jedi's parse cache is kdsl's own (under kdsl's cache
folder, not the user's `~/.cache/jedi`), because two language servers parsing the same file
at once can leave a half-written cache file there, which parso then fails to read
(`EOFError`) for as long as the file is unchanged: `resolved` empties that cache and asks jedi
once more.
"""

from __future__ import annotations

import os
import pickle
import shutil
import threading
from collections.abc import Callable
from typing import Any, TypeVar

LOCK = threading.Lock()
T = TypeVar("T")
_HALF_WRITTEN = (EOFError, pickle.UnpicklingError)


def cache_directory() -> str:
    from dsl.compiler.disk_cache import cache_dir

    return os.path.join(str(cache_dir()), "jedi")


def script(text: str, path: str | None = None) -> Any:
    """`jedi.Script(text, path=path)`, with kdsl's own parse cache."""
    import jedi

    jedi.settings.cache_directory = cache_directory()
    return jedi.Script(text, path=path)


def resolved(call: Callable[[], T]) -> T:
    """`call()` (a use of jedi); once more after emptying the parse cache where it found a
    cache file half written by another process."""
    try:
        return call()
    except _HALF_WRITTEN:
        import parso.cache

        shutil.rmtree(cache_directory(), ignore_errors=True)
        parso.cache.parser_cache.clear()
        return call()


def warm_up() -> None:
    """What the first completion after `dsl.` would otherwise load."""

    from lsp.features.dsl_api import dsl_names

    dsl_names()
    with LOCK:
        resolved(lambda: script("import dsl\ndsl.thread_idx\n").infer(2, 5))
