"""Launches with the block size `block_helper.BLOCK` (another module, a dependency of this
one): nothing to report while it is 128; DSL203 at the launch (line 18) once it exceeds
1024, which only the compiler tier sees (the static tier does not follow imports)."""

from block_helper import BLOCK

import dsl
from dsl import Tensor, f32


@dsl.kernel
def k(x: Tensor[f32, 1]):
    x[dsl.thread_idx.x] = 1.0


@dsl.jit
def run(x: Tensor[f32, 1]):
    k(x).launch(grid=1, block=BLOCK)
