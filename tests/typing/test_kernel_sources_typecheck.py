"""pyright (basic and standard modes) and mypy report nothing on the kernel sources the other
tests compile (`kernel_sources.py` collects them) that the DSL accepts — except `KNOWN`,
each a place where a checker is right about Python or cannot follow the DSL, with why.

The sources the DSL rejects are left out: `kdsl lint` decides, once for the three checks.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.typing.checkers import run_mypy, run_pyright
from tests.typing.kernel_sources import KernelSource, write_valid_sources

# (checker, test file the source is in, error) -> why it is reported
KNOWN = {
    ("mypy", "runtime/test_gpu.py",
     'Argument 1 to "__call__" of "KernelFunction" has incompatible type "TypedTensor[f32, Literal[1]]"; '
     'expected "TypedTensor[f16, Literal[1]]"  [arg-type]'):
        "`if dsl.const_expr(x.dtype == f32)` dispatches to an f16 kernel with `x: Tensor[f32]`: the branch "
        "is traced only for the dtype it is for, a checker reads both (pyright: a tensor's dtype is unknown)",
    ("pyright-standard", "compiler/test_control_flow_exits.py", '"j" is possibly unbound'):
        "the variable of an unrolled `for j in dsl.static_range(4)` read after it: a checker cannot know "
        "the range is not empty (standard mode reports possibly unbound names)",
    ("pyright-basic", "lsp/data/symbols.py", 'Type of parameter "x" must be a supertype of its class "Holder"'):
        "a `@dsl.kernel` defined in a class body (an LSP symbols fixture): pyright checks the first "
        "parameter of every function of a class as `self`, decorated or not",
    ("pyright-standard", "lsp/data/symbols.py", 'Type of parameter "x" must be a supertype of its class "Holder"'):
        "as in basic mode",
}


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, KernelSource]]:
    """The valid kernel sources, written to one folder, by file name."""
    folder = tmp_path_factory.mktemp("kernel_sources")
    # under pytest-xdist each worker's base folder sits in one this run's workers share
    shared = tmp_path_factory.getbasetemp().parent if os.environ.get("PYTEST_XDIST_WORKER") else None
    valid = write_valid_sources(folder, shared)
    assert len(valid) >= 100, "fewer kernel sources than the tests had when this was written"
    return folder, {source.file_name: source for source in valid}


def _reported(checker: str, by_file: list[tuple[str, int, str]], found: dict[str, KernelSource]) -> set:
    return {(checker, found[name].origin.split(":")[0], text) for name, _, text in by_file if name in found}


@pytest.mark.parametrize("mode", ["basic", "standard"])
def test_pyright_accepts_the_tests_kernel_sources(mode, sources, tmp_path):
    folder, found = sources
    report = run_pyright(folder, mode, tmp_path)
    assert _reported(f"pyright-{mode}", report.by_file, found) == {k for k in KNOWN if k[0] == f"pyright-{mode}"}


def test_mypy_accepts_the_tests_kernel_sources(sources):
    folder, found = sources
    report = run_mypy(folder)
    assert _reported("mypy", report.by_file, found) == {k for k in KNOWN if k[0] == "mypy"}
