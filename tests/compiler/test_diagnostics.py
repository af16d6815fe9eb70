"""One test per diagnostic code: the code, the exact range, and related info / fixes."""

from __future__ import annotations

import warnings

import pytest

import dsl
from dsl.diagnostics import SourceRange
from tests.kernel_sources import spilling_kernel

HEADER = """
import dsl
from dsl import Constexpr, Float32, Int32, Tensor, f16, f32, i32
"""


def launching(launch_args: str) -> str:
    """A file whose jit launches an empty kernel with `.launch(<launch_args>)`."""
    return HEADER + f"""
@dsl.kernel
def k(x: Tensor[f32]):
    pass

@dsl.jit
def run(x: Tensor[f32]):
    k(x).launch({launch_args})
"""


def only(a, code):
    found = [d for d in a.diagnostics if d.code == code]
    assert len(found) == 1, [d.format() for d in a.diagnostics]
    return found[0]


def rng(a, needle, line_needle=None, occurrence=0):
    line = a.line_of(line_needle or needle)
    text = a.source.splitlines()[line - 1]
    col = text.index(needle)
    for _ in range(occurrence):
        col = text.index(needle, col + 1)
    return SourceRange(a.path, line, col, line, col + len(needle))


def test_dsl101_annotation_mismatch_points_at_the_argument(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f16], n: Int32):
    pass

@dsl.jit
def run(x: Tensor[f32]):
    k(x, 4).launch(grid=1, block=32)
""")
    d = only(a, "DSL101")
    assert d.range == rng(a, "x", "k(x, 4).launch")
    assert d.message == ("@kernel parameter 'x' is annotated as 'Tensor[f16, 1]', but the argument resolves to "
                         "'Tensor[f32, 1]'. The annotation is not enforced; the actual value type is used.")


def test_dsl101_fixes_correct_the_annotation_or_cast_the_argument(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f16], s: dsl.Float16):
    pass

@dsl.jit
def run(x: Tensor[f32], t: Float32):
    k(x, t).launch(grid=1, block=32)
""")
    tensor, scalar = sorted((d for d in a.diagnostics if d.code == "DSL101"), key=lambda d: d.range.column)
    assert [(f.title, [(e.range, e.new_text) for e in f.edits]) for f in tensor.fixes] == [
        ("Change the annotation to Tensor[f32]", [(rng(a, "Tensor[f16]"), "Tensor[f32]")])]
    assert [(f.title, [(e.range, e.new_text) for e in f.edits]) for f in scalar.fixes] == [
        ("Change the annotation to dsl.Float32", [(rng(a, "dsl.Float16"), "dsl.Float32")]),
        ("Cast the argument to dsl.f16", [(rng(a, "t", "k(x, t)"), "dsl.cast(t, dsl.f16)")]),
    ]


def test_dsl102_non_dsl_annotation_points_at_the_annotation(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], n: int = 3):
    pass
""")
    d = only(a, "DSL102")
    assert d.range == rng(a, "int", "n: int")
    assert d.message == "@kernel parameter 'n' is annotated as 'int', which is not a DSL value type."
    assert [(f.title, f.edits[0].new_text) for f in d.fixes] == [
        ("Annotate as dsl.Int32", "dsl.Int32"), ("Annotate as dsl.Constexpr[int]", "dsl.Constexpr[int]")]
    assert dsl.static_checks(a.source, a.path) == [d]  # the instant tier says the same, fixes included


def test_dsl103_needs_examples_with_a_fix(analyse):
    a = analyse(HEADER + """
@dsl.jit
def run(x, n: Int32):
    pass
