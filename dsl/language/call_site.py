"""The exact source range of the call a Python frame is executing (for run-time diagnostics)."""

from __future__ import annotations

import types

from dsl.diagnostics import SourceRange


def caller_range(frame: types.FrameType | None) -> SourceRange:
    """Uses the bytecode's positions table (Python 3.11+) to find the call's full range."""
    if frame is None:
        return SourceRange("<unknown>", 1, 0, 1, 0)
    code = frame.f_code
    line = frame.f_lineno or code.co_firstlineno
    positions = getattr(code, "co_positions", None)
    if positions is not None:
        pos = list(positions())[frame.f_lasti // 2] if frame.f_lasti >= 0 else None
        if pos and pos[0] is not None:
            start, end, col, end_col = pos
            return SourceRange(code.co_filename, start, col or 0, end or start, end_col or 0)
    return SourceRange(code.co_filename, line, 0, line, 0)
