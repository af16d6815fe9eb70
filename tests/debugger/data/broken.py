"""A kernel that does not compile: the debugger shows its diagnostics."""

import dsl
from dsl import Tensor, f32


@dsl.kernel
def broken(x: Tensor[f32]):
    i = dsl.thread_idx.x
    x[i] = undefined_name + 1.0  # noqa: F821 - the compile error the test expects


@dsl.jit
def run_broken(x: Tensor[f32]):
    broken(x).launch(grid=1, block=32)
