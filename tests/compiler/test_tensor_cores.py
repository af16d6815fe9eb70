"""Tensor cores on the CPU: the PTX each operation becomes (assembled by ptxas), and the
diagnostics for operands that do not fit, each with its message and range."""

from __future__ import annotations

import collections
import re

import pytest

from dsl.diagnostics import SourceRange
from dsl.frontend.memory import swizzle_bytes
from dsl.runtime.launch import ArgPacker

HEADER = """
import dsl
from dsl import Constexpr, Int32, Tensor, bf16, f16, f32, i8, i32
"""


def at(a, needle, line_needle=None):
    line = a.line_of(line_needle or needle)
    col = a.source.splitlines()[line - 1].index(needle)
    return SourceRange(a.path, line, col, line, col + len(needle))


def instructions(ptx: str, *prefixes: str) -> collections.Counter:
    return collections.Counter(line.split()[0] for line in ptx.splitlines() if line.strip().startswith(prefixes))


def test_every_mma_input_type_becomes_its_mma_sync(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[bf16], h: Tensor[f16], q: Tensor[i8], e: Tensor[dsl.f8e5m2], o: Tensor[f32], oi: Tensor[i32],
      oh: Tensor[f16]):
    i = dsl.thread_idx.x
    acc = dsl.mma_sync(x.vload(i * 8, 8), x.vload(i * 4, 4), dsl.zeros(dsl.f32, 4))
    acc = dsl.mma_sync(q.vload(i * 16, 16), q.vload(i * 8, 8), dsl.zeros(dsl.i32, 4))
    fp8 = dsl.mma_sync(e.vload(i * 16, 16), e.vload(i * 8, 8), dsl.zeros(dsl.f32, 4))
    half = dsl.mma_sync(h.vload(i * 8, 8), h.vload(i * 4, 4), dsl.zeros(dsl.f16, 4))
    o.vstore(i * 4, fp8)
    oi.vstore(i * 4, acc)
    oh.vstore(i * 4, half)

@dsl.jit
def run(x: Tensor[bf16], h: Tensor[f16], q: Tensor[i8], e: Tensor[dsl.f8e5m2], o: Tensor[f32], oi: Tensor[i32],
        oh: Tensor[f16]):
    k(x, h, q, e, o, oi, oh).launch(grid=1, block=32)
""")
    assert a.codes() == []
    assert instructions(a.stage("run", "ptx"), "mma") == {
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32": 1,
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32": 1,
        "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32": 1,
        "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16": 1,
    }


def test_ldmatrix_cp_async_and_their_groups(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[bf16, 2], o: Tensor[bf16], n: Int32):
    smem = dsl.SharedAllocator()
    buf = smem.array(dsl.bf16, (64, 64), swizzle=128)
    t = dsl.thread_idx.x
    dsl.cp_async(buf, (t // 8, (t % 8) * 8), x, (t // 8, (t % 8) * 8), mask=t < n)
    dsl.cp_async(buf, (t // 8 + 32, (t % 8) * 8), x, (t // 8, (t % 8) * 8), size=8)
    dsl.cp_async_commit()
    dsl.cp_async_wait(0)
    dsl.barrier()
    v = dsl.ldmatrix(buf, (t % 16, 0))
    w = dsl.ldmatrix(buf, (t % 16, 8), count=2, transpose=True)
    u = dsl.ldmatrix(buf, (t % 8, 16), count=1)
    o.vstore(t * 8, v)
    o.vstore(t * 4 + 512, w)
    o.vstore(t * 2 + 1024, u)

@dsl.jit
def run(x: Tensor[bf16, 2], o: Tensor[bf16], n: Int32):
    k(x, o, n).launch(grid=1, block=256)
""")
    assert a.codes() == []
    assert instructions(a.stage("run", "ptx"), "ldmatrix", "cp.async") == {
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16": 1, "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16": 1,
        "ldmatrix.sync.aligned.m8n8.x1.shared.b16": 1, "cp.async.cg.shared.global": 1,
        "cp.async.ca.shared.global": 1, "cp.async.commit_group;": 1, "cp.async.wait_group": 1,
    }
    ptx = a.stage("run", "ptx")
    assert re.search(r"cp\.async\.cg\.shared\.global \[%rd\d+\], \[%rd\d+\], 16, %r\d+;", ptx)  # the zero-fill size
    # the launcher knows the kernel reads x 16 bytes at a time
    assert "TENSOR_ACCESS = {'x': (16, 'k.x', None)" in a.stage("run", "launcher")


