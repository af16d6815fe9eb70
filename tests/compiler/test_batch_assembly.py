"""One ptxas run for many modules (`dsl.compiler.batch_assembly`, what `kdsl lint` uses) gives
every kernel the figures a ptxas run of its module alone gives, and a module ptxas refuses
gets its own error without costing the others theirs."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsl.compiler.batch_assembly import module_symbols, renamed, resources_of
from dsl.compiler.toolchain import ToolError, assemble, ptxas_path
from dsl.module_analysis import analyze_source

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

pytestmark = pytest.mark.skipif(ptxas_path() is None, reason="ptxas is not installed")


def example_modules() -> list[tuple[str, str]]:
    """(function, PTX) of every function of every example, for its own target."""
    out = []
    for path in sorted(EXAMPLES.glob("*.py")):
        report = analyze_source(path.read_text(), str(path), until="ptx", views=False)
        for fn in report.functions:
            if fn.compiled is not None and "ptx" in fn.compiled.stages:
                out.append((f"{path.stem}.{fn.name}@{fn.compiled.target}", fn.compiled.stages["ptx"]))
    return out


def figures(found: dict) -> dict:
    return {name: (r.registers, r.spill_stores, r.spill_loads, r.stack_bytes, r.static_smem)
            for name, r in found.items()}


def test_every_examples_kernels_get_the_figures_of_their_own_ptxas_run(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))  # `from reductions import ...`
    modules = example_modules()
    # every example but the helper module (gemm_fp8 has two jit functions, so two modules)
    assert len({name.split(".")[0] for name, _ in modules}) == len(list(EXAMPLES.glob("*.py"))) - 1
    by_target: dict[str, list[tuple[str, str]]] = {}
    for name, ptx in modules:
        by_target.setdefault(name.rsplit("@", 1)[1], []).append((name, ptx))
    for target, group in by_target.items():
        together = resources_of([ptx for _, ptx in group], target)
        for (name, ptx), found in zip(group, together):
            assert not isinstance(found, ToolError), (name, found)
            alone = assemble(ptx, target)[1]
            assert found and figures(found) == figures(alone), name


VECTOR = """.version 8.0
.target sm_90
.address_size 64
.extern .func (.param .b32 func_retval0) vprintf(.param .b64 vprintf_param_0, .param .b64 vprintf_param_1);
.global .align 1 .b8 $str[3] = {{104, 105, 0}};
.visible .entry {name}(.param .u64 {name}_param_0)
{{
    .reg .b64 %rd<3>;
    .reg .b32 %r<2>;
    ld.param.u64 %rd1, [{name}_param_0];
    mov.u64 %rd2, $str;
    add.s32 %r1, %r1, 1;
    ret;
}}
"""


def test_a_modules_own_symbols_get_the_prefix_and_externs_do_not():
    ptx = VECTOR.format(name="scale")
    assert module_symbols(ptx) == ["$str", "scale"]
    text = renamed(ptx, "__p_")
    assert ".visible .entry __p_scale(.param .u64 scale_param_0)" in text  # parameters stay the function's
    assert "mov.u64 %rd2, __p_$str;" in text and ".global .align 1 .b8 __p_$str[3]" in text
    assert "vprintf(" in text and "__p_vprintf" not in text


def test_a_symbol_named_like_an_instruction_is_assembled_alone():
    clash = VECTOR.format(name="add")  # `add` is also the instruction `add.s32`
    assert renamed(clash, "__p_") is None
    (alone,), (together, other) = resources_of([clash], "sm_90"), resources_of([clash, VECTOR.format(name="k")],
                                                                                "sm_90")
    assert set(alone) == {"add"} and figures(together) == figures(alone) and set(other) == {"k"}


def test_a_module_ptxas_refuses_gets_its_error_and_the_others_their_figures():
    bad = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry broken() { bogus; }\n"
    good, refused, also_good = resources_of([VECTOR.format(name="a1"), bad, VECTOR.format(name="a2")], "sm_90")
    assert set(good) == {"a1"} and set(also_good) == {"a2"}
    assert isinstance(refused, ToolError) and "bogus" in str(refused)


def test_a_run_past_its_time_limit_is_a_timeout_of_each_module():
    from dsl.compiler.batch_assembly import Timeout

    found = resources_of([VECTOR.format(name="t1"), VECTOR.format(name="t2")], "sm_90", timeout=1e-4)
    assert all(isinstance(r, Timeout) and "did not finish within the time limit" in str(r) for r in found)
