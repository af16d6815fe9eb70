"""Attention forward over the shapes a model runs, kdsl against torch SDPA, interleaved in one run.

    python benchmarks/attention_shapes_suite.py RESULTS_DIR [--quick] [--only=S1024,gqa,...]

Rows: head dim 64 and 128, causal and not, S in {512, 1024, 2048, 4096, 8192, 16384} with
B = 16384 // S sequences of 32 heads (the same number of query rows in every row, enough
blocks to fill the GPU); grouped-query attention (32 query heads over 8 K/V heads) at S 4096;
and the Llama prefill shape (B = 1, S = 4096, 32 over 8 heads, causal), which is what
`benchmarks/decoder_layer.py`'s prefill runs. kdsl is `examples/attention_hopper.py`, SDPA is
`F.scaled_dot_product_attention` (its default backend: cuDNN or FlashAttention on Hopper) on the
same tensors, `enable_gqa=True` where the K/V heads are fewer. Each kdsl output is checked
against SDPA's before anything is timed. Timing: CUDA events around each call, rounds that
alternate kdsl / SDPA, the median of each round's median. `ratio` = SDPA ms / kdsl ms.
Writes attention_shapes.json (one row per line) and prints the geometric mean and the rows
under 95%.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _path in (ROOT, os.path.join(ROOT, "examples"), os.path.join(ROOT, "benchmarks")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from gpu_suite import bench  # noqa: E402

TOKENS = 16384  # query rows per head, summed over the batch


def shapes(quick: bool) -> list[tuple[int, int, int, int, int, bool]]:
    """(B, HQ, HKV, S, D, causal) rows."""
    seqs = (1024, 4096, 16384) if quick else (512, 1024, 2048, 4096, 8192, 16384)
    rows = [(TOKENS // S, 32, 32, S, D, causal) for D in (128, 64) for S in seqs for causal in (False, True)]
    rows += [(4, 32, 8, 4096, 128, causal) for causal in (False, True)]
    rows.append((1, 32, 8, 4096, 128, True))  # the decoder layer's prefill
    return rows


def name_of(B: int, HQ: int, HKV: int, S: int, D: int, causal: bool) -> str:
    heads = f"H{HQ}" if HQ == HKV else f"H{HQ}/{HKV}"
    return f"B{B}_{heads}_S{S}_D{D}{'_causal' if causal else ''}"


def measure(B: int, HQ: int, HKV: int, S: int, D: int, causal: bool, rounds: int, reps: int) -> dict:
    """One shape: kdsl's attention_hopper against SDPA on the same inputs, checked, then timed."""
    import torch
    import torch.nn.functional as F
    from attention_hopper import attention_hopper

    name = name_of(B, HQ, HKV, S, D, causal)
    q = torch.randn(B, HQ, S, D, device="cuda").bfloat16()
    k, v = (torch.randn(B, HKV, S, D, device="cuda").bfloat16() for _ in range(2))
    o = torch.empty(B * HQ, S, D, device="cuda", dtype=torch.bfloat16)
    flat = (q.view(B * HQ, S, D), k.view(B * HKV, S, D), v.view(B * HKV, S, D))
    gqa = HQ != HKV

    def kdsl() -> None:
        attention_hopper(*flat, o, D, causal)

    def sdpa() -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)

    kdsl()
    err = float((o.view(B, HQ, S, D).float() - sdpa().float()).abs().max())
    assert err < 0.05, f"{name}: max error {err} against SDPA"
    times: dict[str, list[float]] = {"kdsl": [], "sdpa": []}
    for _ in range(rounds):
        times["kdsl"].append(bench(kdsl, reps=reps))
        times["sdpa"].append(bench(sdpa, reps=reps))
    ms = {side: statistics.median(values) for side, values in times.items()}
    flops = 4 * B * HQ * S * S * D / (2 if causal else 1)
    return {"name": name, "ms": ms, "tflops": {side: flops / t / 1e9 for side, t in ms.items()},
            "ratio": ms["sdpa"] / ms["kdsl"], "max_err": err}


def main(out_dir: str, quick: bool = False, only: tuple[str, ...] = ()) -> None:
    import torch

    os.makedirs(out_dir, exist_ok=True)
    rounds, reps = (3, 10) if quick else (5, 20)
    results = []
    for shape in shapes(quick):
        if only and not any(part in name_of(*shape) for part in only):
            continue
        row = measure(*shape, rounds=rounds, reps=reps)
        print(json.dumps(row), flush=True)
        results.append(row)
        torch.cuda.empty_cache()
    with open(os.path.join(out_dir, "attention_shapes.json"), "w") as f:
        for row in results:
            f.write(json.dumps(row) + "\n")
    if results:
        ratios = [row["ratio"] for row in results]
        mean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        low = [row["name"] for row in results if row["ratio"] < 0.95]
        print(f"geometric mean {mean:.3f} of SDPA over {len(ratios)} rows; under 95%: {', '.join(low) or 'none'}")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    only = next((a.split("=", 1)[1].split(",") for a in sys.argv[1:] if a.startswith("--only=")), [])
    if len(args) != 1:
        sys.exit(__doc__)
    main(args[0], quick="--quick" in sys.argv, only=tuple(only))
