"""The progress bar: drawn in place on a terminal for more than 3 files, silent otherwise."""

from __future__ import annotations

import io

from lsp.lint.runner import Progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bar_on_a_terminal() -> None:
    stream = _Terminal()
    progress = Progress(4, stream)
    progress.advance("a.py")
    progress.advance("b.py")
    progress.finish()
    assert stream.getvalue() == (
        "\r\x1b[K[#####...............] 1/4 a.py\r\x1b[K[##########..........] 2/4 b.py\r\x1b[K"
    )


def test_silent_when_not_a_terminal_or_few_files() -> None:
    pipe, small = io.StringIO(), _Terminal()
    for progress in (Progress(10, pipe), Progress(3, small)):
        progress.advance("a.py")
        progress.finish()
    assert pipe.getvalue() == small.getvalue() == ""
