"""Driving VS Code's workbench (code-server in Chromium) the way a user does: the command
palette, go-to-line, the Problems and Output panels, notifications, and reading what an
editor shows.

Everything waits on the workbench's own DOM (`.monaco-editor`, `.quick-input-widget`,
`.markers-panel`, `.notifications-toasts`, the Output panel) rather than on fixed sleeps:
`wait_until` polls a condition and, when it times out, says what it saw last. An editor's
lines are read through the line numbers in its margin, so wrapped, scrolled or lens-shifted
lines still map to their line numbers; those texts include inlay hints, which VS Code renders
inline.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from playwright.sync_api import Locator, Page

T = TypeVar("T")

# Debian's chromium, as root, on a machine with no outside network: no sandbox, no GPU, and
# none of the background connections that would only be refused.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

# Records every notification the workbench shows (toasts come and go; this keeps them all).
TOAST_RECORDER = """
(() => {
  window.__kdslToasts = [];
  const seen = new Set();
  const record = () => {
    for (const item of document.querySelectorAll('.notification-list-item')) {
      const message = item.querySelector('.notification-list-item-message')?.textContent ?? '';
      const icon = item.querySelector('.notification-list-item-icon')?.className ?? '';
      const severity = icon.includes('codicon-error') ? 'error' : icon.includes('codicon-warning') ? 'warning' : 'info';
      const key = severity + '|' + message;
      if (message !== '' && !seen.has(key)) {
        seen.add(key);
        window.__kdslToasts.push({severity, message});
      }
    }
  };
  new MutationObserver(record).observe(document, {childList: true, subtree: true, characterData: true});
})();
"""

# Line number -> rendered text of every line an editor shows.
_LINES_JS = """root => {
  const tops = new Map();
  for (const n of root.querySelectorAll('.margin-view-overlays .line-numbers')) {
    tops.set(n.parentElement.style.top, Number(n.textContent));
  }
  const lines = {};
  for (const v of root.querySelectorAll('.view-lines .view-line')) {
    const line = tops.get(v.style.top);
    if (line !== undefined) lines[line] = v.textContent.replace(/\\u00a0/g, ' ');
  }
  return lines;
}"""

# Line numbers that carry an extension's decoration (the extension's highlights are the only ones).
_DECORATED_JS = """root => {
  const tops = new Map();
  for (const n of root.querySelectorAll('.margin-view-overlays .line-numbers')) {
    tops.set(n.parentElement.style.top, Number(n.textContent));
  }
  const lines = new Set();
  for (const d of root.querySelectorAll('.view-overlays [class*="TextEditorDecorationType"]')) {
    const line = tops.get(d.parentElement.style.top);
    if (line !== undefined) lines.add(line);
  }
  return Array.from(lines).sort((a, b) => a - b);
}"""

# [text, css colour] of each token span of one line.
_SPANS_JS = """(root, line) => {
  for (const n of root.querySelectorAll('.margin-view-overlays .line-numbers')) {
    if (Number(n.textContent) !== line) continue;
    const top = n.parentElement.style.top;
    for (const v of root.querySelectorAll('.view-lines .view-line')) {
      if (v.style.top !== top) continue;
      return Array.from(v.querySelectorAll(':scope > span > span'))
        .map(s => [s.textContent.replace(/\\u00a0/g, ' '), getComputedStyle(s).color]);
    }
  }
  return [];
}"""

# The page y of one line's top.
_LINE_TOP_JS = """(root, line) => {
  for (const n of root.querySelectorAll('.margin-view-overlays .line-numbers')) {
    if (Number(n.textContent) === line) return n.getBoundingClientRect().top;
  }
  return null;
}"""


def wait_until(probe: Callable[[], T], accept: Callable[[T], bool], what: str, timeout_s: float) -> T:
    """Polls `probe` until `accept` takes what it returns; on timeout fails with the last observation."""
    deadline = time.monotonic() + timeout_s
    while True:
        seen = probe()
        if accept(seen):
            return seen
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}; last seen: {seen!r}")
        time.sleep(0.1)


@dataclass
class Editor:
    """One editor group's editor, read through its DOM: the lines it renders, which are the
    lines on screen (Monaco renders no others)."""

    root: Locator

    def lines(self) -> dict[int, str]:
        return {int(k): v for k, v in self.root.evaluate(_LINES_JS).items()}

    def text(self) -> str:
        lines = self.lines()
        return "\n".join(lines[n] for n in sorted(lines))

    def decorated_lines(self) -> list[int]:
        return self.root.evaluate(_DECORATED_JS)

    def spans(self, line: int) -> list[tuple[str, str]]:
        return [(text, colour) for text, colour in self.root.evaluate(_SPANS_JS, line)]

    def lens_above(self, line: int) -> Locator | None:
        """The code lens row right above `line` (each lens row is a zone over its line), if any."""
        top = self.root.evaluate(_LINE_TOP_JS, line)
        if top is None:
            return None
        lenses = self.root.locator(".codelens-decoration")
        for i in range(lenses.count()):
            box = lenses.nth(i).bounding_box()
            if box is not None and 0 <= top - (box["y"] + box["height"]) < 12:
                return lenses.nth(i)
        return None

    def lens_text_above(self, line: int) -> str:
        lens = self.lens_above(line)
        return lens.inner_text() if lens is not None else ""


class Workbench:
    """The VS Code window of one walk."""

    def __init__(self, page: Page) -> None:
        self.page = page

    def editor(self, group: int) -> Editor:
        """The editor of editor group `group` (0 is the leftmost)."""
        return Editor(self.page.locator(".editor-group-container").nth(group).locator(".monaco-editor").first)

    def editor_groups(self) -> int:
        return self.page.locator(".editor-group-container").count()

    def focus_group(self, group: int) -> None:
        """Ctrl+1, Ctrl+2: the keyboard focus to the first, second editor group."""
        self.page.keyboard.press(f"Control+{group + 1}")

    def _quick_input(self, timeout_s: float = 30) -> Locator:
        """The open quick input (palette, quick pick); fails early, saying why, when a command
        answered with an error notification instead of opening one."""
        widget = self.page.locator(".quick-input-widget")
        earlier = len(self.notifications("error"))
        shown, errors = wait_until(lambda: (widget.is_visible(), self.notifications("error")[earlier:]),
                                   lambda seen: seen[0] or bool(seen[1]), "a quick pick", timeout_s)
        assert shown, f"no quick pick opened; error notifications: {errors}"
        return widget

    def choose(self, container: Locator, label: str, timeout_s: float = 30, exact: bool = False) -> None:
        """Moves the focus in a list (quick pick, code actions) to the row labelled `label`, then Enter.

        Waits for the row first: a quick pick fills its list after it opens."""
        rows = container.locator(".monaco-list-row")

        def matches(row_label: str) -> bool:
            return row_label == label if exact else row_label.startswith(label)

        wait_until(lambda: [r.get_attribute("aria-label") or "" for r in rows.all()],
                   lambda labels: any(matches(lb) for lb in labels), f"a row {label!r}", timeout_s)
        for _ in range(rows.count() + 1):
            focused = container.locator(".monaco-list-row.focused")
            if focused.count() and matches(focused.first.get_attribute("aria-label") or ""):
                self.page.keyboard.press("Enter")
                return
            self.page.keyboard.press("ArrowDown")
        raise AssertionError(f"could not move to {label!r} among {[r.get_attribute('aria-label') for r in rows.all()]}")

    def run_command(self, title: str) -> None:
        """Runs a command from the command palette by its title (`kdsl: Show IR`)."""
        self.page.keyboard.press("Control+Shift+P")
        widget = self._quick_input()
        self.page.keyboard.type(title)
        self.choose(widget, title)

    def quick_pick(self, label: str, timeout_s: float = 60) -> None:
        """Answers an open quick pick with the row labelled `label`."""
        self.choose(self._quick_input(), label, timeout_s)

    def quick_open(self, file_name: str) -> None:
        self.page.keyboard.press("Control+P")
        widget = self._quick_input()
        self.page.keyboard.type(file_name)
        self.choose(widget, file_name)

    def go_to(self, line: int, column: int = 1) -> None:
        """Go to Line/Column (Ctrl+G) in the focused editor."""
        self.page.keyboard.press("Control+G")
        self._quick_input()
        self.page.keyboard.type(f"{line}:{column}")
        self.page.keyboard.press("Enter")
        self.page.locator(".quick-input-widget").wait_for(state="hidden")

    def replace_line(self, line: int, text: str) -> None:
        """Replaces the text of `line` after its indentation, as typed."""
        self.go_to(line)
        self.page.keyboard.press("End")
        self.page.keyboard.press("Shift+Home")
        self.page.keyboard.type(text)

    def hover_text(self) -> str:
        """Shows the hover at the cursor (Ctrl+K Ctrl+I) and returns its text."""
        self.page.keyboard.press("Control+K")
        self.page.keyboard.press("Control+I")
        hover = self.page.locator(".monaco-hover:visible").first
        hover.wait_for()
        return hover.inner_text()

    def problems(self) -> Locator:
        """Opens the Problems panel."""
        self.page.keyboard.press("Control+Shift+M")
        panel = self.page.locator(".markers-panel")
        panel.wait_for()
        return panel

    def problem_rows(self) -> list[str]:
        return [r.get_attribute("aria-label") or "" for r in self.page.locator(".markers-panel .monaco-list-row").all()]

    def show_output_channel(self, name: str, timeout_s: float = 60) -> Locator:
        """Opens the Output panel on the channel `name`; returns its editor.

        The channel list is taken when the picker opens, and an extension's channel exists only
        once it is active: the picker is opened again until the channel is in it."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.run_command("Output: Show Output Channels...")
            widget = self._quick_input()
            try:
                self.choose(widget, name, timeout_s=2, exact=True)
                break
            except AssertionError:
                self.page.keyboard.press("Escape")
                if time.monotonic() > deadline:
                    raise
        view = self.page.locator(".panel .output-view .monaco-editor").first
        view.wait_for()
        return view

    def output_text(self) -> str:
        """The text the Output panel shows (as rendered: wrapped lines are separate lines)."""
        lines = self.page.locator(".panel .output-view .monaco-editor .view-lines").first
        return lines.inner_text().replace("\xa0", " ")

    def toasts(self) -> list[dict[str, Any]]:
        """Every notification shown so far: `{severity, message}`."""
        return self.page.evaluate("window.__kdslToasts")

    def notifications(self, severity: str) -> list[str]:
        return [t["message"] for t in self.toasts() if t["severity"] == severity]

    def expand(self, toast: Locator) -> None:
        """Shows a toast's whole message (a long one is cut to one line), for the screenshot."""
        expand = toast.locator(".codicon-notifications-expand")
        if expand.count():
            expand.first.dispatch_event("click")

    def toast(self, text: str) -> Locator:
        """The notification toast whose message contains `text`."""
        return self.page.locator(".notifications-toasts .notification-list-item").filter(
            has=self.page.locator(".notification-list-item-message", has_text=text))