""")
    d = only(a, "DSL103")
    assert d.severity.value == "info"
    assert d.range == rng(a, "x", "def run(x")
    (fix,) = d.fixes
    assert fix.edits[0].range == rng(a, "dsl.jit")
    assert fix.edits[0].new_text.startswith("dsl.jit(examples=[(dsl.TensorSpec(dsl.f32")


def test_a_kernel_only_a_later_example_launches_compiles_with_that_examples_specialization(analyse):
    """A Constexpr of the jit picks the kernel (attention_backward's head dim does): each example's
    launches specialize the kernels they reach, not only the first example's."""
    a = analyse(HEADER + """
@dsl.kernel
def small(x: Tensor, n: Int32):
    x[dsl.thread_idx.x] = 1.0

@dsl.kernel
def large(x: Tensor, n: Int32):
    x[dsl.thread_idx.x] = 2.0

@dsl.jit(examples=[{"WIDE": False}, {"WIDE": True}])
def run(x: Tensor[f32, 1], WIDE: Constexpr[bool] = False):
    if WIDE:
        large(x, x.shape[0]).launch(grid=1, block=64)
    else:
        small(x, x.shape[0]).launch(grid=1, block=32)
""")
    assert a.codes() == [], [d.format() for d in a.diagnostics]
    for name in ("small", "large"):
        fn = a.report.function(name)
        assert fn is not None and not fn.diagnostics


@pytest.mark.parametrize("value, message", [
    ("[128, 1]", "known_block_size must have exactly 3 elements (x, y, z), got 2"),
    ("[128, 0, 1]", "known_block_size[1] must be positive, got 0"),
    ("[128, 1.5, 1]", "known_block_size[1] must be an int, got float"),
])
def test_dsl201_malformed_known_block_size(analyse, value, message):
    a = analyse(HEADER + f"""
@dsl.kernel(known_block_size={value})
def k(x: Tensor[f32]):
    pass
""")
    d = only(a, "DSL201")
    assert d.message == message
    assert d.range == rng(a, value)


def test_dsl202_contract_points_at_block_with_decorator_related_and_fixes(analyse):
    a = analyse(HEADER + """
@dsl.kernel(known_block_size=[256, 1, 1])
def k(x: Tensor[f32]):
    pass

@dsl.jit
def run(x: Tensor[f32]):
    k(x).launch(grid=4, block=128)
""")
    d = only(a, "DSL202")
    assert d.message == "launch block x=128 differs from known_block_size x=256 declared on kernel 'k'."
    assert d.range == rng(a, "128", "block=128")
    (related,) = d.related
    assert related.range == rng(a, "[256, 1, 1]")
    assert [f.title for f in d.fixes] == ["Launch with block=256", "Change known_block_size to [128, 1, 1]"]
    assert d.fixes[0].edits[0].new_text == "256"
    assert d.fixes[1].edits[0].new_text == "[128, 1, 1]"
    assert dsl.static_checks(a.source, a.path) == [d]


def test_dsl203_block_over_limits(analyse):
    a = analyse(launching("grid=1, block=(64, 32)"))
    d = only(a, "DSL203")
    assert d.range == rng(a, "(64, 32)")
    assert "2048 threads" in d.message


def test_dsl204_grid_over_limits(analyse):
    a = analyse(launching("grid=(1, 70000), block=32"))
    d = only(a, "DSL204")
    assert d.range == rng(a, "(1, 70000)")


@pytest.mark.parametrize("cluster, grid, target, message", [
    ("(2, 1, 1)", "(3, 2)", None, "grid x=3 is not a multiple of cluster x=2"),
    ("(16, 1, 1)", "(16, 2)", None, "cluster [16, 1, 1] has 16 blocks; sm_90 allows 8 per cluster"),
    ("(2, 1, 1)", "(4, 2)", "sm_80", "cluster [2, 1, 1] has 2 blocks; sm_80 allows 1 per cluster"),
])
def test_dsl204_cluster_must_fit_target_and_tile_grid(analyse, cluster, grid, target, message):
    a = analyse(launching(f"grid={grid}, block=32, cluster={cluster}"), target=target)
    d = only(a, "DSL204")
    assert d.range == rng(a, cluster, "cluster=") and d.message == message


def test_cluster_launch_in_ir_and_launcher(analyse):
    a = analyse(launching("grid=(4, 2), block=32, cluster=(2, 1, 1)"))
    assert "clusters in (" in a.stage("run", "traced")
    assert "cluster=(2, 1, 1))" in a.stage("run", "launcher")


def test_dsl205_launch_smem_below_allocation(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32]):
    smem = dsl.SharedAllocator(dynamic=True)
    buf = smem.array(f32, 1024)
    buf[0] = x[0]

@dsl.jit
def run(x: Tensor[f32]):
    k(x).launch(grid=1, block=32, smem=1000)
""")
    d = only(a, "DSL205")
    assert d.range == rng(a, "1000")
    assert d.message == "launch smem=1000 is less than the 4096 bytes allocated by SharedAllocator in kernel 'k'"


def test_dsl206_shared_memory_over_target(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32]):
    smem = dsl.SharedAllocator()
    buf = smem.array(f32, (128, 128))
    buf[0, 0] = x[0]
""")
    d = only(a, "DSL206")
    assert d.range == rng(a, "smem.array(f32, (128, 128))")


