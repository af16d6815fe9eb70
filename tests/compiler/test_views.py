"""Reinterpreting views (`t.view(dtype)` of tensors and shared arrays) and 8-bit operands of
ldmatrix: what they compile to, what the launcher learns of the tensor behind a view, and the
diagnostics (message and range) for views and operands that do not fit."""

from __future__ import annotations

import collections

import pytest

from dsl.diagnostics import SourceRange

HEADER = """
import dsl
from dsl import Int32, Tensor, f32, i8, i16, i32
"""


def at(a, needle):
    line = a.line_of(needle)
    col = a.source.splitlines()[line - 1].index(needle)
    return SourceRange(a.path, line, col, line, col + len(needle))


def instructions(ptx: str, *prefixes: str) -> collections.Counter:
    return collections.Counter(line.split()[0] for line in ptx.splitlines() if line.strip().startswith(prefixes))


def test_a_tensor_view_reads_the_parameter_at_the_new_width(analyse):
    """Through `x.view(dsl.i32)` an i8 tensor is read four bytes at a time: the launcher asks
    its pointer and outer strides for 4-byte alignment; the i16 view of `y` is written."""
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[i8, 2], y: Tensor[i8, 2], n: Tensor[i32]):
    t = dsl.thread_idx.x
    words = x.view(dsl.i32)
    halves = y.view(dsl.i16)
    halves[0, t] = dsl.cast(words[1, t] + words.shape[1] + words.strides[0], dsl.i16)
    n[t] = halves.shape[1]

@dsl.jit
def run(x: Tensor[i8, 2], y: Tensor[i8, 2], n: Tensor[i32]):
    k(x, y, n).launch(grid=1, block=32)
""")
    assert a.codes() == []
    assert "TENSOR_ACCESS = {'x': (4, 'k.x', None), 'y': (2, 'k.y', 'k.y'), 'n': (4, 'k.n', 'k.n')}" in \
        a.stage("run", "launcher")


@pytest.mark.parametrize("element, acc, mma", [
    ("dsl.i8", "dsl.i32", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"),
    ("dsl.u8", "dsl.i32", "mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32"),
    ("dsl.f8e4m3", "dsl.f32", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"),
])
def test_ldmatrix_loads_8_bit_tiles_for_mma_sync_m16n8k32(analyse, element, acc, mma):
    """An 8-bit shared tile, filled by cp.async from a tensor of its type, goes to ldmatrix as
    it is: its x4 result is the m16n8k32 A fragment (vector<16>), an x2 the B fragment."""
    a = analyse(HEADER + f"""
