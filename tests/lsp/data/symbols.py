import dsl
from dsl import kernel


@kernel
def plain(x: dsl.Tensor[dsl.f32, 1]):
    pass


@kernel(known_block_size=[32, 1, 1])
def called(x: dsl.Tensor[dsl.f32, 1]):
    pass


@dsl.jit()
def host(x: dsl.Tensor[dsl.f32, 1]):
    called(x).launch(grid=1, block=32)


def helper(x):
    return x


class Holder:
    @dsl.kernel
    def method_kernel(x: dsl.Tensor[dsl.f32, 1]):
        pass
