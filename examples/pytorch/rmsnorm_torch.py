"""RMSNorm as a PyTorch operator with a backward, both written as kdsl kernels.

    y = x / sqrt(mean(x^2) + eps) * w        (over the last dimension of a 2-D x)

`rmsnorm_forward` writes y and the per-row `rstd = 1 / sqrt(mean(x^2) + eps)`, which the
backward reuses; `rmsnorm_backward` writes dx and each row's share of dw, which torch sums over
the rows. Both take their element type from the tensors (bare `Tensor` annotations; the
`examples=` say what to compile without data), so the same kernels run in f32 on the GPU and in
f64 in the interpreter, where `torch.autograd.gradcheck` checks the backward against finite
differences.

`dsl.torch.op` makes each jit function a functional operator that allocates its outputs;
`register_autograd` (torch's API) joins them. `rms_norm(x, w)` then works in eager code, under
`torch.compile(fullgraph=True)` and with autograd, on CUDA tensors (the GPU) and on CPU tensors
(the interpreter). One warp per row; rows longer than a few thousand would want a block per row.
"""

import dsl
import dsl.torch
from dsl import Float32, Tensor, TensorSpec, f32

WARP = 32
_EXAMPLE = (TensorSpec(f32, shape=(4, 256)), TensorSpec(f32, shape=(256,)))


@dsl.kernel
def rmsnorm_forward(x: Tensor, w: Tensor, y: Tensor, rstd: Tensor, eps: Float32):
    row = dsl.block_idx.x
    lane = dsl.thread_idx.x
    cols = x.shape[1]
    squares = dsl.cast(0.0, x.dtype)
    for c in range(lane, cols, WARP):
        v = x[row, c]
        squares += v * v
    r = dsl.rsqrt(dsl.warp_reduce(squares, "sum") / dsl.cast(cols, x.dtype) + dsl.cast(eps, x.dtype))
    if lane == 0:
        rstd[row] = r
    for c in range(lane, cols, WARP):
        y[row, c] = x[row, c] * r * w[c]


@dsl.kernel
def rmsnorm_backward(dy: Tensor, x: Tensor, w: Tensor, rstd: Tensor, dx: Tensor, dw_rows: Tensor):
    # with g = dy * w:  dx = rstd * (g - x * rstd^2 * mean(g * x)),  dw = sum over rows of dy * x * rstd
    row = dsl.block_idx.x
    lane = dsl.thread_idx.x
    cols = x.shape[1]
    r = rstd[row]
    dot = dsl.cast(0.0, x.dtype)
    for c in range(lane, cols, WARP):
        dot += dy[row, c] * w[c] * x[row, c]
    mean = dsl.warp_reduce(dot, "sum") / dsl.cast(cols, x.dtype)
    for c in range(lane, cols, WARP):
        v = x[row, c]
        dx[row, c] = r * (dy[row, c] * w[c] - v * r * r * mean)
        dw_rows[row, c] = dy[row, c] * v * r


@dsl.jit(examples=[(*_EXAMPLE, TensorSpec(f32, shape=(4, 256)), TensorSpec(f32, shape=(4,)))])
def run_rmsnorm_forward(x: Tensor, w: Tensor, y: Tensor, rstd: Tensor, eps: Float32 = 1e-6):
    rows = x.shape[0]
    assert w.shape[0] == x.shape[1], "w has one weight per column of x"
    assert y.shape[0] == rows and y.shape[1] == x.shape[1] and rstd.shape[0] == rows, "y like x, rstd (rows,)"
    rmsnorm_forward(x, w, y, rstd, eps).launch(grid=rows, block=WARP)


@dsl.jit(examples=[(TensorSpec(f32, shape=(4, 256)), *_EXAMPLE, TensorSpec(f32, shape=(4,)),
                    TensorSpec(f32, shape=(4, 256)), TensorSpec(f32, shape=(4, 256)))])
def run_rmsnorm_backward(dy: Tensor, x: Tensor, w: Tensor, rstd: Tensor, dx: Tensor, dw_rows: Tensor):
    rows = x.shape[0]
    assert dy.shape[0] == rows and dy.shape[1] == x.shape[1], "dy like x"
    rmsnorm_backward(dy, x, w, rstd, dx, dw_rows).launch(grid=rows, block=WARP)


# torch.ops.kdsl.rmsnorm_forward(x, w, eps) -> (y, rstd)
# torch.ops.kdsl.rmsnorm_backward(dy, x, w, rstd) -> (dx, dw_rows)
forward_op = dsl.torch.op(run_rmsnorm_forward, name="rmsnorm_forward",
                          outputs={"y": "x", "rstd": lambda x: x.new_empty(x.shape[0])})
backward_op = dsl.torch.op(run_rmsnorm_backward, name="rmsnorm_backward", outputs={"dx": "x", "dw_rows": "x"})


def _setup_context(ctx, inputs, output):
    x, w, _eps = inputs
    _y, rstd = output
    ctx.save_for_backward(x, w, rstd)
    ctx.mark_non_differentiable(rstd)


def _backward(ctx, dy, _drstd):
    x, w, rstd = ctx.saved_tensors
    dx, dw_rows = backward_op(dy.contiguous(), x, w, rstd)  # a kdsl kernel ...
    return dx, dw_rows.sum(0), None  # ... and a torch op: dw, and no gradient for eps


forward_op.register_autograd(_backward, setup_context=_setup_context)


def rms_norm(x, w, eps: float = 1e-6):
    """RMSNorm of the rows of `x` (2-D, contiguous rows) scaled by `w`, differentiable in both."""
    y, _rstd = forward_op(x, w, eps)
    return y


if __name__ == "__main__":
    import torch

    x = torch.randn(4096, 4096, device="cuda", requires_grad=True)
    w = torch.randn(4096, device="cuda", requires_grad=True)
    compiled = torch.compile(rms_norm, fullgraph=True)
    y = compiled(x, w)
    y.square().sum().backward()
    x2, w2 = x.detach().requires_grad_(), w.detach().requires_grad_()
    expected = torch.nn.functional.rms_norm(x2, (4096,), w2, eps=1e-6)
    expected.square().sum().backward()
    assert x.grad is not None and w.grad is not None and x2.grad is not None and w2.grad is not None
    print("max error y", (y - expected).abs().max().item(), "dx", (x.grad - x2.grad).abs().max().item(),
          "dw", (w.grad - w2.grad).abs().max().item())
