"""Each language feature produces the IR (or PTX) it should: structure, not just 'no error'."""

from __future__ import annotations

import re

HEADER = """
import dsl
from dsl import Constexpr, Float32, Int32, Int64, Tensor, f32, f16, i32, i64, u32
"""


def test_scalar_casts_and_promotion(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], n: Int32, m: Int64, u: dsl.Uint32):
    wide = n + m
    f = dsl.cast(wide, f32) + f32(u)
    h = f.to(f16)
    x[0] = dsl.cast(h, f32)
""")
    ir = a.stage("k", "traced")
    assert "arith.extsi" in ir  # i32 widened to i64 for n + m
    assert "arith.sitofp" in ir and "arith.uitofp" in ir  # signed vs unsigned conversions
    assert "arith.truncf" in ir and "arith.extf" in ir
    assert a.diagnostics == []


def test_int_division_truncates_and_unsigned_ops(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], n: Int32, u: dsl.Uint32):
    q = n // 3 + n % 3
    v = u // 2 + (u >> 1)
    if u < 10:
        x[q] = 1.0
""")
    ir = a.stage("k", "traced")
    for op in ("arith.divsi", "arith.remsi", "arith.divui", "arith.shrui", "arith.cmpi ult"):
        assert op in ir, op


def test_tensor_multidim_index_uses_strides(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32, 3], y: Tensor[f32, 3]):
    i = dsl.thread_idx.x
    y[i, 1, 2] = x[2, i, 1] * 2.0
""")
    ir = a.stage("k", "traced")
    sig = re.search(r"gpu.func @k\((.*?)\) kernel", ir).group(1)
    # pointer, 3 shape values and 2 outer strides per rank-3 tensor
    assert sig.count("!llvm.ptr<1>") == 2 and sig.count(": i32") == 10
    assert ir.count("llvm.getelementptr") == 2 and "arith.muli" in ir


def test_vector_loads_are_128_bit(analyse):
    a = analyse(HEADER + """
@dsl.kernel(known_block_size=[128, 1, 1])
def k(x: Tensor[f32], y: Tensor[f32]):
    i = (dsl.block_idx.x * 128 + dsl.thread_idx.x) * 4
    v = x.vload(i, 4)
    y.vstore(i, v * 2.0 + v[3])
""")
    ir = a.stage("k", "traced")
    assert "llvm.load" in ir and "vector<4xf32>" in ir and "alignment = 16" in ir
    ptx = a.stage("k", "ptx")
    assert "ld.global.v4.b32" in ptx or "ld.global.v4.f32" in ptx
    assert "st.global.v4.b32" in ptx or "st.global.v4.f32" in ptx


def test_if_elif_else_yields_values(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], n: Int32):
    i = dsl.thread_idx.x
    if i < n:
        v = x[i]
    elif i < 2 * n:
        v = 2.0
    else:
        v = 0.0
    x[i] = v
""")
    ir = a.stage("k", "traced")
    assert ir.count("scf.if") == 2
    assert re.search(r"= scf.if %\w+ -> \(f32\)", ir)
    assert "scf.yield" in ir


def test_for_loop_carries_values(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], out: Tensor[f32], n: Int32):
    acc = 0.0
    count = 0
    for j in range(dsl.thread_idx.x, n, 32):
        acc += x[j]
        count += 1
    out[dsl.thread_idx.x] = acc + dsl.cast(count, f32)
""")
    ir = a.stage("k", "traced")
    m = re.search(r"scf.for %\w+ = %\w+ to %\w+ step %\w+ iter_args\((.*?)\) -> \((.*?)\)", ir)
    assert m, ir
    assert m.group(2) == "f32, i32"


def test_while_loop(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[i32], n: Int32):
    v = n
    steps = 0
    while v > 1:
        v = v // 2
        steps += 1
    x[0] = steps
""")
    ir = a.stage("k", "traced")
    assert "scf.while" in ir and "scf.condition" in ir


def test_static_range_and_const_expr_unroll(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], UNROLL: Constexpr[int] = 4):
    acc = 0.0
    for j in dsl.static_range(UNROLL):
        if dsl.const_expr(j % 2 == 0):
            acc += x[j]
    x[0] = acc
