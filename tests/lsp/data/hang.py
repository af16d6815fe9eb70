import dsl
from dsl import Tensor, f32


@dsl.kernel
def fill(x: Tensor[f32, 1]):
    x[dsl.thread_idx.x] = 1.0


while True: pass  # noqa: E701 - one line: the reported line cannot depend on timing
