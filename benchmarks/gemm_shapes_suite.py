"""bf16 `c = a @ b_t.T` over the decode shape table: kdsl's `matmul` (examples/gemm_small_m.py, which
picks the kernel) against torch.matmul (cuBLAS) on the same tensors, interleaved in one run (H100 / H200).

    python benchmarks/gemm_shapes_suite.py RESULTS_DIR [--quick] [--sweep] [--m=1,16]

Rows: M in {1, 16, 64, 128, 8192} x (N, K) in {(4096, 4096), (14336, 4096), (4096, 14336),
(28672, 8192), (8192, 28672), (128256, 4096)}; b_t is (N, K), K contiguous, like an nn.Linear weight.

- Each row checks kdsl against torch first (relative Frobenius and max errors), then times both.
- Timing: each side is a CUDA graph of many calls (decode runs in graphs; a graph shows the GPU's
  time, not Python's), replayed in turns, kdsl and cuBLAS alternating which goes first; the row's
  figure is the median per call. Where a graph cannot be captured both sides run eagerly (`mode`).
- The calls rotate over copies of the operands spanning at least three times the L2 cache, so B
  streams from HBM as a decode step's weights do (one copy where the operands are that large).
- Reported: ms, TFLOP/s, TB/s of B (N * K * 2 bytes per call; M <= 128), the ratio cuBLAS time /
  kdsl time, rows under 90% flagged, the geometric mean of the ratios.
- `--sweep` also times other plans on the rows of M <= 128 (split counts, consumer counts, blocks
  per SM, gemm_hopper's BN) and prints any faster than the chosen one, to retune `plan_for`.

One JSON line per row; writes gemm_shapes.json to RESULTS_DIR. Exits with a message without a GPU.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
from dataclasses import asdict
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples"))

MS = [1, 16, 64, 128, 8192]
NK = [(4096, 4096), (14336, 4096), (4096, 14336), (28672, 8192), (8192, 28672), (128256, 4096)]
GRAPH_MS = 2.0  # GPU time one graph replay should take, at least


def require_gpu(suite: str = "gemm_shapes_suite", peer: str = "cuBLAS") -> Any:
    """torch with a Hopper GPU, or exit saying (as `suite`) what is missing."""
    try:
        import torch
    except ImportError:
        sys.exit(f"{suite}: needs PyTorch with CUDA (to compare against {peer}); torch is not installed")
    from dsl.runtime import driver

    if not torch.cuda.is_available() or not driver.available():
        sys.exit(f"{suite}: needs an NVIDIA GPU (H100 / H200); none is visible here")
    if torch.cuda.get_device_capability() != (9, 0):
        sys.exit(f"{suite}: needs a Hopper GPU (sm_90a); this is {torch.cuda.get_device_name()}")
    return torch


def errors(torch: Any, got: Any, ref: Any) -> tuple[float, float]:
    """(relative Frobenius error, max error relative to the largest element)."""
    g, r = got.float(), ref.float()
    diff = g - r
    return float(diff.norm() / r.norm()), float(diff.abs().max() / r.abs().max())


class Timer:
    """Per-call milliseconds of several implementations, each a function of a copy index,
    captured as CUDA graphs of `calls` calls (eager loops if any capture fails)."""

    def __init__(self, torch: Any, impls: dict[str, Any], copies: int):
        self.torch, self.impls, self.copies = torch, impls, copies
        for fn in impls.values():  # warm: compiled, workspaces made, cuBLAS handles ready
            for i in range(copies):
                fn(i)
        torch.cuda.synchronize()
        once = max(self._eager_ms(fn, copies) / copies for fn in impls.values())
        self.calls = copies * max(1, math.ceil(GRAPH_MS / max(once, 1e-3) / copies))
        self.mode = "graph"
        self.graphs: dict[str, Any] = {}
        try:
            for name, fn in impls.items():
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    for k in range(self.calls):
                        fn(k % copies)
                self.graphs[name] = graph
        except Exception as err:  # a side that cannot be captured: time both eagerly
            print(f"  (CUDA graph capture failed: {err!r}; timing eagerly)", file=sys.stderr)
            torch.cuda.synchronize()
            self.mode, self.graphs = "eager", {}

    def _eager_ms(self, fn: Any, calls: int) -> float:
        torch = self.torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for k in range(calls):
            fn(k % self.copies)
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    def _once(self, name: str) -> float:
        if self.mode == "eager":
            return self._eager_ms(self.impls[name], self.calls) / self.calls
        torch = self.torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        self.graphs[name].replay()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / self.calls

    def run(self, reps: int) -> dict[str, float]:
        names = list(self.impls)
        for name in names:
            self._once(name)  # a first replay uploads the graph
        times: dict[str, list[float]] = {name: [] for name in names}
        for rep in range(reps):
            for name in names if rep % 2 == 0 else names[::-1]:
                times[name].append(self._once(name))
        return {name: statistics.median(t) for name, t in times.items()}


def sweep_plans(g: Any, M: int, N: int, K: int, sms: int) -> list[Any]:
    """Plans near the chosen one: other split counts, consumer counts and residencies, and the
    persistent kernel where its shape rules hold."""
    chosen = g.plan_for(M, N, K, sms)
    plans = []
    if M <= 128:
        for consumers, blocks in ((1, 2), (2, 2), (2, 1), (4, 1)):
            base = g.small_m_plan(M, N, K, sms, consumers=consumers, blocks_per_sm=blocks)
            for splits in sorted({max(1, base.splits // 2), base.splits, base.splits * 2, 1}):
                plan = g.small_m_plan(M, N, K, sms, consumers=consumers, blocks_per_sm=blocks, splits=splits)
                if plan.k_split(K)[1] == plan.splits:
                    plans.append(plan)
    for bn in (64, 128, 256):
        if N % bn == 0 and K % 64 == 0:
            plans.append(g.Plan("hopper", BN=bn))
    return [p for p in dict.fromkeys(plans) if p != chosen]


def main(out_dir: str, quick: bool, sweep: bool, ms: list[int]) -> None:
    torch = require_gpu()
    import gemm_small_m as g

    sms = g.sm_count_of(torch.empty(1, device="cuda"))
    l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    reps = 7 if quick else 25
    header = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "sm_count": sms, "l2_bytes": l2,
              "quick": quick}
    print(json.dumps(header), flush=True)
    rows: list[dict[str, Any]] = []
    for M in ms:
        for N, K in NK:
            rows.append(bench_row(torch, g, M, N, K, sms, l2, reps, sweep))
            print(json.dumps(rows[-1]), flush=True)
            torch.cuda.empty_cache()
    summary = summarize(rows)
    print(json.dumps({"summary": summary}), flush=True)
    print_table(rows, summary)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "gemm_shapes.json"), "w") as f:
        json.dump({**header, "rows": rows, "summary": summary}, f, indent=1)


def bench_row(torch: Any, g: Any, M: int, N: int, K: int, sms: int, l2: int, reps: int, sweep: bool
              ) -> dict[str, Any]:
    """One row: kdsl's chosen plan checked against torch, then both timed in one Timer."""
    nbytes = 2 * (M * K + N * K + M * N)
    copies = max(1, math.ceil(3 * l2 / nbytes))
    ops = [(torch.randn(M, K, device="cuda").bfloat16(), torch.randn(N, K, device="cuda").bfloat16(),
            torch.empty(M, N, device="cuda", dtype=torch.bfloat16)) for _ in range(copies)]
    out_ref = [torch.empty(M, N, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
    a, b_t, c = ops[0]
    c.fill_(float("nan"))
    plan = g.matmul(a, b_t, c)
    rel, worst = errors(torch, c, torch.matmul(a, b_t.T))
    assert rel < 1e-2 and worst < 2e-2, f"{M}x{N}x{K} {plan}: relative error {rel:.2e}, max {worst:.2e}"

    def kdsl(i: int) -> None:
        g.matmul(*ops[i], plan=plan)

    def cublas(i: int) -> None:
        torch.matmul(ops[i][0], ops[i][1].T, out=out_ref[i])

    timer = Timer(torch, {"kdsl": kdsl, "cuBLAS": cublas}, copies)
    times = timer.run(reps)
    flops = 2 * M * N * K
    ratio = times["cuBLAS"] / times["kdsl"]
    entry: dict[str, Any] = {
        "M": M, "N": N, "K": K, "plan": asdict(plan), "mode": timer.mode, "copies": copies,
        "calls_per_graph": timer.calls, "rel_error": rel, "max_error": worst, "ms": times,
        "tflops": {k: flops / v / 1e9 for k, v in times.items()}, "ratio": ratio, "under_90": ratio < 0.9}
    if M <= 128:
        entry["tbs_b"] = {k: N * K * 2 / v / 1e9 for k, v in times.items()}
    if sweep and M <= 128:
        entry["sweep"] = sweep_row(torch, g, ops, copies, M, N, K, sms, times["kdsl"], plan)
    return entry


def sweep_row(torch: Any, g: Any, ops: list[Any], copies: int, M: int, N: int, K: int, sms: int,
              chosen_ms: float, chosen: Any) -> list[dict[str, Any]]:
    """Times each plan of `sweep_plans` (checked first) as the row timed the chosen one (a graph per
    plan, fewer turns) and marks the fastest."""
    out: list[dict[str, Any]] = [{"plan": asdict(chosen), "ms": chosen_ms, "chosen": True}]
    ref = torch.matmul(ops[0][0], ops[0][1].T)
    for plan in sweep_plans(g, M, N, K, sms):
        try:
            c = ops[0][2]
            c.fill_(float("nan"))
            g.matmul(*ops[0], plan=plan)
            rel, worst = errors(torch, c, ref)
            if not (rel < 1e-2 and worst < 2e-2):
                out.append({"plan": asdict(plan), "error": f"wrong result: {rel:.2e} / {worst:.2e}"})
                continue

            def run(i: int, plan: Any = plan) -> None:
                g.matmul(*ops[i], plan=plan)

            ms = Timer(torch, {"plan": run}, copies).run(5)["plan"]
            out.append({"plan": asdict(plan), "ms": ms})
        except Exception as err:  # a plan that does not fit this GPU is reported, not fatal
            out.append({"plan": asdict(plan), "error": repr(err)[:300]})
    best = min((s for s in out if "ms" in s), key=lambda s: s["ms"])
    best["best"] = True
    return out


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ratios = [r["ratio"] for r in rows]
    return {"rows": len(rows), "geomean_ratio": math.exp(sum(math.log(x) for x in ratios) / len(ratios)),
            "min_ratio": min(ratios), "under_90": [f"{r['M']}x{r['N']}x{r['K']}" for r in rows if r["under_90"]],
            "goal": "geomean >= 1.0 and no row under 0.9"}


def describe(plan: dict[str, Any]) -> str:
    import gemm_small_m as g

    return g.Plan(**plan).describe()


def print_table(rows: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    print(f"\n{'M x N x K':>22}  {'kdsl ms':>9} {'cuBLAS ms':>9}  {'kdsl TF/s':>9} {'TB/s of B':>15}  ratio  plan")
    for r in rows:
        tbs = r.get("tbs_b")
        tb = f"{tbs['kdsl']:.2f} / {tbs['cuBLAS']:.2f}" if tbs else ""
        plan = describe(r["plan"])
        flag = "  << under 90%" if r["under_90"] else ""
        print(f"{r['M']:>6} x {r['N']:>6} x {r['K']:>5}  {r['ms']['kdsl']:9.4f} {r['ms']['cuBLAS']:9.4f}  "
              f"{r['tflops']['kdsl']:9.1f} {tb:>15}  {r['ratio']:5.2f}  {plan}{flag}")
        for s in r.get("sweep", []):
            if s.get("best") and not s.get("chosen"):
                print(f"{'':>24}sweep: faster {describe(s['plan'])} at {s['ms']:.4f} ms")
    print(f"\ngeometric mean of cuBLAS / kdsl: {summary['geomean_ratio']:.3f}; lowest {summary['min_ratio']:.3f}; "
          f"under 90%: {', '.join(summary['under_90']) or 'none'}")


if __name__ == "__main__":
    args = sys.argv[1:]
    only = next((a.split("=", 1)[1] for a in args if a.startswith("--m=")), None)
    main(next((a for a in args if not a.startswith("--")), "."), "--quick" in args, "--sweep" in args,
         [int(m) for m in only.split(",")] if only else MS)
