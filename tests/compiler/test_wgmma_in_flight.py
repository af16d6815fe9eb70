"""DSL305: reading a wgmma accumulator before the `dsl.wgmma_wait` that retires its group.

Each refused kernel is refused at the read (line and column of the expression that reads),
with the wgmma (and the wait that left it running) as related information and a quick fix
that waits first; the kernel with the fix applied compiles. Pipelined kernels that wait
correctly compile: `wait(pending=1)` after issuing the next group, through unrolled and
run-time loops and branches.
"""

from __future__ import annotations

import pytest

from dsl.diagnostics import SourceRange

KERNEL = """
import dsl
from dsl import Int32, Tensor, bf16, f32


def scaled(v):
    return v * 2.0


@dsl.kernel(target="sm_90a")
def k(a: Tensor[bf16, 2], c: Tensor[f32, 2], n: Int32):
    smem = dsl.SharedAllocator(dynamic=True)
    sa = smem.array(dsl.bf16, (2, 64, 64), swizzle=128)
    t = dsl.thread_idx.x
    for e in dsl.static_range(32):
        sa[0, t // 2, (t % 2) * 32 + e] = a[t // 2, (t % 2) * 32 + e]
    dsl.fence_proxy_async()
    dsl.barrier()
    zero = dsl.zeros(dsl.f32, 32)
{body}


@dsl.jit
def run(a: Tensor[bf16, 2], c: Tensor[f32, 2]):
    k(a, c, a.shape[0]).launch(grid=1, block=128)
"""


def source(body: str) -> str:
    return KERNEL.format(body="\n".join("    " + line for line in body.strip("\n").splitlines()))


def at(a, needle, line_needle=None):
    line = a.line_of(line_needle or needle)
    col = a.source.splitlines()[line - 1].index(needle)
    return SourceRange(a.path, line, col, line, col + len(needle))


def races(a):
    return [d for d in a.diagnostics if d.code == "DSL305"]


def errors(a):
    """The error codes (a warpgroup of 128 threads with 100+ registers is also DSL502, an info)."""
    return [d.code for d in a.diagnostics if d.is_error]


def apply(a, fix) -> str:
    """The source with a fix's insertions applied (each at the start of a line)."""
    lines = a.source.splitlines(keepends=True)
    for edit in sorted(fix.edits, key=lambda e: -e.range.line):
        assert edit.range.column == 0 and edit.range.end_line == edit.range.line
        lines.insert(edit.range.line - 1, edit.new_text)
    return "".join(lines)


def test_a_read_before_the_wait_is_refused_at_the_read_with_the_fix(analyse):
    a = analyse(source("""
acc = dsl.wgmma(zero, sa, (0, 0), sa, (0, 0))
c[t, 0] = acc[3] + 1.0
"""))
    (race,) = races(a)
    assert race.severity.value == "error"
    assert race.range == at(a, "acc[3]")
    issued = a.line_of("acc = dsl.wgmma(")
    assert race.message == (
        f"reads a wgmma accumulator that may still be in flight (it comes from the dsl.wgmma at line {issued} "
        "and has not been through a dsl.wgmma_wait): the tensor cores may still be writing its registers, a "
        "race on the GPU. Wait first and read what the wait returns: `acc = dsl.wgmma_wait(acc)` (pending=0 "
        "waits for every group)")
    assert [(r.range, r.message) for r in race.related] == [
        (at(a, "dsl.wgmma(zero, sa, (0, 0), sa, (0, 0))"), "the wgmma whose group may still run")]
    (fix,) = race.fixes
    assert fix.title == "Wait for 'acc' before reading it"
    assert [(e.range.line, e.new_text) for e in fix.edits] == [
        (a.line_of("c[t, 0] = acc[3]"), "    acc = dsl.wgmma_wait(acc)\n")]
    fixed = analyse(apply(a, fix), name="fixed.py")
    assert errors(fixed) == []


@pytest.mark.parametrize("body, needle", [
    # the wait's result dropped: `acc` itself never went through it
    ("acc = dsl.wgmma(zero, sa, (0, 0), sa, (0, 0))\ndsl.wgmma_wait(acc)\nc.vstore((t, 0), acc[0:4])", "acc[0:4]"),
    # a conversion, a whole-vector operation, a shuffle and a print read it too
    ("acc = dsl.wgmma(zero, sa, (0, 0), sa, (0, 0))\nh = dsl.cast(acc, dsl.bf16)", "dsl.cast(acc, dsl.bf16)"),
    ("acc = dsl.wgmma(zero, sa, (0, 0), sa, (0, 0))\nacc = acc * 0.5\nacc = dsl.wgmma_wait(acc)", "acc * 0.5"),
    ("acc = dsl.wgmma(zero, sa, (0, 0), sa, (0, 0))\nc[t, 1] = dsl.shfl_xor(acc[1], 1)", "acc[1]"),
    ("acc = dsl.wgmma(zero, sa, (0, 0), sa, (0, 0))\nprint(acc[2])", "acc[2]"),
    # in a helper: at the helper's own line
    ("acc = dsl.wgmma(zero, sa, (0, 0), sa, (0, 0))\nc[t, 2] = scaled(acc[0])\nc[t, 3] = scaled(acc)[0]",
     "v * 2.0"),
])
def test_every_kind_of_read_is_refused(analyse, body, needle):
    a = analyse(source(body))
    assert [d.range for d in races(a)] == [at(a, needle)]


