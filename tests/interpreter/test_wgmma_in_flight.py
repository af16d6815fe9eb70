"""wgmma accumulators in flight in the interpreter: poisoned until the wait that retires their
group, so a kernel that reads one early fails here as it would be wrong on the GPU.

The compiler refuses such kernels (DSL305), so the racing ones here are compiled with that
check switched off (`check_accumulator_reads` patched, the disk cache off): the interpreter's
own model must catch them at the read. Kernels that wait correctly, with one group or two in
flight and through a pipelined loop, give the product D = A A^T of a 64 x 64 bf16 tile.
"""

from __future__ import annotations

import numpy as np
import pytest

import dsl
from dsl import Constexpr, Int32, Tensor, bf16, f32
from dsl.interpreter import bits
from dsl.runtime.driver import LaunchError

RNG = np.random.default_rng(3)


def line_of(text: str) -> int:
    with open(__file__) as f:
        return next(n for n, line in enumerate(f, 1) if text in line)


def fill(sa, a, t):
    """The 64 x 64 tile of `a` into the swizzled shared array, then visible to the tensor cores."""
    for e in dsl.static_range(32):
        sa[t // 2, (t % 2) * 32 + e] = a[t // 2, (t % 2) * 32 + e]
    dsl.fence_proxy_async()
    dsl.barrier()


def store(c, t, acc):
    for e in dsl.static_range(32):
        c[t, e] = acc[e]


@dsl.kernel(target="sm_90a")
def racing(a: Tensor[bf16, 2], c: Tensor[f32, 2], PENDING: Constexpr[int]):
    smem = dsl.SharedAllocator(dynamic=True)
    sa = smem.array(bf16, (64, 64), swizzle=128)
    t = dsl.thread_idx.x
    fill(sa, a, t)
    acc = dsl.wgmma(dsl.zeros(f32, 32), sa, (0,), sa, (0,))
    if dsl.const_expr(PENDING >= 0):
        acc = dsl.wgmma_wait(acc, pending=PENDING)
    c[t, 0] = acc[0] * 1.0  # the read: early unless PENDING is 0


@dsl.jit
def run_racing(a: Tensor[bf16, 2], c: Tensor[f32, 2], PENDING: Constexpr[int] = 0):
    racing(a, c, PENDING).launch(grid=1, block=128)


@dsl.jit
def run_racing_unchecked(a: Tensor[bf16, 2], c: Tensor[f32, 2], PENDING: Constexpr[int] = 0):
    """The same launch, a function of its own: what it compiles unchecked is cached only for it."""
    racing(a, c, PENDING).launch(grid=1, block=128)


@dsl.kernel(target="sm_90a")
def two_groups(a: Tensor[bf16, 2], c: Tensor[f32, 2], d: Tensor[f32, 2], n: Int32):
    smem = dsl.SharedAllocator(dynamic=True)
    sa = smem.array(bf16, (64, 64), swizzle=128)
    t = dsl.thread_idx.x
    fill(sa, a, t)
    first = dsl.wgmma(dsl.zeros(f32, 32), sa, (0,), sa, (0,))
    second = dsl.wgmma(dsl.zeros(f32, 32), sa, (0,), sa, (0,))  # a newer group than `first`'s on every path
    for _ in range(n):  # n more products of A A^T into `second`, pipelined one group deep
        second = dsl.wgmma(second, sa, (0,), sa, (0,))
        second = dsl.wgmma_wait(second, pending=1)
    first, second = dsl.wgmma_wait((first, second), pending=1)
    store(c, t, first)  # retired: older than the newest group
    second = dsl.wgmma_wait(second)
    store(d, t, second)


@dsl.jit
def run_two_groups(a: Tensor[bf16, 2], c: Tensor[f32, 2], d: Tensor[f32, 2]):
    two_groups(a, c, d, 2).launch(grid=1, block=128)


def product(a_bits: np.ndarray) -> np.ndarray:
    a = (a_bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return a @ a.T


def per_thread(d: np.ndarray) -> np.ndarray:
    """D (64 x 64) as each thread of the warpgroup holds it: lanes 4j, 4j+1 at row 16w + g, 4j+2,
    4j+3 at row 16w + g + 8, columns 8j + 2q, +1."""
    t = np.arange(128)[:, None]
    e = np.arange(32)[None, :]
    rows = 16 * (t // 32) + (t % 32) // 4 + 8 * ((e // 2) % 2)
    cols = 8 * (e // 4) + 2 * (t % 4) + e % 2
    return d[rows, cols]


def tile() -> np.ndarray:
    values = RNG.integers(-4, 5, (64, 64)).astype(np.float32)  # small integers: every sum is exact
    return (values.view(np.uint32) >> 16).astype(np.uint16)


def test_waiting_with_two_groups_in_flight_retires_the_older():
    a = tile()
    c, d = np.zeros((128, 64), dtype=np.float32), np.zeros((128, 64), dtype=np.float32)
    dsl.interpret(run_two_groups, bits(a, dsl.bf16), c, d)
    np.testing.assert_array_equal(c[:, :32], per_thread(product(a)))
    np.testing.assert_array_equal(d[:, :32], per_thread(3 * product(a)))


def test_a_wait_of_zero_gives_the_product():
    a = tile()
    c = np.zeros((128, 64), dtype=np.float32)
    dsl.interpret(run_racing, bits(a, dsl.bf16), c)
    np.testing.assert_array_equal(c[:, 0], per_thread(product(a))[:, 0])


@pytest.fixture
def unchecked(monkeypatch):
    """Kernels compiled without the compiler's DSL305 check, kept in no cache (on disk or in
    memory) where a checked compile would find them."""
    import dsl.frontend.kernel_tracer as kernel_tracer
    from dsl.compiler.cache import MEMORY

    monkeypatch.setenv("KDSL_NO_DISK_CACHE", "1")
    monkeypatch.setattr(kernel_tracer, "check_accumulator_reads", lambda tracer, func: [])
    MEMORY.clear()
    yield
    MEMORY.clear()


@pytest.mark.parametrize("pending", [-1, 1])  # no wait at all; a wait that leaves the only group running
def test_a_read_before_the_wait_faults_at_the_read(unchecked, pending):
    a = tile()
    with pytest.raises(LaunchError) as caught:
        dsl.interpret(run_racing_unchecked, bits(a, dsl.bf16), np.zeros((128, 64), dtype=np.float32), pending)
    message = str(caught.value).splitlines()[0]
    issued = line_of("acc = dsl.wgmma(dsl.zeros(f32, 32)")
    assert (f"read of a wgmma accumulator still in flight: the dsl.wgmma at test_wgmma_in_flight.py:{issued} has "
            "not been waited for by a dsl.wgmma_wait that returned this value and retired its group") in message
    assert "by thread (0, 0, 0) of block (0, 0, 0)" in message
    assert caught.value.diagnostic.code == "DSL601"
    assert caught.value.diagnostic.range.line == line_of("# the read: early")


def test_the_compiler_refuses_what_the_interpreter_would_fault_on():
    with pytest.raises(dsl.CompileError) as caught:
        dsl.interpret(run_racing, bits(tile(), dsl.bf16), np.zeros((128, 64), dtype=np.float32), 1)
    (race,) = caught.value.diagnostics
    assert race.code == "DSL305" and race.range.line == line_of("# the read: early")
