"""Attention backward against torch SDPA's backward, side by side in one run (H100 / H200).

    python benchmarks/attention_backward_suite.py RESULTS_DIR [--quick]

For B=4, H=32 (H=16 at S=16384), S in {1024, 4096, 16384}, head dim 64 and 128, causal and not,
and GQA (32 query heads over 8 K/V heads, S=4096, D=128, causal):
kdsl `examples/attention_backward_hopper.py` (dq, dk, dv from the forward's o and lse, its three
kernels; also timed with the other of its two main kernels, `CONSUMERS=1` or `2`) against
`torch.autograd.grad` of `F.scaled_dot_product_attention` (its FlashAttention / cuDNN backward;
the forward it records is outside the timed region: the graph is kept). Each
kdsl result is checked against torch's gradients first. FLOPs: 2.5x the forward's 4*B*H*S*S*D
(half of it causal), as FlashAttention counts a backward. Prints one JSON line per row and
writes attention_backward.json to RESULTS_DIR.
"""

from __future__ import annotations

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from gpu_suite import bench  # noqa: E402


def backward_row(B: int, H: int, S: int, D: int, causal: bool, reps: int, HKV: int | None = None) -> dict:
    """One shape (HKV K/V heads: GQA): kdsl's gradients checked against torch's, then both timed."""
    import torch
    import torch.nn.functional as F
    from attention_backward_hopper import attention_backward
    from attention_hopper import attention_hopper_lse

    HKV = HKV or H
    q, do = (torch.randn(B * H, S, D, device="cuda").bfloat16() for _ in range(2))
    k, v = (torch.randn(B * HKV, S, D, device="cuda").bfloat16() for _ in range(2))
    o, lse = torch.empty_like(q), torch.empty(B * H, S, device="cuda")
    attention_hopper_lse(q, k, v, o, lse, D, causal)
    grads = [torch.empty_like(t) for t in (q, k, v)]
    delta, dq_acc = torch.empty_like(lse), torch.empty(B * H, S, D, device="cuda")
    leaves = [t.view(B, -1, S, D).detach().requires_grad_() for t in (q, k, v)]
    out = F.scaled_dot_product_attention(*leaves, is_causal=causal, enable_gqa=HKV != H)
    grad_out = do.view(B, H, S, D)

    def kdsl(consumers: int = 0) -> None:
        attention_backward(q, k, v, o, do, lse, *grads, delta, dq_acc, D, causal, consumers)

    def sdpa() -> None:
        torch.autograd.grad(out, leaves, grad_out, retain_graph=True)

    kdsl()
    want = torch.autograd.grad(out, leaves, grad_out, retain_graph=True)
    errors = {f"d{n}": (g.float() - w.reshape(g.shape).float()).abs().max().item()
              for n, g, w in zip("qkv", grads, want)}
    assert max(errors.values()) < 0.1, f"B{B} H{H} S{S} D{D} causal={causal}: {errors}"
    flops = 2.5 * 4 * B * H * S * S * D / (2 if causal else 1)
    other = 1 if D == 128 else 2  # the kernel the default does not pick for this head dim
    times = {"kdsl": bench(kdsl, reps=reps), "torch SDPA": bench(sdpa, reps=reps),
             f"kdsl CONSUMERS={other}": bench(lambda: kdsl(other), reps=reps)}
    gqa = f"_HKV{HKV}" if HKV != H else ""
    return {"name": f"attention_backward_B{B}_H{H}{gqa}_S{S}_D{D}{'_causal' if causal else ''}", "ms": times,
            "tflops": {n: flops / t / 1e9 for n, t in times.items()},
            "kdsl_over_sdpa": times["torch SDPA"] / times["kdsl"], "max_errors": errors}


def main(out_dir: str, quick: bool = False) -> None:
    rows = []
    shapes = [(4, 32, 4096)] if quick else [(4, 32, 1024), (4, 32, 4096), (4, 16, 16384)]
    for B, H, S in shapes:
        for D in (128, 64):
            for causal in (False, True):
                rows.append(backward_row(B, H, S, D, causal, 5 if quick else 20))
                print(json.dumps(rows[-1]), flush=True)
    rows.append(backward_row(4, 32, 4096, 128, True, 5 if quick else 20, HKV=8))  # Llama 3's grouping
    print(json.dumps(rows[-1]), flush=True)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "attention_backward.json"), "w") as f:
        json.dump({"rows": rows}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".", quick="--quick" in sys.argv)
