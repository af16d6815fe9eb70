"""Analysing a module again after an edit does the work of what changed, not of the file.

A file of 30 kernels (`kernels(30)`, each one five lines) is analysed in this process, as the
editor's warm run process analyses it after every edit: editing one kernel compiles that
kernel alone and compiles only its own statement again; moving kernels down (a line added
above them) compiles those again, and their results name their new lines.
"""

from __future__ import annotations

from pathlib import Path

import dsl
from dsl.compiler import cache
from dsl.module_analysis import run_module

KERNEL = """
@dsl.kernel
def k{i}(x: Tensor[f32, 1], y: Tensor[f32, 1], n: Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    if i < n:
        y[i] = x[i] * {scale} + y[i]
"""
HEAD = "import dsl\nfrom dsl import Int32, Tensor, f32\n"


def kernels(count: int, edited: int = -1, scale: float = 3.0) -> str:
    return HEAD + "".join(KERNEL.format(i=i, scale=scale if i == edited else 2.0) for i in range(count))


def misses_of(run) -> int:
    before = cache.MEMORY.misses
    run()
    return cache.MEMORY.misses - before


def test_editing_one_kernel_compiles_that_kernel(tmp_path: Path) -> None:
    path = str(tmp_path / "thirty.py")
    assert misses_of(lambda: dsl.analyze_source(kernels(30), path)) == 30
    report = None

    def edit() -> None:
        nonlocal report
        report = dsl.analyze_source(kernels(30, edited=7), path)

    assert misses_of(edit) == 1
    assert report is not None and [f.name for f in report.functions] == [f"k{i}" for i in range(30)]
    assert all(f.compiled is not None and not f.diagnostics for f in report.functions)
    assert "3.000000e+00" in report.function("k7").compiled.stages["lowered"]  # type: ignore[union-attr]
    assert misses_of(lambda: dsl.analyze_source(kernels(30, edited=7), path)) == 0


def test_unchanged_statements_keep_their_code(tmp_path: Path) -> None:
    path = str(tmp_path / "statements.py")
    first, _ = run_module(kernels(5), path)
    second, _ = run_module(kernels(5, edited=2), path)
    same = [name for name in ("k0", "k1", "k2", "k3", "k4") if second[name].fn.__code__ is first[name].fn.__code__]
    assert same == ["k0", "k1", "k3", "k4"]


def test_kernels_moved_down_are_compiled_again_at_their_new_lines(tmp_path: Path) -> None:
    """An edit above a kernel moves it: a result kept from before would name the old lines."""
    path = str(tmp_path / "moved.py")
    text = kernels(6)
    before = dsl.analyze_source(text, path)
    cut = text.index("\n@dsl.kernel\ndef k3(")
    moved_text = text[:cut] + "\n# a comment, one line more\n" + text[cut:]
    moved = None

    def analyse() -> None:
        nonlocal moved
        moved = dsl.analyze_source(moved_text, path)

    assert misses_of(analyse) == 3  # k3, k4 and k5; k0..k2 are where they were
    assert moved is not None
    for name in ("k0", "k1", "k2", "k3", "k4", "k5"):
        shift = 0 if name in ("k0", "k1", "k2") else 2  # the comment and its blank line
        old, new = before.function(name), moved.function(name)
        assert old is not None and new is not None and old.compiled and new.compiled
        assert new.range.line == old.range.line + shift
        old_lines = [r.line for _, r in old.compiled.source_maps["lowered"].entries]
        assert [r.line for _, r in new.compiled.source_maps["lowered"].entries] == [n + shift for n in old_lines]