def test_swizzle_permutes_16_byte_chunks_within_8_rows():
    assert [swizzle_bytes(row * 128, 128) % 128 // 16 for row in range(8)] == list(range(8))  # chunk 0 of each row
    assert [swizzle_bytes(row * 128 + 16 * 3, 128) % 128 // 16 for row in range(8)] == [3 ^ r for r in range(8)]
    assert swizzle_bytes(1024 + 5, 128) == 1024 + 5  # the pattern repeats every 1024 bytes
    assert [swizzle_bytes(row * 64, 64) % 128 // 16 for row in range(8)] == [0, 4, 1, 5, 2, 6, 3, 7]


GEMM = HEADER + """
@dsl.kernel(target="sm_90a")
def k(ta: dsl.TensorMap, c: Tensor[f32, 2]):
    smem = dsl.SharedAllocator(dynamic=True)
    sa = smem.array(dsl.bf16, (2, 64, 64), swizzle=128)
    bar = smem.array(dsl.u64, (2,))
    t = dsl.thread_idx.x
    if t == 0:
        dsl.mbarrier_init(bar, 0, 1)
        dsl.fence_mbarrier_init()
    dsl.barrier()
    if t == 0:
        dsl.mbarrier_expect_tx(bar, 0, 8192)
        dsl.tma_load(sa, (0,), ta, (0, 0), bar, 0)
    dsl.mbarrier_wait(bar, 0, 0)
    dsl.setmaxnreg(232, increase=True)
    acc = dsl.wgmma(dsl.zeros(dsl.f32, 32), sa, (0, 0), sa, (0, 0))
    acc = dsl.wgmma_wait(acc, pending=0)
    c.vstore((t, 0), acc[0:4])

@dsl.jit
def run(a: Tensor[bf16, 2], c: Tensor[f32, 2]):
    k(dsl.tensor_map(a, box=(64, 64), swizzle=128), c).launch(grid=1, block=128)
"""


def test_hopper_operations_and_the_tensor_map_parameter(analyse):
    a = analyse(GEMM)
    assert a.codes() == []
    ptx = a.stage("run", "ptx")
    assert ".target sm_90a" in ptx  # the kernel says it is written for sm_90a
    assert instructions(ptx, "wgmma", "cp.async.bulk", "mbarrier", "setmaxnreg", "fence") == {
        "wgmma.fence.sync.aligned;": 1, "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16": 4,
        "wgmma.commit_group.sync.aligned;": 1, "wgmma.wait_group.sync.aligned": 1,
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes": 1,
        "mbarrier.init.shared::cta.b64": 1, "mbarrier.arrive.expect_tx.shared::cta.b64": 1,
        "mbarrier.try_wait.parity.shared::cta.b64": 1, "setmaxnreg.inc.sync.aligned.u32": 1,
        "fence.mbarrier_init.release.cluster;": 1,
    }
    assert ".param .align 64 .b8 k_param_0[128]" in ptx  # the map itself, by value
    assert ".extern .shared .align 1024" in ptx  # the swizzle atom's alignment
    launcher = a.stage("run", "launcher")
    assert "rt.kernel('k', ('tmap', 'ptr', 'i32', 'i32', 'i32'))" in launcher
    assert "rt.tensor_map(a_ptr, a_shape, a_strides, 'bf16', (64, 64), 128)" in launcher


def test_a_tensor_map_parameter_has_its_own_128_byte_slot():
    packer = ArgPacker(("i32", "tmap", "ptr"))
    base = packer.ptrs[0]
    assert [p - base for p in packer.ptrs] == [0, 64, 192]
    packer.pack((7, bytes(range(128)), 0xABC))
    assert bytes(packer.buf[64:192]) == bytes(range(128))


def test_wgmma_on_plain_sm_90_is_dsl207_with_the_fix_that_pins_the_kernel(analyse):
    source = GEMM.replace('@dsl.kernel(target="sm_90a")', "@dsl.kernel")
    a = analyse(source)
    diags = [d for d in a.diagnostics if d.code == "DSL207"]
    assert [d.message for d in diags] == [
        "dsl.setmaxnreg needs the target sm_90a (Hopper's architecture-specific instructions); the target is sm_90",
        "dsl.wgmma needs the target sm_90a (Hopper's architecture-specific instructions); the target is sm_90",
    ]
    assert diags[1].range == at(a, "dsl.wgmma(dsl.zeros(dsl.f32, 32), sa, (0, 0), sa, (0, 0))")
    fix = diags[1].fixes[0]
    assert fix.title == "Compile this kernel for sm_90a"
    line = a.line_of("@dsl.kernel")
    assert [(e.range.line, e.range.column, e.range.end_column, e.new_text) for e in fix.edits] == [
        (line, 11, 11, '(target="sm_90a")')]


def test_a_kernel_for_sm_90a_on_another_gpu_is_dsl207(analyse):
    a = analyse(GEMM, target="sm_80")
    diags = [d for d in a.diagnostics if d.code == "DSL207"]
    assert [d.message for d in diags] == [
        "kernel 'k' is written for sm_90a, which runs only on compute capability 9.0; the target is sm_80"]
    assert diags[0].range == at(a, '"sm_90a"')


MMA = HEADER + """
@dsl.kernel
def k(x: Tensor[bf16], o: Tensor[f32]):
    i = dsl.thread_idx.x
    {body}

@dsl.jit
def run(x: Tensor[bf16], o: Tensor[f32]):
    k(x, o).launch(grid=1, block=32)
"""


@pytest.mark.parametrize("body, needle, message", [
    ("o.vstore(i * 4, dsl.mma_sync(x.vload(i * 8, 8), x.vload(i * 8, 8), dsl.zeros(dsl.f32, 4)))",
     "dsl.mma_sync(x.vload(i * 8, 8), x.vload(i * 8, 8), dsl.zeros(dsl.f32, 4))",
     "dsl.mma_sync m16n8k16 with bf16 inputs takes A vector<8xbf16>, B vector<4xbf16> and C vector<4xf32>; got "
     "A vector<8xbf16>, B vector<8xbf16>, C vector<4xf32>"),
    ("o.vstore(i * 4, dsl.mma_sync(x.vload(i * 8, 8), x.vload(i * 4, 4), dsl.zeros(dsl.i32, 4)))",
     "dsl.mma_sync(x.vload(i * 8, 8), x.vload(i * 4, 4), dsl.zeros(dsl.i32, 4))",
     "dsl.mma_sync m16n8k16 with bf16 inputs takes A vector<8xbf16>, B vector<4xbf16> and C vector<4xf32>; got "
     "A vector<8xbf16>, B vector<4xbf16>, C vector<4xi32>"),
    ("o.vstore(i * 4, dsl.mma_sync(x[i], x.vload(i * 4, 4), dsl.zeros(dsl.f32, 4)))",
     "dsl.mma_sync(x[i], x.vload(i * 4, 4), dsl.zeros(dsl.f32, 4))",
     "dsl.mma_sync operand a must be a fragment (a vector), not bf16"),
])
def test_fragments_that_do_not_fit_the_mma(analyse, body, needle, message):
    a = analyse(MMA.format(body=body))
    diags = [d for d in a.diagnostics if d.code == "DSL301"]
    assert [d.message for d in diags] == [message]
    assert diags[0].range == at(a, needle)


SMEM = HEADER + """
@dsl.kernel(target="sm_90a")
def k(x: Tensor[bf16, 2], ta: dsl.TensorMap, o: Tensor[bf16]):
    smem = dsl.SharedAllocator(dynamic=True)
    plain = smem.array(dsl.bf16, (64, 36))
    flat = smem.array(dsl.bf16, (2, 64, 64))
    bar = smem.array(dsl.u64, (1,))
    t = dsl.thread_idx.x
    {body}

@dsl.jit
def run(x: Tensor[bf16, 2], o: Tensor[bf16]):
    k(x, dsl.tensor_map(x, box=(64, 64), swizzle=128), o).launch(grid=1, block=128)
"""


@pytest.mark.parametrize("body, needle, message", [
    ("o.vstore(t * 8, dsl.ldmatrix(plain, (t % 16, 0)))", "dsl.ldmatrix(plain, (t % 16, 0))",
     "dsl.ldmatrix needs 16-byte aligned addresses, but the rows of shared bf16[64, 36] are 72 bytes; pad the "
     "inner extent to a multiple of 8 elements"),
    ("o.vstore(t * 8, dsl.ldmatrix(flat, (0, 3, 4)))", "dsl.ldmatrix(flat, (0, 3, 4))",
     "dsl.ldmatrix at element offset 196 of shared bf16[2, 64, 64] is not 16-byte aligned"),
    ("dsl.tma_load(flat, (0,), ta, (0, 0), bar, 0)", "dsl.tma_load(flat, (0,), ta, (0, 0), bar, 0)",
     "dsl.tma_load: the tensor map is 128-byte swizzled but shared bf16[2, 64, 64] is not swizzled; allocate it "
     "with swizzle=128"),
    ("acc = dsl.wgmma(dsl.zeros(dsl.f32, 32), flat, (0, 0), flat, (0, 0))",
     "dsl.wgmma(dsl.zeros(dsl.f32, 32), flat, (0, 0), flat, (0, 0))",
     "dsl.wgmma (B) reads tiles with a 128-byte swizzle; allocate shared bf16[2, 64, 64] with swizzle=128 "
     "(rows of 64 elements)"),
])
def test_shared_memory_that_does_not_fit_ldmatrix_tma_or_wgmma(analyse, body, needle, message):
    a = analyse(SMEM.format(body=body))
    diags = [d for d in a.diagnostics if d.code == "DSL301"]
    assert [d.message for d in diags] == [message]
    assert diags[0].range == at(a, needle)


@pytest.mark.parametrize("call, message", [
    ("dsl.tensor_map(x, box=(512, 64), swizzle=128)",
     "dsl.tensor_map box dimension 0 is 512; TMA boxes are 1 to 256 elements per dimension"),
    ("dsl.tensor_map(x, box=(64, 4))",
     "dsl.tensor_map box inner extent is 8 bytes (4 x bf16); TMA needs a multiple of 16 bytes"),
    ("dsl.tensor_map(x, box=(64, 128), swizzle=128)",
     "dsl.tensor_map box inner extent is 256 bytes, more than its 128-byte swizzle; use at most 64 elements"),
    ("dsl.tensor_map(x, box=(64,))",
     "dsl.tensor_map box needs 2 compile-time ints (outer to inner) for a rank-2 tensor, got (64,)"),
])
def test_tma_box_limits(analyse, call, message):
    a = analyse(SMEM.format(body="pass").replace("dsl.tensor_map(x, box=(64, 64), swizzle=128)", call))
    diags = [d for d in a.diagnostics if d.code == "DSL301"]
    assert [d.message for d in diags] == [message]
    assert diags[0].range == at(a, call)


def test_a_swizzled_array_needs_rows_of_the_swizzle_width(analyse):
    a = analyse(SMEM.format(body="bad = smem.array(dsl.bf16, (64, 32), swizzle=128)"))
    diags = [d for d in a.diagnostics if d.code == "DSL301"]
    assert [d.message for d in diags] == [
        "a 128-byte swizzled array has rows of exactly 128 bytes (64 x bf16); got shape [64, 32]"]
    assert diags[0].range == at(a, "smem.array(dsl.bf16, (64, 32), swizzle=128)")


def test_accumulators_that_spill_are_dsl501_with_the_bytes(analyse):
    a = analyse(HEADER + """
@dsl.kernel(maxnreg=32)
def k(x: Tensor[bf16], o: Tensor[f32]):
    i = dsl.thread_idx.x
    accs = [dsl.zeros(dsl.f32, 4) for _ in dsl.static_range(16)]
    for step in range(64):
        for j in dsl.static_range(16):
            accs[j] = dsl.mma_sync(x.vload(step * 8 + j * 512, 8), x.vload(step * 4, 4), accs[j])
    for j in dsl.static_range(16):
        o.vstore(i * 64 + j * 4, accs[j])

@dsl.jit
def run(x: Tensor[bf16], o: Tensor[f32]):
    k(x, o).launch(grid=1, block=32)
""")
    diags = [d for d in a.diagnostics if d.code == "DSL501"]
    assert len(diags) == 1
    res = a.report.function("run").compiled.resources["k"]
    assert res.spill_stores > 0 and res.registers <= 32
    assert diags[0].message == (f"kernel 'k' spills registers: {res.spill_stores} bytes stored, {res.spill_loads} "
                                f"bytes loaded ({res.registers} registers)")
    assert diags[0].range == at(a, "k", "def k(")


def test_fp8_mma_needs_sm_89(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(e: Tensor[dsl.f8e4m3], o: Tensor[f32]):
    i = dsl.thread_idx.x
    o.vstore(i * 4, dsl.mma_sync(e.vload(i * 16, 16), e.vload(i * 8, 8), dsl.zeros(dsl.f32, 4)))

@dsl.jit
def run(e: Tensor[dsl.f8e4m3], o: Tensor[f32]):
    k(e, o).launch(grid=1, block=32)
""", target="sm_80")
    diags = [d for d in a.diagnostics if d.code == "DSL301"]
    assert [d.message for d in diags] == ["dsl.mma_sync on fp8 needs sm_89 or newer; the target is sm_80"]
    assert diags[0].range == at(a, "dsl.mma_sync(e.vload(i * 16, 16), e.vload(i * 8, 8), dsl.zeros(dsl.f32, 4))")


def test_the_ir_views_map_the_tensor_core_ops_to_their_python_lines(analyse):
    a = analyse(GEMM)
    compiled = a.report.function("run").compiled
    line = a.line_of("acc = dsl.wgmma(dsl.zeros")
    for stage, needle in (("traced", "wgmma.mma_async"), ("lowered", "wgmma.mma_async"), ("ptx", "wgmma.mma_async"),
                          ("ptx", "cp.async.bulk.tensor.2d")):
        text = compiled.stages[stage].splitlines()
        lines = [i for i, t in enumerate(text) if needle in t]
        assert lines, (stage, needle)
        ranges = {compiled.source_maps[stage].range_for(i) for i in lines} - {None}
        want = line if needle.startswith("wgmma") else a.line_of("dsl.tma_load(sa")
        assert {r.line for r in ranges} == {want}, (stage, needle, ranges)


def test_the_resource_summary_gives_the_tensor_core_instruction_mix_from_sass(analyse):
    a = analyse(GEMM)
    res = a.report.function("run").compiled.resources["k"]
    assert res.tensor_cores == {"HGMMA": 4}  # one per wgmma.mma_async of the PTX
    assert res.summary().endswith(", tensor cores 4 HGMMA")
    plain = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], o: Tensor[f32]):
    o[dsl.thread_idx.x] = x[dsl.thread_idx.x]
""", name="plain.py")
    assert plain.report.function("k").compiled.kernels[0].resources.tensor_cores == {}


def test_named_barriers_sync_and_arrive_with_static_and_run_time_ids(analyse):
    a = analyse('''
import dsl
from dsl import Tensor, f32

@dsl.kernel(known_block_size=[384, 1, 1])
def k(x: Tensor[f32]):
    warpgroup = dsl.thread_idx.x // 128
    if warpgroup == 1:
        dsl.named_barrier_arrive(2, 256)
        dsl.named_barrier(1, 256)
    if warpgroup == 2:
        dsl.named_barrier(warpgroup, 256)
        dsl.named_barrier_arrive(3 - warpgroup, 256)
    x[0] = 1.0
''')
    assert a.codes() == []
    ptx = a.stage("k", "ptx")
    lines = [re.sub(r"%r\d+", "%r", " ".join(line.split())) for line in ptx.splitlines()
             if line.strip().startswith("bar.")]
    assert sorted(lines) == ["bar.arrive %r, 256;", "bar.arrive 2, 256;", "bar.sync %r, 256;", "bar.sync 1, 256;"]


def test_a_named_barrier_id_out_of_range_is_an_error_at_the_call(analyse):
    a = analyse('''
import dsl
from dsl import Tensor, f32

@dsl.kernel
def k(x: Tensor[f32]):
    dsl.named_barrier_arrive(16, 64)
''')
    assert a.codes() == ["DSL301"]
    d = a.report.all_diagnostics()[0]
    assert "dsl.named_barrier_arrive id must be 1 to 15" in d.message
    assert d.range.line == a.line_of("named_barrier_arrive(16")


def test_the_launcher_knows_tma_loads_read_their_tensor_and_tma_stores_write_it(analyse):
    a = analyse(HEADER + """
@dsl.kernel(target="sm_90a")
def k(ta: dsl.TensorMap, tc: dsl.TensorMap):
    smem = dsl.SharedAllocator(dynamic=True)
    tile = smem.array(dsl.bf16, (1, 64, 64), swizzle=128)
    bar = smem.array(dsl.u64, (1,))
    if dsl.thread_idx.x == 0:
        dsl.mbarrier_init(bar, 0, 1)
        dsl.fence_mbarrier_init()
        dsl.mbarrier_expect_tx(bar, 0, 8192)
        dsl.tma_load(tile, (0,), ta, (0, 0), bar, 0)
        dsl.mbarrier_wait(bar, 0, 0)
        dsl.fence_proxy_async()
        dsl.tma_store(tc, (0, 0), tile, (0,))
        dsl.tma_store_commit()
        dsl.tma_store_wait(0)

@dsl.jit
def run(a: Tensor[bf16, 2], c: Tensor[bf16, 2]):
    k(dsl.tensor_map(a, box=(64, 64), swizzle=128), dsl.tensor_map(c, box=(64, 64), swizzle=128)).launch(
        grid=1, block=128)
""")
    assert a.codes() == []
    launcher = a.stage("run", "launcher")
    assert "TENSOR_ACCESS = {'a': (16, 'k.ta', None), 'c': (16, 'k.tc', 'k.tc')}" in launcher


REDUCE = HEADER + """
@dsl.kernel(target="sm_90a")
def k(ty: dsl.TensorMap):
    smem = dsl.SharedAllocator(dynamic=True)
    tile = smem.array(dsl.{dtype}, (32, {cols}), swizzle=128)
    dsl.fence_proxy_async()
    dsl.tma_reduce(ty, (0, 0), tile, (), {op!r})

@dsl.jit
def run(y: Tensor[{dtype}, 2]):
    k(dsl.tensor_map(y, box=(32, {cols}), swizzle=128)).launch(grid=1, block=128, smem=4096)
"""


def test_a_tma_reduction_writes_its_tensor(analyse):
    a = analyse(REDUCE.format(dtype="f32", op="add", cols=32))
    assert a.codes() == []
    assert "TENSOR_ACCESS = {'y': (16, 'k.ty', 'k.ty')}" in a.stage("run", "launcher")
    assert "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group" in a.stage("run", "ptx")


@pytest.mark.parametrize(("dtype", "op", "message"), [
    ("f32", "mul", "dsl.tma_reduce op must be one of 'add', 'min', 'max', not 'mul'"),
    ("f32", "max", "dsl.tma_reduce 'max' takes a tensor map of i32 or u32, not of f32"),
    ("f16", "add", "dsl.tma_reduce 'add' takes a tensor map of f32, i32 or u32, not of f16"),
])
def test_a_tma_reduction_the_hardware_lacks_is_refused_at_its_call(analyse, dtype, op, message):
    a = analyse(REDUCE.format(dtype=dtype, op=op, cols=128 // (2 if dtype == "f16" else 4)))
    assert a.codes() == ["DSL301"], [d.format() for d in a.diagnostics]
    d = a.report.all_diagnostics()[0]
    assert message in d.message
    assert d.range.line == a.line_of("dsl.tma_reduce(")
