"""Registering jit functions as torch operators (`fn.torch_op`): the schema comes from the jit
signature, `mutates_args` from the compiler's access facts, names from the function (qualified
by module where two share one), and what a schema cannot express is refused, naming it.
Fixtures: `tests/torch/programs.py` and `programs_twin.py`."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dsl.torch.signature import UnsupportedSignature, schema_text, signature_of
from tests.torch import programs, programs_twin

ROOT = programs.__file__.rsplit("/tests/", 1)[0]


def schema(op) -> str:
    return str(op.default._schema)


def test_the_operator_is_torch_ops_kdsl_function_with_the_jit_signature_as_schema(torch):
    op = programs.run_saxpy.torch_op
    assert op is torch.ops.kdsl.run_saxpy
    assert programs.run_saxpy.torch_op is op  # registered once
    assert schema(op) == "kdsl::run_saxpy(Tensor x, Tensor(a!) y, float a, int BLOCK=64) -> ()"


def test_scalars_are_symints_floats_bools_and_constexprs_attributes_with_their_defaults(torch):
    sig = signature_of(programs.run_fill)
    assert schema_text(sig, ["y"]) == (
        '(Tensor(a!) y, SymInt n, float value=1.0, *, float SCALE=1.0, str MODE="plain", bool CHECK=True) -> ()')
    parsed = programs.run_fill.torch_op.default._schema  # what torch made of it
    assert [(a.name, a.default_value, a.kwarg_only) for a in parsed.arguments] == [
        ("y", None, False), ("n", None, False), ("value", 1.0, False), ("SCALE", 1.0, True), ("MODE", "plain", True),
        ("CHECK", True, True)]
    assert str(parsed).startswith("kdsl::run_fill(Tensor(a!) y, SymInt n, float value=")
    assert schema(programs.takes_a_flag.torch_op) == "kdsl::takes_a_flag(Tensor x, bool flag, SymInt times=2) -> ()"


def test_mutates_args_are_the_tensors_the_kernels_write(torch):
    # an atomic update counts as a write; a tensor only read is not mutated
    assert schema(programs.run_count_positive.torch_op) == "kdsl::run_count_positive(Tensor x, Tensor(a!) total) -> ()"
    # the default specialization writes y; examples= covering both branches mark y and z
    assert schema(programs.run_pick.torch_op) == "kdsl::run_pick(Tensor x, Tensor(a!) y, Tensor z, int WHICH=0) -> ()"
    assert schema(programs.run_pick_declared.torch_op) == (
        "kdsl::run_pick_declared(Tensor x, Tensor(a!) y, Tensor(b!) z, int WHICH=0) -> ()")


def test_a_name_another_function_took_is_qualified_by_module(torch):
    first, second = programs.run_saxpy.torch_op, programs_twin.run_saxpy.torch_op
    assert first is torch.ops.kdsl.run_saxpy
    assert second is torch.ops.kdsl.tests_torch_programs_twin_run_saxpy
    assert schema(second) == "kdsl::tests_torch_programs_twin_run_saxpy(Tensor x, Tensor(a!) y, float a) -> ()"


@pytest.mark.parametrize(("fn", "message"), [
    (programs.takes_varargs, "parameter 'rest' collects arguments (*args / **kwargs)"),
    (programs.takes_a_tuple, "parameter 'SHAPE' is Constexpr[tuple]; a torch schema takes Constexpr[int]"),
    (programs.takes_unannotated, "parameter 'scale' has no annotation"),
    (programs.takes_a_tensor_map, "parameter 'm' is a dsl.TensorMap; pass the tensor"),
    (programs.run_scale_untyped, "its annotations do not say enough to compile it without data; add examples="),
], ids=["varargs", "constexpr-tuple", "unannotated", "tensor-map", "needs-examples"])
def test_a_signature_without_a_schema_is_refused_naming_the_function_and_parameter(torch, fn, message):
    with pytest.raises(UnsupportedSignature) as caught:
        fn.torch_op  # noqa: B018
    text = str(caught.value)
    assert text.startswith(f"kdsl cannot make a torch operator of {fn.fn.__qualname__}: ")
    assert message in text
    assert not hasattr(torch.ops.kdsl, fn.fn.__name__)  # nothing half-registered


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_import_dsl_imports_no_torch_and_dsl_torch_is_reachable_lazily(torch):
    done = _python(
        "import sys, dsl\n"
        "from tests.torch import programs\n"
        "assert 'torch' not in sys.modules, 'import dsl imported torch'\n"
        "assert dsl.torch.op is not None and 'torch' in sys.modules\n"
        "print(programs.run_saxpy.torch_op)\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "kdsl.run_saxpy"


def test_without_torch_operators_are_defined_but_registering_one_says_what_to_install():
    done = _python(
        "import sys\n"
        "sys.modules['torch'] = None  # as if torch were not installed\n"
        "import dsl, dsl.torch\n"
        "from tests.torch import programs\n"
        "op = dsl.torch.op(programs.run_saxpy, outputs={'y': 'x'})\n"
        "for attempt in (lambda: op(1, 2.0), lambda: programs.run_saxpy.torch_op):\n"
        "    try:\n"
        "        attempt()\n"
        "    except ModuleNotFoundError as err:\n"
        "        print(err)\n")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 2 and all("kdsl's PyTorch operators need torch" in line and "pip install torch" in line
                                   for line in lines)


def test_an_autotuned_function_leaves_its_tuned_parameters_to_the_configs(torch):
    import softmax_autotuned  # examples/: tuned over BLOCK

    op = softmax_autotuned.run_softmax_autotuned.torch_op
    assert schema(op) == "kdsl::run_softmax_autotuned(Tensor x, Tensor(a!) y) -> ()"
    x = torch.randn(3, 300)
    y = torch.empty_like(x)
    op(x, y)  # on the CPU: the interpreter runs its first config
    torch.testing.assert_close(y, x.softmax(-1))


def test_the_rest_of_dsl_never_imports_dsl_torch():
    """An integration layer over jit functions: only the `dsl` package's plug-in (the
    `fn.torch_op` entry point, imported on first use) names it."""
    import ast
    from pathlib import Path

    dsl_root = Path(ROOT) / "dsl"
    wrong = []
    for path in sorted(dsl_root.rglob("*.py")):
        if dsl_root / "torch" in path.parents or path == dsl_root / "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            wrong += [f"{path.relative_to(ROOT)}:{node.lineno}" for n in names if n.startswith("dsl.torch")]
    assert wrong == []
