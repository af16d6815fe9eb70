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
