"""The jit functions the PyTorch-operator tests register (a real file: kdsl reads its source).

Each is small enough for the interpreter to run in milliseconds. `programs_twin.py` defines
another `run_saxpy`, for the naming of operators whose functions share a name.
"""

import dsl
from dsl import Boolean, Constexpr, Float32, Int32, Tensor, TensorMap, f32, i32


@dsl.kernel
def saxpy(x: Tensor[f32], y: Tensor[f32], a: Float32, n: Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    if i < n:
        y[i] = a * x[i] + y[i]


@dsl.jit
def run_saxpy(x: Tensor[f32], y: Tensor[f32], a: Float32, BLOCK: Constexpr[int] = 64):
    n = x.shape[0]
    assert y.shape[0] == n, "y must have as many elements as x"
    saxpy(x, y, a, n).launch(grid=dsl.cdiv(n, BLOCK), block=BLOCK)


@dsl.kernel
def fill(y: Tensor[f32], n: Int32, value: Float32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    if i < n:
        y[i] = value


@dsl.jit
def run_fill(y: Tensor[f32], n: Int32, value: Float32 = 1.0, *, SCALE: Constexpr[float] = 1.0,
             MODE: Constexpr[str] = "plain", CHECK: Constexpr[bool] = True):
    if dsl.const_expr(CHECK):
        assert n <= y.shape[0], "n is beyond the end of y"
    fill(y, n, value * SCALE).launch(grid=dsl.cdiv(n, 64), block=64)


@dsl.kernel
def count_positive(x: Tensor[f32], total: Tensor[i32], n: Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    if i < n:
        if x[i] > 0.0:
            dsl.atomic_add(total, 0, 1)


@dsl.jit
def run_count_positive(x: Tensor[f32], total: Tensor[i32]):
    count_positive(x, total, x.shape[0]).launch(grid=dsl.cdiv(x.shape[0], 64), block=64)


@dsl.kernel
def copy(src: Tensor[f32], dst: Tensor[f32], n: Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    if i < n:
        dst[i] = src[i]


@dsl.jit
def run_pick(x: Tensor[f32], y: Tensor[f32], z: Tensor[f32], WHICH: Constexpr[int] = 0):
    # the default specialization writes y only; WHICH=1 writes z
    if dsl.const_expr(WHICH == 0):
        copy(x, y, x.shape[0]).launch(grid=dsl.cdiv(x.shape[0], 64), block=64)
    else:
        copy(x, z, x.shape[0]).launch(grid=dsl.cdiv(x.shape[0], 64), block=64)


@dsl.jit(examples=[{"WHICH": 0}, {"WHICH": 1}])
def run_pick_declared(x: Tensor[f32], y: Tensor[f32], z: Tensor[f32], WHICH: Constexpr[int] = 0):
    if dsl.const_expr(WHICH == 0):
        copy(x, y, x.shape[0]).launch(grid=dsl.cdiv(x.shape[0], 64), block=64)
    else:
        copy(x, z, x.shape[0]).launch(grid=dsl.cdiv(x.shape[0], 64), block=64)


@dsl.kernel
def scale(x: Tensor, y: Tensor, a: Float32, n: Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    if i < n:
        y[i] = x[i] * dsl.cast(a, x.dtype)


@dsl.jit
def run_scale_untyped(x: Tensor, y: Tensor, a: Float32):
    scale(x, y, a, x.shape[0]).launch(grid=dsl.cdiv(x.shape[0], 64), block=64)


# Signatures a torch schema cannot express (each refused, naming the parameter).

@dsl.jit
def takes_varargs(x: Tensor[f32], *rest):
    pass


@dsl.jit
def takes_a_tuple(x: Tensor[f32], SHAPE: Constexpr[tuple] = (1, 2)):
    pass


@dsl.jit
def takes_unannotated(x: Tensor[f32], scale):
    pass


@dsl.jit
def takes_a_tensor_map(x: Tensor[f32], m: TensorMap):
    pass


@dsl.jit
def takes_a_flag(x: Tensor[f32], flag: Boolean, times: Int32 = 2):
    pass
