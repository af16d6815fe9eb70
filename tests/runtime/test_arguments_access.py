"""What the compiler records about each tensor argument for the launcher to check: the
alignment its kernels' accesses need and whether a kernel writes it (no GPU needed)."""

import dsl
from dsl import Constexpr, Int32, Tensor, bf16, f16, f32, i32
from dsl.compiler.artifacts import KernelInfo, TensorAccess
from dsl.compiler.launcher_source import tensor_access


@dsl.kernel
def mixed(v: Tensor[f32], s: Tensor[f32], w: Tensor[f32], a: Tensor[i32], h: Tensor[f16], b: Tensor[bf16, 2],
          unused: Tensor[f32], n: Int32):
    i = dsl.thread_idx.x * 4
    if i + 4 <= n:
        w.vstore(i, v.vload(i, 4) + s[i])
        dsl.atomic_add(a, 0, 1)
        h.vstore(0, h.vload(0, 2))
        x = b.vload((1, 8), 8)
        b[0, 0] = x[0]


@dsl.jit
def run_mixed(v: Tensor[f32], s: Tensor[f32], w: Tensor[f32], a: Tensor[i32], h: Tensor[f16],
              b: Tensor[bf16, 2], unused: Tensor[f32], BLOCK: Constexpr[int] = 128):
    mixed(v, s, w, a, h, b, unused, v.shape[0]).launch(grid=1, block=BLOCK)


@dsl.kernel
def read_only(src: Tensor[f32], n: Int32):
    if dsl.thread_idx.x < n:
        dsl.printf("%f\n", src[dsl.thread_idx.x])


@dsl.kernel
def fill4(dst: Tensor[f32]):
    dst.vstore(dsl.thread_idx.x * 4, dsl.vector(1.0, 2.0, 3.0, 4.0))


@dsl.jit
def two_kernels(x: Tensor[f32], y: Tensor[f32]):
    read_only(x, x.shape[0]).launch(grid=1, block=32)
    fill4(x).launch(grid=1, block=32)
    read_only(y, y.shape[0]).launch(grid=1, block=32)


def _specs(*specs):
    return [dsl.TensorSpec(dtype, shape) for dtype, shape in specs]


def test_each_kernel_records_how_it_touches_each_tensor():
    compiled = dsl.compile(run_mixed, *_specs((f32, (64,)), (f32, (64,)), (f32, (64,)), (i32, (1,)), (f16, (2,)),
                                              (bf16, (2, 16)), (f32, (64,))))
    (kernel,) = compiled.kernels
    assert kernel.access == {
        "v": TensorAccess(16, False),  # vload(i, 4) of f32
        "s": TensorAccess(4, False),  # a scalar read
        "w": TensorAccess(16, True),  # vstore of 4 x f32
        "a": TensorAccess(4, True),  # an atomic update
        "h": TensorAccess(4, True),  # 2 x f16 both ways
        "b": TensorAccess(16, True),  # vload of 8 x bf16, a scalar store
    }
    assert KernelInfo.from_dict(kernel.to_dict()).access == kernel.access
    assert ("TENSOR_ACCESS = {'v': (16, 'mixed.v', None), 's': (4, 'mixed.s', None), "
            "'w': (16, 'mixed.w', 'mixed.w'), 'a': (4, 'mixed.a', 'mixed.a'), 'h': (4, 'mixed.h', 'mixed.h'), "
            "'b': (16, 'mixed.b', 'mixed.b')}\n") in compiled.launcher


def test_a_tensor_passed_to_several_kernels_takes_the_strictest_access():
    compiled = dsl.compile(two_kernels, *_specs((f32, (128,)), (f32, (128,))))
    namespace: dict = {}
    exec(compile(compiled.launcher, "launcher", "exec"), namespace)
    assert namespace["TENSOR_ACCESS"] == {"x": (16, "fill4.dst", "fill4.dst"), "y": (4, "read_only.src", None)}


def test_kernel_info_from_an_older_cache_entry_has_no_access_facts():
    data = {"symbol": "k", "source_name": "k", "block": None, "dynamic_smem": 0, "resources": None}
    assert KernelInfo.from_dict(data).access == {}


def test_tensor_access_merges_per_jit_parameter():
    """Launches of one kernel specialization with two tensors, and of two kernels with one."""

    class P:
        def __init__(self, name, kind, rank=0):
            self.name, self.kind, self.rank = name, kind, rank

    class K:
        def __init__(self, symbol, params):
            self.symbol, self.params = symbol, params

    class L:
        def __init__(self, kernel, args):
            self.kernel, self.args = kernel, args

    k = K("k", [P("n", "scalar"), P("t", "tensor", 2)])
    args_x = [("n", "i32"), ("x_ptr", "ptr"), ("x_shape[0]", "i32"), ("x_shape[1]", "i32"), ("x_strides[0]", "i32")]
    args_y = [("n", "i32"), ("y_ptr", "ptr"), ("y_shape[0]", "i32"), ("y_shape[1]", "i32"), ("y_strides[0]", "i32")]
    reads = {"k": {"t": TensorAccess(8, False)}, "w": {"o": TensorAccess(4, True)}}
    w = K("w", [P("o", "tensor", 1)])
    launches = [L(k, args_x), L(k, args_y), L(w, [("x_ptr", "ptr"), ("x_shape[0]", "i32")])]
    assert tensor_access(launches, reads) == {"x": (8, "k.t", "w.o"), "y": (8, "k.t", None)}
