import dsl
from dsl import Tensor, bf16, f32


@dsl.kernel(target="sm_90a")
def tile(ta: dsl.TensorMap, c: Tensor[f32, 2]):
    smem = dsl.SharedAllocator(dynamic=True)
    sa = smem.array(dsl.bf16, (1, 64, 64), swizzle=128)
    bar = smem.array(dsl.u64, (1,))
    t = dsl.thread_idx.x
    if t == 0:
        dsl.mbarrier_init(bar, 0, 1)
        dsl.fence_mbarrier_init()
    dsl.barrier()
    if t == 0:
        dsl.mbarrier_expect_tx(bar, 0, 8192)
        dsl.tma_load(sa, (0,), ta, (0, 0), bar, 0)
    dsl.mbarrier_wait(bar, 0, 0)
    acc = dsl.wgmma_wait(dsl.wgmma(dsl.zeros(dsl.f32, 32), sa, (0, 0), sa, (0, 0)))
    c.vstore((t, 0), acc[0:4])


@dsl.jit
def run(a: Tensor[bf16, 2], c: Tensor[f32, 2]):
    tile(dsl.tensor_map(a, box=(64, 64), swizzle=128), c).launch(grid=1, block=128)
