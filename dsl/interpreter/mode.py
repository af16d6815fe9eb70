"""Whether `@dsl.jit` calls run in the interpreter: `KDSL_INTERPRET=1`, or inside `dsl.interpret()`.

Kept apart (and free of NumPy and MLIR) because every call that is not the repeat of the
previous one asks it (the jit call dispatcher in `dsl/__init__.py`).
"""

from __future__ import annotations

import contextvars
import sys

from dsl import environment

_FORCED: contextvars.ContextVar[bool] = contextvars.ContextVar("kdsl_interpret", default=False)


def interpreting() -> bool:
    """True when jit calls run on the CPU, in the interpreter."""
    return _FORCED.get() or environment.switch("KDSL_INTERPRET")


def force(on: bool) -> contextvars.Token[bool]:
    return _FORCED.set(on)


def restore(token: contextvars.Token[bool]) -> None:
    _FORCED.reset(token)


def require_numpy() -> None:
    """Raises a `ModuleNotFoundError` that says what to install when NumPy is missing: the
    interpreter's arrays are NumPy arrays (a dependency of `pip install kdsl`, but an
    environment can lack it)."""
    try:
        import numpy  # noqa: F401
    except ImportError as exc:
        raise ModuleNotFoundError(
            f"the kdsl interpreter needs NumPy, which {sys.executable} cannot import ({exc}): "
            f"install it with `{sys.executable} -m pip install numpy` (or reinstall kdsl, which depends on it)",
            name="numpy",
        ) from exc
