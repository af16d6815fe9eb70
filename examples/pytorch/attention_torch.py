"""Attention as a differentiable PyTorch operator, its forward and backward kdsl kernels.

    o = attention(q, k, v, causal)     # q, k, v, o: [BH, S, D] bf16; differentiable in q, k and v

`forward_op` is `attention_hopper_lse` (examples/attention_hopper.py) as a functional operator:
it allocates and returns `o` and the rows' log-sum-exps `lse`; `backward_op` is
`attention_backward` (examples/attention_backward_hopper.py), returning dq, dk, dv and its two
f32 workspaces. `register_autograd` joins them: the backward reuses the forward's `o` and `lse`
(FlashAttention's recomputation: no S x S matrix is kept). On CUDA tensors the kernels run on
the GPU; on CPU tensors the interpreter runs them, so the same model code is checked on a laptop.
"""

import os
import sys
from typing import Any

import dsl.torch

_EXAMPLES = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _EXAMPLES not in sys.path:
    sys.path.insert(0, _EXAMPLES)  # the attention kernels: the examples beside this one

from attention_backward_hopper import attention_backward  # noqa: E402
from attention_hopper import attention_hopper_lse  # noqa: E402


def _rows_f32(q: Any) -> Any:
    """An f32 [BH, S]: the row log-sum-exps, and the backward's `delta`."""
    import torch

    return q.new_empty((q.shape[0], q.shape[1]), dtype=torch.float32)


def _like_f32(q: Any) -> Any:
    """An f32 tensor shaped like q: the backward's dQ accumulator."""
    import torch

    return q.new_empty(q.shape, dtype=torch.float32)


# torch.ops.kdsl.attention_forward(q, k, v, *, D, CAUSAL) -> (o, lse)
forward_op = dsl.torch.op(attention_hopper_lse, name="attention_forward", outputs={"o": "q", "lse": _rows_f32})
# torch.ops.kdsl.attention_backward(q, k, v, o, do, lse, *, D, CAUSAL) -> (dq, dk, dv, delta, dq_acc)
backward_op = dsl.torch.op(attention_backward, name="attention_backward",
                           outputs={"dq": "q", "dk": "k", "dv": "v", "delta": _rows_f32, "dq_acc": _like_f32})


def _setup_context(ctx: Any, inputs: Any, output: Any) -> None:
    q, k, v, D, causal = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.mark_non_differentiable(lse)
    ctx.head_dim, ctx.causal = D, causal


def _backward(ctx: Any, do: Any, _dlse: Any) -> Any:
    q, k, v, o, lse = ctx.saved_tensors
    dq, dk, dv, _delta, _dq_acc = backward_op(q, k, v, o, do.contiguous(), lse, ctx.head_dim, ctx.causal)
    return dq, dk, dv, None, None  # no gradient for D and CAUSAL


forward_op.register_autograd(_backward, setup_context=_setup_context)


def attention(q: Any, k: Any, v: Any, causal: bool = False) -> Any:
    """softmax(q k^T / sqrt(D)) v of [BH, S, D] bf16 tensors (D 64 or 128, S a multiple of 128),
    differentiable in q, k and v."""
    o, _lse = forward_op(q, k, v, q.shape[-1], causal)
    return o


if __name__ == "__main__":
    import torch
    import torch.nn.functional as F

    q, k, v = (torch.randn(64, 4096, 128, device="cuda").bfloat16().requires_grad_() for _ in range(3))
    do = torch.randn_like(q)
    for causal in (False, True):
        o = torch.compile(attention, fullgraph=True)(q, k, v, causal)
        grads = torch.autograd.grad(o, (q, k, v), do)
        want = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        want_grads = torch.autograd.grad(want, (q, k, v), do)
        print("causal" if causal else "full", "o max error", (o - want).abs().max().item(),
              *[f"d{n} {(g - w).abs().max().item():.3g}" for n, g, w in zip("qkv", grads, want_grads)])
