"""The interpreter's deadlock report names each mbarrier as the kernel's source writes it
(issue 28, item 6): `empty[s - 1]` from the waiting call, and, for an array of its own in a
static SharedAllocator, the element it is, where the report said `0x30430` before."""

from __future__ import annotations

import numpy as np
import pytest

import dsl
from dsl import Tensor, f32
from dsl.runtime.driver import LaunchError


def line_of(text: str) -> int:
    with open(__file__) as f:
        return next(n for n, line in enumerate(f, 1) if text in line)


@dsl.kernel(target="sm_90")
def never_released(y: Tensor[f32]):
    smem = dsl.SharedAllocator()
    buf = smem.array(f32, 30)  # the barriers are not the first array
    empty = smem.array(dsl.u64, (2,))
    t = dsl.thread_idx.x
    if t == 0:
        dsl.mbarrier_init(empty, 0, 1)
        dsl.mbarrier_init(empty, 1, 1)
    dsl.barrier()
    s = t // 32
    if t >= 32:
        dsl.mbarrier_wait(empty,  # warps 1 and 2 wait on elements 0 and 1; nobody arrives
                          s - 1, 0)
    buf[t % 30] = 1.0
    y[t] = 1.0


@dsl.jit
def run_never_released(y: Tensor[f32]):
    never_released(y).launch(grid=1, block=96)


@dsl.kernel(target="sm_90")
def never_filled_dynamic(y: Tensor[f32]):
    smem = dsl.SharedAllocator(dynamic=True)
    full = smem.array(dsl.u64, (1,))
    if dsl.thread_idx.x == 0:
        dsl.mbarrier_init(full, 0, 1)
    dsl.barrier()
    dsl.mbarrier_wait(full, 0, 0)  # one warp, no arrival
    y[dsl.thread_idx.x] = 1.0


@dsl.jit
def run_never_filled_dynamic(y: Tensor[f32]):
    never_filled_dynamic(y).launch(grid=1, block=32)


def test_the_report_names_the_barrier_as_written_and_the_element_it_is():
    with pytest.raises(LaunchError) as caught:
        dsl.interpret(run_never_released, np.zeros(96, dtype=np.float32))
    message = str(caught.value).splitlines()[0]
    line = line_of("nobody arrives")
    assert (f"warp 1 at dsl.mbarrier_wait (test_deadlock_report.py:{line}) for mbarrier empty[s - 1] (element 0) "
            "to complete its phase of parity 0; "
            f"warp 2 at dsl.mbarrier_wait (test_deadlock_report.py:{line}) for mbarrier empty[s - 1] (element 1) "
            "to complete its phase of parity 0") in message
    assert "0x" not in message


def test_a_barrier_in_dynamic_shared_memory_is_named_without_an_element():
    with pytest.raises(LaunchError) as caught:
        dsl.interpret(run_never_filled_dynamic, np.zeros(32, dtype=np.float32))
    message = str(caught.value).splitlines()[0]
    assert "for mbarrier full[0] to complete its phase of parity 0" in message and "0x" not in message
