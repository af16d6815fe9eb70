"""`analyze_files`: the synchronous pool `kdsl lint` uses; one bad file costs only its own limit."""

from __future__ import annotations

from pathlib import Path

from lsp.lint.pool import analyze_files


def test_pool_reports_every_file_in_order(tmp_path: Path) -> None:
    files = {
        "crash.py": "import os\nos._exit(7)\n",
        "hang.py": "while True:\n    pass\n",
        "good.py": "x = 1\n",
        "raises.py": "x = 1\nraise RuntimeError('boom')\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "latin1.py").write_bytes(b"# -*- coding: latin-1 -*-\nname = '\xe9'\n")
    paths = [str(tmp_path / name) for name in [*files, "latin1.py", "missing.py"]]

    reports = analyze_files(paths, jobs=2, timeout=2.0, memory_mb=2048)

    assert list(reports) == paths
    summary = {
        Path(p).name: [(d.code, d.range.line) for d in r.all_diagnostics()] for p, r in reports.items()
    }
    assert summary == {
        "crash.py": [("DSL002", 1)],
        "hang.py": [("DSL002", 1)],
        "good.py": [],
        "raises.py": [("DSL001", 2)],
        "latin1.py": [],
        "missing.py": [("DSL002", 1)],
    }
    assert "exited with code 7" in reports[paths[0]].diagnostics[0].message
