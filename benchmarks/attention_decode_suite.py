"""Decode attention (one query token, a long KV cache, GQA): kdsl `examples/attention_decode.py`
against torch SDPA over the cache slice [:kv_len], on the same tensors, interleaved in one run
(H100 / H200).

    python benchmarks/attention_decode_suite.py RESULTS_DIR [--quick]

Rows: HQ=32, HKV=8 (Llama 3's grouping), head dim 128 at (B, kv_len) = (32, 1k), (32, 4k),
(16, 16k), (8, 64k), (4, 128k), a single sequence at 32k (the cache split over every SM), a
kv_len that ends inside a tile of a longer cache (8, 30000 of 32768), and head dim 64 at
(16, 16k).

- Sides: kdsl; `F.scaled_dot_product_attention(q[:, :, None], k[:, :, :kv_len], v[:, :, :kv_len],
  enable_gqa=True)` with the backend torch picks, then each explicit backend
  (`torch.nn.attention.sdpa_kernel`: flash, efficient, cuDNN) that takes the call; and
  `flash_attn_with_kvcache` where the flash-attn package is installed (its cache layout is
  (B, L, HKV, D), so it gets its own copy of the same values).
- Each row checks kdsl against SDPA first (relative Frobenius and max errors) and reports the
  number of chunks kdsl split each sequence into (read back from its workspace).
- Timing: each side is a CUDA graph of many calls (decode steps run in graphs; a graph shows the
  GPU's time, not Python's), replayed in turns, the order alternating; the figure is the median
  per call. The calls rotate over copies of the caches spanning at least three times the L2, so
  K and V stream from HBM. Where a graph cannot be captured the sides run eagerly (`mode`).
- Reported: microseconds, TB/s of K + V (B * HKV * kv_len * D * 2 bytes each, read once), and
  `kdsl_speed_vs_sdpa` = SDPA's time / kdsl's time (above 1: kdsl is faster).

One JSON line per row; writes attention_decode.json to RESULTS_DIR. Exits with a message without
a GPU.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples"))

HQ, HKV = 32, 8
ROWS = [  # (B, kv_len, L_max, D)
    (32, 1024, 1024, 128), (32, 4096, 4096, 128), (16, 16384, 16384, 128), (8, 65536, 65536, 128),
    (4, 131072, 131072, 128), (1, 32768, 32768, 128), (8, 30000, 32768, 128), (16, 16384, 16384, 64),
]
GRAPH_MS = 3.0  # GPU time one graph replay should take, at least


def require_gpu() -> Any:
    """torch with a CUDA GPU, or exit saying what is missing."""
    try:
        import torch
    except ImportError:
        sys.exit("attention_decode_suite: needs PyTorch with CUDA (to compare against SDPA); torch is not installed")
    from dsl.runtime import driver

    if not torch.cuda.is_available() or not driver.available():
        sys.exit("attention_decode_suite: needs an NVIDIA GPU (H100 / H200); none is visible here")
    return torch


class Timer:
    """Per-call milliseconds of several sides, each a function of a copy index, captured as CUDA
    graphs of `calls` calls (eager loops for all when any capture fails), replayed in turns."""

    def __init__(self, torch: Any, sides: dict[str, Any], copies: int):
        self.torch, self.sides, self.copies = torch, sides, copies
        for fn in sides.values():  # warm: compiled, loaded, workspaces made
            for i in range(copies):
                fn(i)
        torch.cuda.synchronize()
        once = max(self._eager_ms(fn, copies) / copies for fn in sides.values())
        self.calls = copies * max(1, math.ceil(GRAPH_MS / max(once, 1e-3) / copies))
        self.mode, self.graphs = "graph", {}
        try:
            for name, fn in sides.items():
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    for k in range(self.calls):
                        fn(k % copies)
                self.graphs[name] = graph
        except Exception as err:  # a side that cannot be captured: time every side eagerly
            print(f"  (CUDA graph capture failed: {err!r}; timing eagerly)", file=sys.stderr)
            torch.cuda.synchronize()
            self.mode, self.graphs = "eager", {}

    def _eager_ms(self, fn: Any, calls: int) -> float:
        start, end = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
        start.record()
        for k in range(calls):
            fn(k % self.copies)
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    def _once(self, name: str) -> float:
        if self.mode == "eager":
            return self._eager_ms(self.sides[name], self.calls) / self.calls
        start, end = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
        start.record()
        self.graphs[name].replay()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / self.calls

    def run(self, reps: int) -> dict[str, float]:
        names = list(self.sides)
        for name in names:
            self._once(name)  # the first replay uploads the graph
        times: dict[str, list[float]] = {name: [] for name in names}
        for rep in range(reps):
            for name in names if rep % 2 == 0 else names[::-1]:
                times[name].append(self._once(name))
        return {name: statistics.median(t) for name, t in times.items()}


def sdpa_sides(torch: Any, q: Any, caches: list[tuple[Any, Any]], kv_len: int) -> tuple[dict[str, Any], dict[str, str]]:
    """The SDPA calls that run here: torch's own pick and each explicit backend that takes a
    one-token GQA call (the others, with why, in the second dict)."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q4 = q[:, :, None]
    views = [(k[:, :, :kv_len], v[:, :, :kv_len]) for k, v in caches]

    def call(i: int) -> Any:
        k, v = views[i]
        return F.scaled_dot_product_attention(q4, k, v, enable_gqa=True)

    sides, refused = {"SDPA": call}, {}
    backends = {"SDPA flash": SDPBackend.FLASH_ATTENTION, "SDPA efficient": SDPBackend.EFFICIENT_ATTENTION,
                "SDPA cuDNN": SDPBackend.CUDNN_ATTENTION}
    for label, backend in backends.items():
        def pinned(i: int, backend: Any = backend) -> Any:
            with sdpa_kernel(backend):
                return call(i)

        try:
            pinned(0)
            torch.cuda.synchronize()
            sides[label] = pinned
        except Exception as err:  # "No available kernel": this backend does not take the call
            refused[label] = (str(err).splitlines() or [type(err).__name__])[0][:160]
    return sides, refused


