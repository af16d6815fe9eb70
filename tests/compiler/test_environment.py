"""`KDSL_*` variables: parsed in one place, validated, and documented in the README's table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dsl import environment

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_table_lists_exactly_the_variables():
    table = README.read_text().split("## Environment variables", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^\| `(KDSL_\w+)`", table, re.M) == list(environment.VARIABLES)


def test_every_kdsl_variable_read_in_the_code_is_declared():
    root = Path(environment.__file__).resolve().parents[1]
    used = set()
    for path in list((root / "dsl").rglob("*.py")) + list((root / "lsp").rglob("*.py")):
        used |= set(re.findall(r"\"(KDSL_[A-Z_]+)\"", path.read_text()))
    assert used <= set(environment.VARIABLES), used - set(environment.VARIABLES)


@pytest.mark.parametrize(("value", "expected"), [("1", True), ("TRUE", True), ("yes", True), ("on", True),
                                                 ("0", False), ("false", False), ("", False), ("off", False)])
def test_switches(monkeypatch, value, expected):
    monkeypatch.setenv("KDSL_NVTX", value)
    assert environment.switch("KDSL_NVTX") is expected


def test_an_unrecognised_switch_value_warns_and_keeps_the_default(monkeypatch):
    monkeypatch.setenv("KDSL_NO_DISK_CACHE", "maybe")
    with pytest.warns(RuntimeWarning, match=r"KDSL_NO_DISK_CACHE='maybe' is not one of 1/true/yes/on"):
        assert environment.switch("KDSL_NO_DISK_CACHE") is False


def test_choices(monkeypatch):
    monkeypatch.setenv("KDSL_ASSEMBLER", "driver")
    assert environment.choice("KDSL_ASSEMBLER") == "driver"
    monkeypatch.setenv("KDSL_ASSEMBLER", "nvcc")
    with pytest.warns(RuntimeWarning, match="is not one of ptxas, driver"):
        assert environment.choice("KDSL_ASSEMBLER") == "ptxas"
