"""Analysing a buffer: statements run one by one, the buffer (not the disk) is what runs."""

from __future__ import annotations

import dsl


def test_failing_statement_reported_at_its_range_and_the_rest_runs(tmp_path):
    path = str(tmp_path / "m.py")
    source = "import dsl\nx = undefined_name + 1\n\n@dsl.kernel\ndef k(t: dsl.Tensor[dsl.f32]):\n    t[0] = 1.0\n"
    report = dsl.analyze_source(source, path)
    (d,) = report.diagnostics
    assert d.code == "DSL001" and d.message == "NameError: name 'undefined_name' is not defined"
    assert (d.range.line, d.range.column, d.range.end_line, d.range.end_column) == (2, 0, 2, 22)
    assert report.function("k").compiled is not None


def test_buffer_text_not_file_on_disk(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("this is not python at all(\n")
    source = "import dsl\n@dsl.kernel\ndef k(t: dsl.Tensor[dsl.f32]):\n    t[0] = 2.0\n"
    report = dsl.analyze_source(source, str(path))
    assert report.all_diagnostics() == [] and "2.000000e+00" in report.function("k").compiled.traced


def test_name_is_not_main(tmp_path):
    source = "import dsl\nif __name__ == '__main__':\n    raise SystemExit('ran as main')\n"
    assert dsl.analyze_source(source, str(tmp_path / "m.py")).all_diagnostics() == []


def test_syntax_error_is_dsl003(tmp_path):
    report = dsl.analyze_source("def f(:\n", str(tmp_path / "m.py"))
    assert [d.code for d in report.diagnostics] == ["DSL003"]
    assert report.diagnostics[0].range.line == 1


def test_report_round_trips_through_json(tmp_path):
    import json

    from dsl.compiler.artifacts import ModuleReport

    source = "import dsl\n@dsl.kernel(known_block_size=[0, 1, 1])\ndef k(t: dsl.Tensor[dsl.f32]):\n    t[0] = 1.0\n"
    report = dsl.analyze_source(source, str(tmp_path / "m.py"))
    again = ModuleReport.from_dict(json.loads(json.dumps(report.to_dict())))
    assert again.all_diagnostics() == report.all_diagnostics()
    assert [d.code for d in again.all_diagnostics()] == ["DSL201"]


def test_only_functions_whose_source_or_helpers_changed_recompile(tmp_path):
    from dsl.compiler import cache

    source = (
        "import dsl\nfrom dsl import Tensor, f32\n\n"
        "def scale(v):\n    return v * 2.0\n\n"
        "@dsl.kernel\ndef a(x: Tensor[f32]):\n    x[0] = scale(x[0])\n\n"
        "@dsl.kernel\ndef b(x: Tensor[f32]):\n    x[1] = 1.0\n\n"
        "@dsl.kernel\ndef c(x: Tensor[f32]):\n    x[2] = 2.0\n"
    )
    path = str(tmp_path / "m.py")
    dsl.analyze_source(source, path)
    edited = source.replace("x[2] = 2.0", "x[2] = 3.0")
    before = cache.MEMORY.misses
    report = dsl.analyze_source(edited, path)
    assert cache.MEMORY.misses - before == 1  # c only
    assert "3.000000e+00" in report.function("c").compiled.traced
    before = cache.MEMORY.misses
    report = dsl.analyze_source(edited.replace("v * 2.0", "v * 4.0"), path)
    assert cache.MEMORY.misses - before == 1  # the helper changed: a, which calls it, and nothing else
    assert "4.000000e+00" in report.function("a").compiled.traced
