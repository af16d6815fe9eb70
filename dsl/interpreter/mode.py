"""Whether `@dsl.jit` calls run in the interpreter: `KDSL_INTERPRET=1`, or inside `dsl.interpret()`.

Kept apart (and free of NumPy and MLIR) because every call that is not the repeat of the
previous one asks it (`dsl.runtime.jit_call.call_jit`).
"""

from __future__ import annotations

import contextvars

from dsl import environment

_FORCED: contextvars.ContextVar[bool] = contextvars.ContextVar("kdsl_interpret", default=False)


def interpreting() -> bool:
    """True when jit calls run on the CPU, in the interpreter."""
    return _FORCED.get() or environment.switch("KDSL_INTERPRET")


def force(on: bool) -> contextvars.Token[bool]:
    return _FORCED.set(on)


def restore(token: contextvars.Token[bool]) -> None:
    _FORCED.reset(token)