def test_dsl301_mixed_types_points_at_the_expression(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], n: Int32):
    y = x[0] + n
    x[1] = y
""")
    d = only(a, "DSL301")
    assert d.range == rng(a, "x[0] + n")
    assert "mixed types f32 and i32" in d.message


def test_dsl301_static_index_out_of_range_and_rank_mismatch(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32, 2]):
    smem = dsl.SharedAllocator()
    buf = smem.array(f32, 8)
    buf[8] = 1.0
    x[1] = 2.0
    n = x.shape[2]
""")
    msgs = [(d.range, d.message) for d in a.diagnostics]
    assert (rng(a, "buf[8]"), "index 8 out of range for dimension 0 of size 8") in msgs
    assert any(r == rng(a, "x[1]") and "rank 2" in m for r, m in msgs)
    assert any(r == rng(a, "2", "x.shape[2]") and "out of range" in m for r, m in msgs)
    assert a.codes() == ["DSL301"] * 3  # all three reported, not just the first


def test_dsl302_unsupported_statement(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32]):
    try:
        x[0] = 1.0
    except Exception:
        pass
""")
    d = only(a, "DSL302")
    assert d.range.line == a.line_of("try:") and d.range.column == 4
    assert "'try'" in d.message


def test_dsl303_defined_in_one_branch(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], n: Int32):
    if dsl.thread_idx.x < n:
        v = x[0]
    x[1] = v
""")
    d = only(a, "DSL303")
    assert d.range == rng(a, "v", "x[1] = v")
    assert d.related[0].range == rng(a, "v", "v = x[0]")


def test_dsl304_kernel_called_outside_jit(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32]):
    pass

k(1)
""")
    d = only(a, "DSL304")
    assert d.range == rng(a, "k(1)")


def test_dsl401_verifier_error_maps_to_python_range(tmp_path):
    from mlir import ir

    from dsl.compiler.pipeline import Build, StageError, stage_traced
    from dsl.frontend.source import location
    from dsl.targets import get_target

    py = tmp_path / "src.py"
    py.write_text("a = 1\nb = a + 2\n")
    ctx = ir.Context()
    op_range = SourceRange(str(py), 2, 4, 2, 9)
    with ctx, location(op_range):
        module = ir.Module.parse("func.func @f() { return }")
        block = module.body.operations[0].regions[0].blocks[0]
        with ir.InsertionPoint.at_block_begin(block):
            # an addi whose operands disagree with its result type: the verifier rejects it
            i64 = ir.IntegerType.get_signless(64)
            one = ir.Operation.create("arith.constant", results=[i64], attributes={"value": ir.IntegerAttr.get(i64, 1)})
            ir.Operation.create("arith.addi", results=[ir.IntegerType.get_signless(32)], operands=[one.result] * 2)
        build = Build(module, ctx, get_target(None), SourceRange(str(py), 1, 0, 1, 1))
        handler = ctx.attach_diagnostic_handler(
            lambda d: build.errors.append((str(d.message), str(d.location))) or True)
        with pytest.raises(StageError) as info:
            stage_traced(build)
        handler.detach()
    (d,) = info.value.diagnostics
    assert d.code == "DSL401" and d.range == op_range


def test_dsl402_backend_failure_is_a_diagnostic(tmp_path):
    from dsl.compiler.pipeline import Build, StageError, stage_cubin
    from dsl.targets import get_target

    fallback = SourceRange(str(tmp_path / "k.py"), 3, 4, 3, 5)
    build = Build(None, None, get_target(None), fallback)
    build.texts["ptx"] = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k() { bogus; }\n"
    with pytest.raises(StageError) as info:
        stage_cubin(build)
    (d,) = info.value.diagnostics
    assert d.code == "DSL402" and d.range == fallback and d.message.startswith("ptxas failed")


def test_dsl501_register_spills(analyse):
    a = analyse(HEADER + spilling_kernel("k"))
    d = only(a, "DSL501")
    assert d.range == rng(a, "k", "def k(")


def test_dsl502_low_occupancy_at_the_launch(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32]):
    smem = dsl.SharedAllocator()
    buf = smem.array(f32, 11000)
    buf[dsl.thread_idx.x] = x[0]
    x[1] = buf[3]

@dsl.jit
def run(x: Tensor[f32]):
    k(x).launch(grid=1, block=64)
""")
    d = only(a, "DSL502")
    assert d.range == rng(a, "k(x).launch(grid=1, block=64)")


