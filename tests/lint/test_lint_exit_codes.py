"""Exit codes: 0 when nothing reaches `--fail-on`, 1 when something does, 2 for usage errors."""

from __future__ import annotations

from pathlib import Path

from lint_helpers import copy_data, run_lint


def test_clean_file_exits_0_and_says_so(project: Path) -> None:
    copy_data(project, "clean.py")
    run = run_lint(project, "clean.py")
    assert run.returncode == 0, run.stderr
    assert run.stdout == "All checks passed (1 file).\n"


def test_error_exits_1(project: Path) -> None:
    copy_data(project, "raises.py")
    run = run_lint(project, "--jobs", "1", "raises.py")
    assert run.returncode == 1, run.stderr
    assert "raises.py:4:1: DSL001 " in run.stdout


def test_warning_only_passes_by_default_and_fails_with_fail_on_warning(project: Path) -> None:
    copy_data(project, "bad_annotation.py")
    default = run_lint(project, "--no-exec", "bad_annotation.py")
    strict = run_lint(project, "--no-exec", "--fail-on", "warning", "bad_annotation.py")
    assert default.returncode == 0, default.stdout + default.stderr
    assert " DSL102 " in default.stdout
    assert strict.returncode == 1


def test_fail_on_info_counts_warnings_too(project: Path) -> None:
    copy_data(project, "bad_annotation.py")
    assert run_lint(project, "--no-exec", "--fail-on", "info", "bad_annotation.py").returncode == 1


def test_ignored_error_does_not_fail(project: Path) -> None:
    copy_data(project, "bad_block.py")
    run = run_lint(project, "--no-exec", "--ignore", "DSL201", "bad_block.py")
    assert run.returncode == 0, run.stdout


def test_missing_path_is_a_usage_error(project: Path) -> None:
    copy_data(project, "clean.py")
    run = run_lint(project, "nowhere.py")
    assert run.returncode == 2
    assert "no such file or folder: nowhere.py" in run.stderr
    assert run.stdout == ""


def test_unknown_option_and_unknown_code_are_usage_errors(project: Path) -> None:
    copy_data(project, "clean.py")
    assert run_lint(project, "--frobnicate").returncode == 2
    bad_code = run_lint(project, "--select", "DSL9", "clean.py")
    assert bad_code.returncode == 2
    assert "unknown code or prefix DSL9" in bad_code.stderr


def test_bad_pyproject_setting_is_a_usage_error(project: Path) -> None:
    copy_data(project, "clean.py")
    (project / "pyproject.toml").write_text('[tool.kdsl]\nfail-on = "sometimes"\n')
    run = run_lint(project, "clean.py")
    assert run.returncode == 2
    assert "fail-on" in run.stderr
