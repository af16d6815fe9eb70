"""The server's copy of a document, kept line for line as the editor keeps it.

LSP lines end at `\\n`, `\\r\\n` or `\\r` and nowhere else; `str.splitlines` also breaks at
U+2028, U+2029, `\\x0b`, `\\x0c`, `\\x85` and `\\x1c`-`\\x1e`, so any position computed
from it drifts from the editor's after one of those characters (and so does pygls's
document model, which uses it). Python's tokenizer agrees with LSP, so compiler line
numbers index these lines directly.

`TextBuffer` stores the lines with their endings (the last one has none, and may be
empty) and applies an incremental change by re-splitting only the lines it touches, so a
keystroke in a 5 MB document costs a list splice, not a copy of the document. Positions
count UTF-16 code units. A position past the end of a line means the end of that line
(the spec says so); a position past the last line means the end of the document, and
`apply` reports it, since it means the client and server disagree about the text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_EOL = re.compile(r"(\r\n|\r|\n)")
_ENDINGS = ("\r\n", "\r", "\n")


def split_lines(text: str) -> list[str]:
    """LSP lines of `text`, each with its ending; the last has none (and may be "")."""
    parts = _EOL.split(text)
    lines = [parts[i] + parts[i + 1] for i in range(0, len(parts) - 1, 2)]
    lines.append(parts[-1])
    return lines


def line_content(line: str) -> str:
    """`line` without its ending."""
    if line.endswith("\n"):
        return line[:-2] if line.endswith("\r\n") else line[:-1]
    return line[:-1] if line.endswith("\r") else line


def utf16_to_column(content: str, units: int) -> int:
    """The character index `units` UTF-16 code units into `content`, clamped to its end
    (a position inside a surrogate pair means the character it splits)."""
    if units <= 0:
        return 0
    if content.isascii() or units >= len(content) * 2:
        return min(units, len(content))
    count = 0
    for column, char in enumerate(content):
        count += 2 if ord(char) > 0xFFFF else 1
        if count > units:
            return column
        if count == units:
            return column + 1
    return len(content)


def column_to_utf16(content: str, column: int) -> int:
    head = content[: max(column, 0)]
    return len(head) if head.isascii() else len(head.encode("utf-16-le")) // 2


class TextBuffer:
    def __init__(self, text: str) -> None:
        self._lines = split_lines(text)
        self._text: str | None = text
        self.size = len(text)  # characters, kept up to date without joining the lines

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = "".join(self._lines)
        return self._text

    @property
    def lines(self) -> Sequence[str]:
        """The lines with their endings; `lsp.convert` accepts them as they are."""
        return self._lines

    def __len__(self) -> int:
        return len(self._lines)

    def clamp(self, line: int, character: int) -> tuple[int, int, bool]:
        """LSP (line, UTF-16 character) -> (line index, character column, was past the end)."""
        last = len(self._lines) - 1
        if line > last:
            return last, len(line_content(self._lines[last])), True
        line = max(line, 0)
        return line, utf16_to_column(line_content(self._lines[line]), character), False

    def replace_all(self, text: str) -> None:
        self._lines = split_lines(text)
        self._text = text
        self.size = len(text)

    def apply(self, start: tuple[int, int], end: tuple[int, int], new_text: str) -> list[str]:
        """Replaces the LSP range `start`..`end` with `new_text`; returns what was wrong with it."""
        problems: list[str] = []
        sl, sc, start_past = self.clamp(*start)
        el, ec, end_past = self.clamp(*end)
        if start_past or end_past:
            problems.append(f"the range {_show(start)}-{_show(end)} ends past the document's {len(self)} lines")
        if (el, ec) < (sl, sc):
            problems.append(f"the range {_show(start)}-{_show(end)} is reversed")
            sl, sc, el, ec = el, ec, sl, sc
        lines = self._lines
        first = sl - 1 if sl > 0 and lines[sl - 1].endswith("\r") else sl  # "\r" + "\n" would merge
        head = "".join(lines[first:sl]) + lines[sl][:sc]
        tail = lines[el][ec:]
        replaced = split_lines(head + new_text + tail)
        if el < len(lines) - 1:
            replaced.pop()  # the region ended with a line ending: the next line follows it
        self.size += sum(map(len, replaced)) - sum(len(line) for line in lines[first : el + 1])
        lines[first : el + 1] = replaced
        self._text = None
        return problems


def _show(position: tuple[int, int]) -> str:
    return f"{position[0]}:{position[1]}"