def test_one_mistake_does_not_hide_the_others(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def bad_one(x: Tensor[f32], n: Int32):
    x[0] = x[1] + n

@dsl.kernel
def bad_two(x: Tensor[f32]):
    with open("f"):
        pass

oops = 1 / 0

@dsl.kernel
def good(x: Tensor[f32]):
    x[0] = 1.0
""")
    assert sorted(a.codes()) == ["DSL001", "DSL301", "DSL302"]
    assert a.report.function("good").compiled is not None


def test_compile_error_renders_user_code_not_compiler_frames(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], n: Int32):
    x[0] = x[1] + n
""", name="user_kernel.py")
    import importlib.util

    spec = importlib.util.spec_from_file_location("user_kernel", a.path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(dsl.CompileError) as info:
        dsl.compile(mod.k)
    text = str(info.value)
    assert f"user_kernel.py:{a.line_of('x[0] = x[1] + n')}:12: DSL301" in text
    assert "x[0] = x[1] + n" in text and "^^^^^^^^" in text
    import traceback

    frames = [frame.filename for frame in traceback.extract_tb(info.value.__traceback__)]
    internal = [f for f in frames if "/dsl/frontend/" in f or "/dsl/compiler/" in f]
    assert internal == [] and frames[0] == __file__  # the user's frames, not the compiler's


def test_warnings_go_through_python_warnings(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], n: int = 3):
    pass
""", name="warn_kernel.py")
    import importlib.util

    spec = importlib.util.spec_from_file_location("warn_kernel", a.path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dsl.compile(mod.k)
    assert [w.category.__name__ for w in caught] == ["DiagnosticWarning"]
    assert "DSL102" in str(caught[0].message)


def test_resources_read_from_ptxas_and_from_the_drivers_jit_log():
    """Both assemblers' logs give the same figures (the driver's has no spill counts)."""
    from dsl.compiler.toolchain import parse_ptxas_info

    ptxas = ("ptxas info    : Compiling entry function 'softmax' for 'sm_90'\n"
             "ptxas info    : Function properties for softmax\n"
             "    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
             "ptxas info    : Used 32 registers, used 1 barriers, 1152 bytes smem, 572 bytes cmem[0]\n")
    driver = ("info    : 0 bytes gmem\n"
              "info    : Function properties for 'softmax':\n"
              "info    : used 38 registers, used 1 barriers, 16 stack, 1152 bytes smem, 572 bytes cmem[0], "
              "0 bytes lmem\n")
    from_ptxas, from_driver = parse_ptxas_info(ptxas)["softmax"], parse_ptxas_info(driver)["softmax"]
    assert (from_ptxas.registers, from_ptxas.static_smem, from_ptxas.stack_bytes) == (32, 1152, 16)
    assert (from_ptxas.spill_stores, from_ptxas.spill_loads) == (8, 4)
    assert (from_driver.registers, from_driver.static_smem, from_driver.stack_bytes) == (38, 1152, 16)
    assert (from_driver.spill_stores, from_driver.spill_loads) == (0, 0)


def test_a_device_functions_figures_after_a_kernels_do_not_replace_them():
    """ptxas lists the properties of a device function the kernel calls (`__nv_exp2f`) after the
    kernel's own: its zero spills had hidden a kernel's 236 bytes (and its DSL501)."""
    from dsl.compiler.toolchain import parse_ptxas_info

    log = ("ptxas info    : Compiling entry function 'backward_kernel_ws' for 'sm_90a'\n"
           "ptxas info    : Function properties for backward_kernel_ws\n"
           "    232 bytes stack frame, 236 bytes spill stores, 228 bytes spill loads\n"
           "ptxas info    : Used 168 registers, used 16 barriers, 232 bytes cumulative stack size\n"
           "ptxas info    : Compile time = 663.145 ms\n"
           "ptxas info    : Function properties for __nv_exp2f\n"
           "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n")
    found = parse_ptxas_info(log)
    assert list(found) == ["backward_kernel_ws"]
    kernel = found["backward_kernel_ws"]
    assert (kernel.registers, kernel.stack_bytes, kernel.spill_stores, kernel.spill_loads) == (168, 232, 236, 228)
