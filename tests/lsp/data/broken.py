import dsl
from dsl import Tensor, f32, i32


@dsl.kernel
def good(x: Tensor[f32, 1]):
    x[dsl.thread_idx.x] = 1.0


@dsl.kernel
def bad(x: Tensor[f32, 1]):
    x[dsl.thread_idx.x] = dsl.cast(x[0], i32) + "text"
