import dsl
from dsl import Tensor, f32
from dsl import barrier as sync


@dsl.kernel
def k(x: Tensor[f32, 1]):
    dsl.barrier()
    sync()
    x[dsl.thread_idx.x] = 0.0
