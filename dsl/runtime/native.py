"""The optional native launch path (`_fastpath.c`): argument reads and `cuLaunchKernel` in C.

`fastpath` is None where the extension was not built (no C compiler at install time) or
libcuda cannot be loaded (no driver); the runtime then does the same work in Python.
`KDSL_PURE_PYTHON=1` turns the native path off, for comparisons and debugging.
"""

from __future__ import annotations

import os
from typing import Any

fastpath: Any = None
if not os.environ.get("KDSL_PURE_PYTHON"):
    try:
        from dsl.runtime import _fastpath as fastpath  # type: ignore[attr-defined, no-redef]
    except ImportError:
        fastpath = None
