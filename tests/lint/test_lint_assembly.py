"""Lint's runs stop at PTX and lint assembles many files in one ptxas run
(`lsp.lint.assembly`): the diagnostics ptxas's figures call for are the compiler's own,
at the same ranges, and a file ptxas refuses is the only one to say so."""

from __future__ import annotations

from pathlib import Path

from lint_helpers import lint

from dsl.module_analysis import analyze_source
from tests.kernel_sources import spilling_kernel

SPILLS = '''import dsl
from dsl import Tensor, f32

''' + spilling_kernel("spills") + '''

@dsl.kernel
def crowded(x: Tensor[f32]):
    buf = dsl.SharedAllocator().array(f32, 11000)
    buf[dsl.thread_idx.x] = x[0]
    x[1] = buf[3]


@dsl.jit
def run_crowded(x: Tensor[f32]):
    crowded(x).launch(grid=1, block=64)
'''

PLAIN = '''import dsl
from dsl import Tensor, f32


@dsl.kernel
def scale{n}(x: Tensor[f32], a: dsl.Float32):
    i = dsl.block_idx.x * 256 + dsl.thread_idx.x
    x[i] = x[i] * a


@dsl.jit
def run_scale{n}(x: Tensor[f32]):
    scale{n}(x, 2.0).launch(grid=x.shape[0] // 256, block=256)
'''


def compiler_findings(path: Path) -> list[tuple[str, int, str]]:
    """DSL5xx as the compiler reports them after its own ptxas run of each module."""
    report = analyze_source(path.read_text(), str(path))
    return sorted((d.code, d.range.line, d.message) for d in report.all_diagnostics() if d.code.startswith("DSL5"))


def test_spills_and_occupancy_are_the_compilers_own(project: Path) -> None:
    project.mkdir(parents=True)
    (project / "heavy.py").write_text(SPILLS)
    for n in range(5):  # company in the same ptxas run
        (project / f"plain{n}.py").write_text(PLAIN.format(n=n))
    run = lint(project, "--no-cache", "--format", "json", "--select", "DSL5", ".")
    found = sorted((d["code"], d["line"], d["message"]) for d in run.json() if d["path"] == "heavy.py")
    expected = compiler_findings(project / "heavy.py")
    assert {code for code, _, _ in expected} == {"DSL501", "DSL502"}
    assert found == expected
    assert all(d["path"] == "heavy.py" for d in run.json())


def test_a_module_ptxas_refuses_is_dsl402_at_its_function_only(project: Path) -> None:
    """The compiler's PTX always assembles, so the refusal is made here: a real report of a
    real file, its PTX broken, assembled beside the PTX of another file."""
    import asyncio

    from lsp.lint.assembly import Assembler

    project.mkdir(parents=True)
    reports = {}
    for name in ("broken", "fine"):
        path = project / f"{name}.py"
        path.write_text(PLAIN.format(n=name))
        reports[name] = analyze_source(path.read_text(), str(path), until="ptx", views=False)
    fn = reports["broken"].function("run_scalebroken")
    fn.compiled.stages["ptx"] = fn.compiled.stages["ptx"].replace("ret;", "bogus.instruction;\n\tret;", 1)
    done: list[str] = []

    async def assemble() -> None:
        assembler = Assembler(2, done.append)
        for name, report in reports.items():
            assembler.add(name, report)
        await assembler.finish()

    asyncio.run(assemble())
    assert sorted(done) == ["broken", "fine"]
    (refused,) = [d for d in reports["broken"].all_diagnostics() if d.code == "DSL402"]
    assert refused.message.startswith("ptxas failed:") and "bogus" in refused.message
    assert refused.range == fn.range
    assert not [d for d in reports["fine"].all_diagnostics() if d.code == "DSL402"]
    kernel = reports["fine"].function("run_scalefine").compiled.kernels[0]
    assert kernel.resources is not None and kernel.resources.registers > 0


def test_ptxas_past_the_time_limit_is_dsl002_of_the_function(project: Path) -> None:
    import asyncio

    from lsp.lint.assembly import Assembler

    project.mkdir(parents=True)
    path = project / "slow.py"
    path.write_text(PLAIN.format(n="slow"))
    report = analyze_source(path.read_text(), str(path), until="ptx", views=False)

    async def assemble() -> None:
        assembler = Assembler(1, lambda _path: None, timeout=1e-4)
        assembler.add(str(path), report)
        await assembler.finish()

    asyncio.run(assemble())
    (late,) = report.all_diagnostics()
    assert late.code == "DSL002" and late.range == report.function("run_scaleslow").range
    assert late.message == ("Assembling 'run_scaleslow' with ptxas: ptxas did not finish within the time limit "
                            "(0.0001 s a module).")