def test_a_wait_that_leaves_the_group_running_says_which(analyse):
    """pending=1 right after the only group: that group is the one it lets run."""
    a = analyse(source("""
acc = dsl.wgmma(zero, sa, (0, 0), sa, (0, 0))
acc = dsl.wgmma_wait(acc, pending=1)
c[t, 0] = acc[0]
"""))
    (race,) = races(a)
    assert race.range == at(a, "acc[0]")
    waited, issued = a.line_of("pending=1"), a.line_of("acc = dsl.wgmma(")
    assert (f"(the dsl.wgmma_wait at line {waited} leaves the 1 most recent wgmma group running, and the "
            f"dsl.wgmma at line {issued} is one of them)") in race.message
    assert [r.message for r in race.related] == ["the wgmma whose group may still run",
                                                 "this wait leaves the 1 most recent wgmma group in flight"]
    assert race.related[1].range == at(a, "dsl.wgmma_wait(acc, pending=1)")


def test_wait_one_retires_every_group_but_the_newest(analyse):
    """Two groups in flight: `pending=1` retires the older, which may be read; the newer may not."""
    ok = analyse(source("""
first = dsl.wgmma(zero, sa, (0, 0), sa, (0, 0))
second = dsl.wgmma(zero, sa, (0, 0), sa, (0, 0))
first, second = dsl.wgmma_wait((first, second), pending=1)
c[t, 0] = first[0]
second = dsl.wgmma_wait(second)
c[t, 1] = second[0]
"""))
    assert errors(ok) == []
    bad = analyse(source("""
first = dsl.wgmma(zero, sa, (0, 0), sa, (0, 0))
second = dsl.wgmma(zero, sa, (0, 0), sa, (0, 0))
first, second = dsl.wgmma_wait((first, second), pending=1)
c[t, 1] = second[0]
"""), name="bad.py")
    assert [d.range for d in races(bad)] == [at(bad, "second[0]")]


def test_a_pipelined_run_time_loop_compiles_and_its_mistakes_do_not(analyse):
    """The Hopper GEMM's loop: issue, wait(pending=1) (the previous step is done), chain into the
    next step; wait(0) after the loop. Reading the carried accumulator in the loop, or after it
    without the last wait, is refused."""
    pipelined = """
acc = zero
for i in range(n):
    acc = dsl.wgmma(acc, sa, (0, 0), sa, (0, 0))
    acc = dsl.wgmma_wait(acc, pending=1)
{after}
c[t, 0] = acc[0]
"""
    assert errors(analyse(source(pipelined.format(after="acc = dsl.wgmma_wait(acc)")))) == []
    early = analyse(source(pipelined.format(after="")), name="early.py")
    assert [d.range for d in races(early)] == [at(early, "acc[0]")]
    inside = analyse(source("""
acc = zero
for i in range(n):
    c[t, 1] = acc[1]
    acc = dsl.wgmma(acc, sa, (0, 0), sa, (0, 0))
    acc = dsl.wgmma_wait(acc, pending=1)
acc = dsl.wgmma_wait(acc)
"""), name="inside.py")
    assert [d.range for d in races(inside)] == [at(inside, "acc[1]")]


def test_the_attention_pattern_two_groups_a_turn(analyse):
    """S_j issued, then P V behind it; wait(pending=1) retires S_j only, which is read while
    P V runs; P V is waited for before the rescale. Unrolled (static_range) and in a run-time loop."""
    for loop in ("dsl.static_range(3)", "range(n)"):
        a = analyse(source(f"""
o = zero
for j in {loop}:
    s = dsl.wgmma(zero, sa, (0, 0), sa, (0, 0))
    o = dsl.wgmma(o, sa, (0, 0), sa, (1, 0))
    s = dsl.wgmma_wait(s, pending=1)
    p = s * 0.5
    o = dsl.wgmma_wait(o, pending=0)
    o = o * p[0]
c.vstore((t, 0), o[0:4])
"""), name=f"attention_{len(loop)}.py")
        assert errors(a) == [], [d.format() for d in a.diagnostics]


def test_a_group_issued_on_one_branch_must_be_waited_for_after_the_join(analyse):
    branch = """
acc = zero
if t < n:
    acc = dsl.wgmma(acc, sa, (0, 0), sa, (0, 0))
{wait}
c[t, 0] = acc[0]
"""
    a = analyse(source(branch.format(wait="")))
    assert [d.range for d in races(a)] == [at(a, "acc[0]")]
    assert errors(analyse(source(branch.format(wait="acc = dsl.wgmma_wait(acc)")), name="waited.py")) == []
