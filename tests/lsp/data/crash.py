import dsl
from dsl import Tensor, f32


@dsl.kernel(known_block_size=[128, 1])
def scale(x: Tensor[f32, 1]):
    i = dsl.thread_idx.x
    x[i] = x[i] * 2.0


raise RuntimeError("config file missing")
