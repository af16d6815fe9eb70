"""The instant tier's groups of a big document: each ends after a whole top-level statement,
never between a decorator and its function, so each parses on its own."""

from __future__ import annotations

import ast

from lsp.static_tier import make_groups

KERNEL = """

@dsl.kernel(known_block_size=[256, 1, 1])
def k{i}(x: Tensor[f32, 1], n: Int32):
    if dsl.thread_idx.x < n:
        x[0] = 1.0
"""


def test_no_group_ends_between_a_decorator_and_its_function():
    text = "import dsl\n" + "".join(KERNEL.format(i=i) for i in range(4000))
    lines = text.splitlines(keepends=True)
    groups = make_groups(lines)
    assert len(groups) > 10  # a big document is cut
    assert "".join(g.text for g in groups) == text
    for group in groups:
        last = [line for line in group.text.splitlines() if line.strip()][-1]
        assert not last.startswith("@"), group.start
        ast.parse(group.text)  # each group parses alone


def test_a_syntax_error_keeps_the_later_groups_results_for_the_next_version(monkeypatch):
    """Typing `dsl.` in one kernel stops the check at that group; when the text parses again
    every group's result is still known, the edited one's from before the error (before,
    every later group's result was dropped and checked again: 50-130 ms a keystroke in a
    100-kernel file), and the diagnostics are the same."""
    from lsp import static_tier
    from lsp.static_tier import DocumentIndex
    from lsp.text_model import TextBuffer

    text = "import dsl\nfrom dsl import Int32, Tensor, f32\n" + "".join(KERNEL.format(i=i) for i in range(400))
    assert len(text) > static_tier.LARGE_DOCUMENT
    index = DocumentIndex()
    first = index.static_diagnostics(TextBuffer(text), 1, "/src/big.py")
    head = "def k7(x: Tensor[f32, 1], n: Int32):\n"
    broken = text.replace(head + "    if", head + "    i = dsl.\n    if")
    assert [d.code for d in index.static_diagnostics(TextBuffer(broken), 2, "/src/big.py")] == ["DSL003"]
    checked: list[str] = []
    real = static_tier.check_text
    monkeypatch.setattr(static_tier, "check_text", lambda t, *a, **k: checked.append(t) or real(t, *a, **k))
    assert index.static_diagnostics(TextBuffer(text), 3, "/src/big.py") == first
    assert checked == []
    edited = text.replace("x[0] = 1.0\n\n\n@dsl.kernel(known_block_size=[256, 1, 1])\ndef k8(",
                          "x[0] = 2.0\n\n\n@dsl.kernel(known_block_size=[256, 1, 1])\ndef k8(", 1)
    assert edited != text
    assert index.static_diagnostics(TextBuffer(edited), 4, "/src/big.py") == first
    assert len(checked) == 1 and "def k7(" in checked[0]  # then an edit re-checks its own group alone
