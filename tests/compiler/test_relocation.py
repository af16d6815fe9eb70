"""Functions moved by an edit above them are shifted, not compiled again, and the shifted
result is exactly what compiling them at their new lines gives."""

from __future__ import annotations

import pytest

import dsl
from dsl.compiler import cache
from dsl.compiler.artifacts import FunctionReport, LaunchFact, ModuleReport

SOURCE = '''import dsl
from dsl import Constexpr, Int32, Tensor, f32


def twice(v):
    return v * 2.0


@dsl.kernel(known_block_size=[256, 1, 1])
def scale(x: Tensor[f32], y: Tensor[f32], n: Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    if i < n:
        y[i] = twice(x[i]) + dsl.exp(x[i])


@dsl.kernel
def unannotated(x: Tensor[f32], n):
    x[0] = 1.0


@dsl.jit
def run_scale(x: Tensor[f32], y: Tensor[f32], BLOCK: Constexpr[int] = 256):
    n = x.shape[0]
    scale(x, y, n).launch(grid=dsl.cdiv(n, BLOCK), block=BLOCK)
'''


def _functions(report: ModuleReport) -> dict[str, FunctionReport]:
    return {f.name: f for f in report.functions}


def _same(moved: FunctionReport, fresh: FunctionReport) -> None:
    assert moved.range == fresh.range
    assert moved.diagnostics == fresh.diagnostics
    assert moved.values == fresh.values
    if fresh.compiled is None:
        assert moved.compiled is None
        return
    a, b = moved.compiled, fresh.compiled
    assert a.sass == b.sass  # made from the kept cubin (or shifted, when made before), at the new lines
    assert a.stages.keys() == b.stages.keys()
    for stage in b.stages:
        assert a.stages[stage] == b.stages[stage], stage
    assert a.source_maps == b.source_maps
    assert a.diagnostics == b.diagnostics
    assert [LaunchFact.of(f) for f in a.launches] == [LaunchFact.of(f) for f in b.launches]
    assert a.source_maps["sass"] == b.source_maps["sass"]


@pytest.mark.parametrize("cubins_on_request", [False, True], ids=["cubin kept", "cubin made on request"])
def test_moved_functions_are_shifted_exactly_as_compiling_them_there(tmp_path, cubins_on_request):
    """With cubins made on request (the editor's), a moved result has none yet: the one made
    later, from the moved PTX, must name the moved lines without a shift of its own."""
    path = str(tmp_path / "m.py")

    def analyze(text: str) -> dict[str, FunctionReport]:
        return _functions(dsl.analyze_source(text, path, cubins_on_request=cubins_on_request))

    analyze(SOURCE)
    for first, edited in ((True, SOURCE.replace("import dsl\n", "import dsl\n\n\n# three lines more\n", 1)),
                          (False, SOURCE.replace("\n\ndef twice", "def twice", 1))):  # two lines fewer
        moved = analyze(edited)
        # every function moved: none was compiled, each result was shifted
        assert all(f.compiled is None or hasattr(f.compiled, "moved_from") for f in moved.values())
        for f in moved.values():
            if f.compiled is not None:  # a cubin's lines are shifted; one not made yet needs no shift
                assert bool(f.compiled.cubin_line_shift) == (f.compiled.cubin is not None)
                # later ones move results whose SASS this test made, and so their cubins
                assert not first or (f.compiled.cubin is None) == cubins_on_request
        cache.MEMORY.clear()
        fresh = analyze(edited)
        assert moved.keys() == fresh.keys() == {"scale", "unannotated", "run_scale"}
        for name in fresh:
            _same(moved[name], fresh[name])
        analyze(SOURCE)  # back to where the next edit starts from


def test_the_moved_diagnostics_point_at_the_new_lines(tmp_path):
    path = str(tmp_path / "m.py")
    before = dsl.analyze_source(SOURCE, path).function("unannotated").diagnostics
    after = dsl.analyze_source("# one more line\n" + SOURCE, path).function("unannotated").diagnostics
    assert [d.code for d in before] == [d.code for d in after] and before
    assert [d.range.line + 1 for d in before] == [d.range.line for d in after]


def test_a_function_with_a_helper_in_another_file_is_compiled_again(tmp_path):
    (tmp_path / "helpers_elsewhere.py").write_text("def twice(v):\n    return v * 2.0\n")
    source = SOURCE.replace("def twice(v):\n    return v * 2.0\n", "from helpers_elsewhere import twice\n")
    path = str(tmp_path / "m.py")
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        dsl.analyze_source(source, path)
        report = dsl.analyze_source("# moved\n" + source, path)
    finally:
        sys.path.remove(str(tmp_path))
    scale = report.function("scale")
    assert scale.compiled is not None and not scale.compiled.cubin_line_shift  # compiled at its new place
    assert scale.range.line == source.splitlines().index(
        "def scale(x: Tensor[f32], y: Tensor[f32], n: Int32):") + 2
