"""Two limits that depend on the target; checked for sm_86, both findings name sm_86:

- `minnctapersm=20` (line 13): DSL201, sm_86 keeps at most 16 blocks per SM (sm_90 keeps 32,
  so for the default target it is fine);
- `block=2048` (line 20): DSL203, "exceeds sm_86 limits" (the static tier used to say
  "sm_90 limits" whatever the target was).
"""

import dsl
from dsl import Tensor, f32


@dsl.kernel(known_block_size=[128, 1, 1], minnctapersm=20)
def k(x: Tensor[f32, 1]):
    x[dsl.thread_idx.x] = 1.0


@dsl.jit
def run(x: Tensor[f32, 1]):
    k(x).launch(grid=1, block=2048)
