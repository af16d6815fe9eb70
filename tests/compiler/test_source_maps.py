"""Source maps of every stage, both ways: Python line -> stage lines -> Python range."""

from __future__ import annotations

import re

from dsl.compiler.toolchain import assemble, strip_debug_sections

SOURCE = """
import dsl
from dsl import Float32, Int32, Tensor, f32

@dsl.kernel
def saxpy(x: Tensor[f32], y: Tensor[f32], a: Float32, n: Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    if i < n:
        y[i] = a * x[i] + y[i]
"""


def test_traced_ops_carry_exact_ranges(analyse):
    a = analyse(SOURCE)
    compiled = a.report.function("saxpy").compiled
    text = compiled.traced.splitlines()
    smap = compiled.source_maps["traced"]
    store_line = a.line_of("y[i] = a * x[i]")
    mul = next(i for i, line in enumerate(text) if "arith.mulf" in line)
    rng = smap.range_for(mul)
    assert (rng.line, rng.column, rng.end_line, rng.end_column) == (
        store_line, a.col_of("a * x[i]"), store_line, a.col_of("a * x[i]") + len("a * x[i]"))
    produced = "\n".join(text[i] for i in smap.ir_lines_for(a.path, store_line))
    assert all(op in produced for op in ("llvm.store", "arith.addf", "arith.mulf", "llvm.load"))
    assert "arith.cmpi" not in produced  # that op belongs to the `if` line
    assert "loc(" not in compiled.traced  # locations live in the map, not in the text users read


def test_lowered_llvm_ptx_and_sass_map_back_to_the_store_line(analyse):
    a = analyse(SOURCE)
    compiled = a.report.function("saxpy").compiled
    store_line = a.line_of("y[i] = a * x[i]")
    checks = {"lowered": "llvm.store", "llvm": "store float", "ptx": "st.global", "sass": "STG"}
    assert compiled.sass  # computed on first use
    for stage, needle in checks.items():
        text = compiled.stages[stage].splitlines()
        hits = [i for i, line in enumerate(text) if needle in line]
        assert hits, stage
        assert all(compiled.source_maps[stage].range_for(i).line == store_line for i in hits), stage
        assert set(hits) <= set(compiled.source_maps[stage].ir_lines_for(a.path, store_line)), stage


def test_line_info_costs_no_registers(analyse):
    a = analyse(SOURCE)
    ptx = a.report.function("saxpy").compiled.ptx
    assert ".loc" in ptx and ".target sm_90\n" in ptx and "debug" not in ptx.split(".address_size")[0]
    without = "\n".join(line for line in ptx.splitlines() if not re.match(r"\s*\.(loc|file)\b", line))
    with_info = assemble(ptx, "sm_90")[1]["saxpy"]
    plain = assemble(without, "sm_90")[1]["saxpy"]
    assert with_info.registers == plain.registers
    assert strip_debug_sections(".target sm_90, debug\n") == ".target sm_90\n"


def test_a_line_in_a_loop_maps_to_its_own_ops_not_the_loops(analyse):
    """The loop's ops carry the range of the whole `for` statement; a body line is its own
    ops (what linked highlighting and a line's hover show), the `for` line is the loop's and
    its bounds', and a body line with no ops of its own gets the loop's."""
    a = analyse("""
import dsl
from dsl import Int32, Tensor, f32

@dsl.kernel
def total(x: Tensor[f32], out: Tensor[f32], n: Int32):
    acc = 0.0
    for j in range(dsl.thread_idx.x, n, 32):
        # nothing here
        acc += x[j]
    out[dsl.thread_idx.x] = acc
""")
    compiled = a.report.function("total").compiled
    text = compiled.traced.splitlines()
    smap = compiled.source_maps["traced"]
    body = [text[i] for i in smap.ir_lines_for(a.path, a.line_of("acc += x[j]"))]
    assert any("arith.addf" in line for line in body) and not any("scf.yield" in line for line in body)
    header = smap.ir_lines_for(a.path, a.line_of("for j in"))
    assert any("scf.yield" in text[i] for i in header) and any("gpu.thread_id" in text[i] for i in header)
    comment = smap.ir_lines_for(a.path, a.line_of("# nothing here"))
    assert set(comment) < set(header) and any("scf.yield" in text[i] for i in comment)
