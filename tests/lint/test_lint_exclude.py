"""File discovery and `--exclude` / `[tool.kdsl] exclude`: folders walked, junk skipped."""

from __future__ import annotations

from pathlib import Path

from lint_helpers import copy_data, lint

from lsp.lint.discovery import Excluder, discover, matches


def _tree(root: Path) -> None:
    for rel in [
        "a.py",
        "notes.txt",
        "pkg/b.py",
        "pkg/gen/c_pb2.py",
        ".hidden/d.py",
        "pkg/__pycache__/e.py",
        ".venv/lib/f.py",
        "venv/g.py",
        "node_modules/h.py",
    ]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x = 1\n")


def _found(root: Path, *paths: str, config: tuple[str, ...] = (), cli: tuple[str, ...] = ()) -> list[str]:
    files, missing = discover([str(root / p) for p in paths], Excluder(config, root, cli, root))
    assert missing == []
    return [f.relative_to(root).as_posix() for f in files]


def test_walk_skips_hidden_cache_and_environment_folders(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert _found(tmp_path, ".") == ["a.py", "pkg/b.py", "pkg/gen/c_pb2.py"]


def test_explicit_file_is_checked_even_without_py_suffix(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert _found(tmp_path, "notes.txt", ".hidden/d.py") == ["notes.txt", ".hidden/d.py"]


def test_patterns_match_relative_paths_and_single_parts(tmp_path: Path) -> None:
    assert matches(tmp_path / "pkg/gen/c_pb2.py", ["*_pb2.py"], tmp_path)
    assert matches(tmp_path / "pkg/gen/c_pb2.py", ["gen"], tmp_path)
    assert matches(tmp_path / "pkg/gen/c_pb2.py", ["pkg/*"], tmp_path)
    assert not matches(tmp_path / "pkg/b.py", ["gen", "b"], tmp_path)


def test_cli_and_config_excludes_combine(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert _found(tmp_path, ".", config=("gen",), cli=("a.py",)) == ["pkg/b.py"]


def test_exclude_applies_to_files_named_on_the_command_line(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert _found(tmp_path, "a.py", "pkg/b.py", cli=("pkg",)) == ["a.py"]


def test_cli_exclude_end_to_end(project: Path) -> None:
    copy_data(project, "bad_block.py", "clean.py")
    run = lint(project, "--no-exec", "--exclude", "bad_*.py", ".")
    assert run.returncode == 0
    assert run.stdout == "All checks passed (1 file).\n"


def test_pyproject_exclude_is_relative_to_its_folder(project: Path) -> None:
    copy_data(project / "kernels", "bad_block.py")
    copy_data(project / "kernels" / "legacy", "bad_block.py")
    (project / "pyproject.toml").write_text('[tool.kdsl]\nexclude = ["kernels/legacy"]\n')
    run = lint(project / "kernels", "--no-exec", "--format", "json", ".")
    assert [d["path"] for d in run.json()] == ["bad_block.py"]