""")
    ir = a.stage("k", "traced")
    assert "scf.for" not in ir and "scf.if" not in ir
    assert ir.count("llvm.load") == 2  # j = 0 and 2


def test_thread_indices_barrier_lane_and_shuffles(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32]):
    t = dsl.thread_idx.x + dsl.block_idx.y + dsl.block_dim.z + dsl.grid_dim.x + dsl.lane_id()
    v = x[t]
    v = dsl.shfl_xor(v, 1) + dsl.shfl_down(v, 2) + dsl.shfl_up(v, 4) + dsl.shfl_idx(v, 0)
    dsl.barrier()
    x[t] = v
""")
    ir = a.stage("k", "traced")
    for op in ("gpu.thread_id  x", "gpu.block_id  y", "gpu.block_dim  z", "gpu.grid_dim  x", "gpu.lane_id",
               "gpu.shuffle  xor", "gpu.shuffle  down", "gpu.shuffle  up", "gpu.shuffle  idx", "gpu.barrier"):
        assert op in ir, op
    ptx = a.stage("k", "ptx")
    assert "shfl.sync.bfly" in ptx and "bar.sync" in ptx


def test_known_block_size_folds_block_dim(analyse):
    a = analyse(HEADER + """
@dsl.kernel(known_block_size=[64, 2, 1])
def k(x: Tensor[f32]):
    x[dsl.block_dim.x * dsl.block_dim.y] = 1.0
""")
    ir = a.stage("k", "traced")
    assert "known_block_size = array<i32: 64, 2, 1>" in ir and "gpu.block_dim" not in ir
    assert ".maxntid 64, 2, 1" in a.stage("k", "ptx")


def test_atomics(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], c: Tensor[i32]):
    dsl.atomic_add(x, 0, 1.0)
    dsl.atomic_add(c, 0, 1)
    dsl.atomic_min(c, 1, 5)
    dsl.atomic_max(c, 2, 5)
    old = dsl.atomic_cas(c, 3, 0, 7)
    x[1] = dsl.cast(old, f32)
""")
    ir = a.stage("k", "traced")
    for op in ("llvm.atomicrmw fadd", "llvm.atomicrmw add", "llvm.atomicrmw min", "llvm.atomicrmw max",
               "llvm.cmpxchg"):
        assert op in ir, op
    ptx = a.stage("k", "ptx")
    assert "atom.global" in ptx or "red.global" in ptx


def test_shared_memory_static_and_dynamic_with_inferred_launch_smem(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def stat(x: Tensor[f32]):
    smem = dsl.SharedAllocator()
    buf = smem.array(f32, (4, 33))
    buf[1, dsl.thread_idx.x] = x[0]
    dsl.barrier()
    x[1] = buf[1, 0]

@dsl.kernel
def dyn(x: Tensor[f32]):
    smem = dsl.SharedAllocator(dynamic=True)
    a = smem.array(f32, 256)
    b = smem.array(i32, 10)
    a[dsl.thread_idx.x] = x[0]
    b[0] = 1
    x[2] = a[3]

@dsl.jit
def run(x: Tensor[f32]):
    dyn(x).launch(grid=1, block=256)
""")
    traced = a.stage("stat", "traced")
    assert re.search(r"llvm.mlir.global internal @__smem_stat_0\(\) \{addr_space = 3 : i32.*!llvm.array<132 x f32>",
                     traced)
    run = a.report.function("run").compiled
    assert run.kernels[0].dynamic_smem == 1024 + 40  # 256 floats, then 10 ints at a 16-byte boundary
    assert "(1, 1, 1), (256, 1, 1), 1064, stream" in run.launcher
    assert "dynamic_shared_memory_size" in run.traced


def test_math_intrinsics(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32]):
    v = x[0]
    x[1] = dsl.exp(v) + dsl.log(v) + dsl.sqrt(v) + dsl.rsqrt(v) + dsl.sin(v) + dsl.cos(v) + dsl.tanh(v)
    x[2] = dsl.fma(v, v, v) + dsl.min(v, 1.0) + dsl.max(v, 2.0) + dsl.abs(v) + dsl.floor(v) + dsl.ceil(v)
""")
    ir = a.stage("k", "traced")
    for op in ("math.sqrt", "math.rsqrt", "math.sin", "math.cos", "math.tanh", "math.fma", "arith.minimumf",
               "arith.maximumf", "math.absf", "math.floor", "math.ceil"):
        assert op in ir, op
    ptx = a.stage("k", "ptx")
    assert "ex2.approx" in ptx and "lg2.approx" in ptx and "sqrt." in ptx


def test_printf_and_cdiv(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], n: Int32):
    blocks = dsl.cdiv(n, 128)
    dsl.printf("n=%d blocks=%d x0=%f\\n", n, blocks, x[0])
""")
    ir = a.stage("k", "traced")
    assert 'gpu.printf "n=%d blocks=%d x0=%f\\0A"' in ir
    assert "vprintf" in a.stage("k", "ptx")