def flash_attn_side(torch: Any, q: Any, caches: list[tuple[Any, Any]], kv_len: int) -> Any:
    """flash-attn's decode kernel on (B, L, HKV, D) copies of the caches, or None without the package."""
    try:
        from flash_attn import flash_attn_with_kvcache
    except ImportError:
        return None
    q4 = q[:, None]  # (B, 1, HQ, D)
    seqlens = torch.full((q.shape[0],), kv_len, dtype=torch.int32, device="cuda")
    copies = [(k.transpose(1, 2).contiguous(), v.transpose(1, 2).contiguous()) for k, v in caches]
    return lambda i: flash_attn_with_kvcache(q4, copies[i][0], copies[i][1], cache_seqlens=seqlens)


def errors(got: Any, ref: Any) -> tuple[float, float]:
    """(relative Frobenius error, max error relative to the largest element)."""
    g, r = got.float(), ref.float()
    diff = g - r
    return float(diff.norm() / r.norm()), float(diff.abs().max() / r.abs().max())


def decode_row(torch: Any, B: int, kv_len: int, L_max: int, D: int, reps: int) -> dict[str, Any]:
    from attention_decode import attention_decode, workspace_shape

    group = HQ // HKV
    kv_bytes = 2 * B * HKV * kv_len * D * 2
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    copies = max(1, math.ceil(3 * l2 / kv_bytes))
    q = torch.randn(B, HQ, D, device="cuda").bfloat16()
    caches = [(torch.randn(B, HKV, L_max, D, device="cuda").bfloat16(),
               torch.randn(B, HKV, L_max, D, device="cuda").bfloat16()) for _ in range(copies)]
    o = torch.empty_like(q)
    ws = torch.full(workspace_shape(B, HQ, HKV, D), float("nan"), device="cuda")

    def kdsl(i: int) -> None:
        attention_decode(q, caches[i][0], caches[i][1], o, kv_len, ws, D=D, GROUP=group)

    kdsl(0)
    written = int(torch.isfinite(ws[:, D]).sum())  # one row per (sequence, query head, chunk); none for one chunk
    splits = max(1, written // (B * HQ))
    sides, refused = sdpa_sides(torch, q, caches, kv_len)
    rel, worst = errors(o, sides["SDPA"](0).squeeze(2))
    assert rel < 1e-2 and worst < 3e-2, f"B={B} kv_len={kv_len} D={D}: kdsl vs SDPA relative error {rel}, max {worst}"
    flash = flash_attn_side(torch, q, caches, kv_len)
    if flash is not None:
        sides["flash_attn_with_kvcache"] = flash
    timer = Timer(torch, {"kdsl": kdsl, **sides}, copies)
    ms = timer.run(reps)
    return {"name": f"decode_B{B}_HQ{HQ}_HKV{HKV}_L{kv_len}_D{D}", "B": B, "HQ": HQ, "HKV": HKV, "D": D,
            "kv_len": kv_len, "L_max": L_max, "splits": splits, "kv_bytes": kv_bytes, "mode": timer.mode,
            "us": {k: v * 1e3 for k, v in ms.items()}, "tbs": {k: kv_bytes / v / 1e9 for k, v in ms.items()},
            "kdsl_speed_vs_sdpa": ms["SDPA"] / ms["kdsl"],
            "kdsl_speed_vs_best_sdpa": min(v for k, v in ms.items() if k.startswith("SDPA")) / ms["kdsl"],
            "rel_err": rel, "max_err": worst, "refused": refused}


def main(out_dir: str, quick: bool = False) -> None:
    torch = require_gpu()
    torch.manual_seed(0)
    reps = 5 if quick else 21
    rows = []
    for B, kv_len, L_max, D in ROWS:
        row = decode_row(torch, B, kv_len, L_max, D, reps)
        rows.append(row)
        print(json.dumps(row), flush=True)
        torch.cuda.empty_cache()
    ratios = [r["kdsl_speed_vs_sdpa"] for r in rows]
    summary = {"geomean_kdsl_speed_vs_sdpa": math.exp(sum(math.log(x) for x in ratios) / len(ratios)),
               "min_kdsl_speed_vs_sdpa": min(ratios), "device": torch.cuda.get_device_name(),
               "torch": torch.__version__}
    print(json.dumps(summary), flush=True)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "attention_decode.json"), "w") as f:
        json.dump({"rows": rows, "summary": summary}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else ".", quick="--quick" in sys.argv)
