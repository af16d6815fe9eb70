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
"""

from __future__ import annotations

import threading

LOCK = threading.Lock()


def warm_up() -> None:
    """What the first completion after `dsl.` would otherwise load."""
    import jedi

    from lsp.features.dsl_api import dsl_names

    dsl_names()
    with LOCK:
        jedi.Script("import dsl\ndsl.thread_idx\n").infer(2, 5)