@dsl.kernel
def k(x: Tensor[{element}, 2], y: Tensor[{element}, 2], o: Tensor[{acc}, 2]):
    smem = dsl.SharedAllocator()
    sa = smem.array({element}, (16, 32))
    sb = smem.array({element}, (8, 32), swizzle=32)
    lane = dsl.thread_idx.x
    dsl.cp_async(sa, (lane // 2, (lane % 2) * 16), x, (lane // 2, (lane % 2) * 16))
    if lane < 16:
        dsl.cp_async(sb, (lane // 2, (lane % 2) * 16), y, (lane // 2, (lane % 2) * 16))
    dsl.cp_async_commit()
    dsl.cp_async_wait(0)
    dsl.barrier()
    fa = dsl.ldmatrix(sa, (lane % 16, (lane // 16) * 16))
    fb = dsl.ldmatrix(sb, (lane % 8, ((lane // 8) % 2) * 16), count=2)
    acc = dsl.mma_sync(fa, fb, dsl.zeros({acc}, 4))
    o.vstore((lane // 4, (lane % 4) * 2), acc[0:2])
    o.vstore((lane // 4 + 8, (lane % 4) * 2), acc[2:4])

@dsl.jit
def run(x: Tensor[{element}, 2], y: Tensor[{element}, 2], o: Tensor[{acc}, 2]):
    k(x, y, o).launch(grid=1, block=32)
""")
    assert a.codes() == []
    assert instructions(a.stage("run", "ptx"), "ldmatrix", "mma") == {
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16": 1, "ldmatrix.sync.aligned.m8n8.x2.shared.b16": 1, mma: 1}


SHARED = HEADER + """
@dsl.kernel
def k(x: Tensor[i8, 2], o: Tensor[i32]):
    smem = dsl.SharedAllocator()
    odd = smem.array(dsl.i8, (16, 6))
    loose = smem.array(dsl.i8, (16, 32), align=2)
    words = smem.array(dsl.f32, (16, 32))
    tile = smem.array(dsl.i16, (16, 16))
    t = dsl.thread_idx.x
    {body}

@dsl.jit
def run(x: Tensor[i8, 2], o: Tensor[i32]):
    k(x, o).launch(grid=1, block=32)
"""


@pytest.mark.parametrize("body, needle, message", [
    ("o[t] = dsl.cast(odd.view(dsl.i32)[0, 0], dsl.i32)", "odd.view(dsl.i32)",
     "shared i8[16, 6] viewed as i32: its rows are 6 bytes, not a whole number of 4-byte i32 elements; pad "
     "the inner extent to a multiple of 4 elements"),
    ("o[t] = loose.view(dsl.i32)[0, 0]", "loose.view(dsl.i32)",
     "shared i8[16, 32] viewed as i32: the array is 2-byte aligned, i32 elements need 4; allocate it with "
     "align=4"),
    ("o[t] = dsl.cast(tile.view(dsl.boolean)[0, 0], dsl.i32)", "tile.view(dsl.boolean)",
     ".view() takes a DSL element type (dsl.i8, dsl.u16, dsl.bf16, ...), not bool"),
    ("o[t] = x.view(4)[0, 0]", "x.view(4)",
     ".view() takes a DSL element type (dsl.i8, dsl.u16, dsl.bf16, ...), not Python int"),
    ("o.vstore(t * 4, dsl.ldmatrix(words, (t % 16, 0)))", "dsl.ldmatrix(words, (t % 16, 0))",
     "dsl.ldmatrix loads 16-bit or 8-bit elements from a shared array, not shared f32[16, 32]; to move its "
     "bytes as 16-bit elements, view it: `.view(dsl.u16)`"),
    ("o.vstore(t * 4, dsl.ldmatrix(loose, (t % 16, 0), count=2, transpose=True))",
     "dsl.ldmatrix(loose, (t % 16, 0), count=2, transpose=True)",
     "dsl.ldmatrix transpose=True moves 16-bit elements, so it cannot transpose the 8-bit shared i8[16, 32]; "
     "mma_sync m16n8k32 takes B stored N x K (K contiguous), which ldmatrix loads untransposed"),
    ("dsl.cp_async(tile, (t % 16, 0), x, (t, 0))", "dsl.cp_async(tile, (t % 16, 0), x, (t, 0))",
     "dsl.cp_async from Tensor[i8, 2] into shared i16[16, 16]: the element types differ; view one as the "
     "other's type: `x.view(dsl.i16)` (the tensor) or `.view(dsl.i8)` on the shared array"),
])
def test_views_and_operands_that_do_not_fit(analyse, body, needle, message):
    a = analyse(SHARED.format(body=body))
    diags = [d for d in a.diagnostics if d.code == "DSL301"]
    assert [d.message for d in diags] == [message]
    assert diags[0].range == at(a, needle)


def test_the_fixes_the_messages_name_compile(analyse):
    """What the cp.async message proposes, both ways, and the u16 view ldmatrix proposes."""
    a = analyse(SHARED.format(body="""dsl.cp_async(tile, (t % 16, 0), x.view(dsl.i16), (t, 0))
    dsl.cp_async(tile.view(dsl.i8), (t % 16, 0), x, (t, 0))
    dsl.cp_async_commit()
    dsl.cp_async_wait(0)
    o.vstore(t * 4, dsl.ldmatrix(words.view(dsl.u16), (t % 16, 0)).to(dsl.i32)[0:4])"""))
    assert a.codes() == []