def test_helpers_are_inlined_with_callsite_locations(analyse):
    a = analyse(HEADER + """
def square(v):
    return v * v

@dsl.kernel
def k(x: Tensor[f32]):
    x[0] = square(x[1])
""")
    traced = a.report.function("k").compiled
    helper_line = a.line_of("return v * v")
    lines = traced.source_maps["traced"].ir_lines_for(a.path, helper_line)
    assert any("arith.mulf" in traced.traced.splitlines()[i] for i in lines)


def test_constexpr_specializations_get_unique_kernel_names(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], S: Constexpr[int]):
    x[dsl.thread_idx.x] = x[dsl.thread_idx.x] * S

@dsl.jit
def run(x: Tensor[f32]):
    k(x, 2).launch(grid=1, block=128)
    k(x, 3).launch(grid=1, block=128)
    k(x, 2).launch(grid=2, block=64)
""")
    run = a.report.function("run").compiled
    assert [(k.symbol, k.block) for k in run.kernels] == [("k", (128, 1, 1)), ("k_1", (128, 1, 1)),
                                                          ("k_2", (64, 1, 1))]
    assert run.traced.count("gpu.launch_func") == 3


def test_launcher_stage_evaluates_grid_from_shapes(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32, 2]):
    x[0, 0] = 1.0

@dsl.jit
def run(x: Tensor[f32, 2], B: Constexpr[int] = 64):
    k(x).launch(grid=(dsl.cdiv(x.shape[1], B), x.shape[0]), block=(B, 2))
""")
    src = a.stage("run", "launcher")
    assert "    def launch(x, stream=None):" in src
    assert "_read_args = rt.arg_reader((('x', 'f32', 2),))" in src
    assert "_launch_k = rt.kernel('k', ('ptr', 'i32', 'i32', 'i32'))" in src
    assert "_launch_k(((-(-x_shape[1] // 64)), x_shape[0], 1), (64, 2, 1), 0, stream, x_ptr, " in src
    namespace: dict = {}
    exec(compile(src, "launcher", "exec"), namespace)  # the generated source is valid Python
    assert callable(namespace["bind"])


def test_compile_with_specs_and_no_arguments(analyse, tmp_path):
    import sys

    import dsl

    a = analyse(HEADER + """
@dsl.jit
def run(x: Tensor[f32], y, B: Constexpr[int] = 64):
    pass
""", name="spec_mod.py")
    sys.path.insert(0, str(tmp_path))
    try:
        import spec_mod
    finally:
        sys.path.pop(0)
    compiled = dsl.compile(spec_mod.run, dsl.TensorSpec(dsl.f32, (10,)), dsl.TensorSpec(dsl.f16, rank=2), B=32,
                           target="sm_80")
    assert compiled.target == "sm_80" and "func.func @run(" in compiled.traced
    assert "Tensor[f16, 2]" in compiled.launcher and "B=32" in compiled.launcher
    assert a.codes() == ["DSL103"]  # without examples, 'y' has no type



def test_conditional_expression_evaluates_only_the_chosen_side(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], y: Tensor[f32], n: Int32):
    i = dsl.thread_idx.x
    y[i] = x[i] if i < n else 0.0
""")
    ir = a.stage("k", "traced")
    # the load sits inside the `then` region of an scf.if yielding f32, not before it
    m = re.search(r"= scf.if %\w+ -> \(f32\) \{\n(.*?)\n\s*\} else \{", ir, re.S)
    assert m and "llvm.load" in m.group(1), ir
    assert ir.index("scf.if") < ir.index("llvm.load")


def test_while_whose_condition_becomes_run_time_is_a_run_time_loop(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], a: Float32):
    v = 0.0
    while v < 10.0:
        v = v + a
    steps = 0
    k2 = 64
    while k2 > 1:
        k2 //= 2
        steps += 1
    x[0] = v + dsl.cast(steps + dsl.min(k2, 3), f32)
""")
    ir = a.stage("k", "traced")
    assert ir.count("scf.while") == 1  # the first loop; the second ran while tracing (k2 is compile-time)
    assert "arith.constant 7.000000e+00 : f32" in ir  # steps + min(k2, 3) = 6 + 1, folded while tracing
    assert a.diagnostics == []


def test_f64_math_links_libdevice(analyse):
    """f64 exp/log have no hardware instruction: libdevice is linked into the PTX."""
    a = analyse(HEADER + """
from dsl import f64

@dsl.kernel
def k(x: Tensor[f64]):
    i = dsl.thread_idx.x
    x[i] = dsl.exp(x[i]) + dsl.log(x[i])
""")
    assert "@__nv_exp" in a.stage("k", "lowered") and "@__nv_log" in a.stage("k", "lowered")
    ptx = a.stage("k", "ptx")
    assert ".target sm_90" in ptx and "__nv_" not in ptx  # linked and inlined, no external call
    assert a.report.function("k").compiled.cubin
