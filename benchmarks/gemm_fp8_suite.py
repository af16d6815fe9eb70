"""FP8 GEMM `d = (a @ b_t.T) * scale_a * scale_b` against torch._scaled_mm (cuBLASLt) on one Hopper GPU,
interleaved in one run.

    python benchmarks/gemm_fp8_suite.py RESULTS_DIR [--quick] [--rowwise] [--m=1,16]

- The 8192^3 rows first: e4m3 x e4m3 into bf16 with per-tensor scales, with per-row / per-column
  scales, and e4m3 x e5m2 (per tensor). Then the model-shape table, gemm_shapes_suite's: M in
  {1, 16, 64, 128, 8192} x (N, K) in the Llama table, e4m3 x e4m3 into bf16, per-tensor scales
  (per-row / per-column with --rowwise). b_t is (N, K), K contiguous (an nn.Linear weight); torch gets
  it as `b_t.t()`, the column-major B cuBLASLt needs.
- Sides: kdsl's `scaled_mm` (examples/gemm_fp8.py, the kernel it picks), `torch._scaled_mm(...,
  use_fast_accum=True)` (the same arithmetic: fp8 products summed in the tensor cores; the row's
  `ratio`), and torch's default `use_fast_accum=False` (cuBLASLt adds partial sums in f32 on the side;
  `ratio_default`).
- Each row checks kdsl first: no NaN, the relative Frobenius error against torch, and the error of
  each side against the exact (float64) product on a sample of rows, which for kdsl must be at most
  twice that of torch's fast accumulation plus 1% (Hopper's fp8 additions keep about 13 bits, so
  neither side is near bf16's rounding at large K). Then all sides are timed with
  gemm_shapes_suite's Timer: CUDA graphs of many calls replayed in turns, the order alternating,
  median per call; the operands rotate over copies spanning three times L2, so the weights of the
  small-M rows stream from HBM.
- Reported: ms and TFLOP/s per side, TB/s of B (N * K bytes) where M <= 128, the ratios torch time /
  kdsl time, rows under 90% flagged, the geometric mean over the table.

One JSON line per row; writes gemm_fp8.json and gemm_fp8.md to RESULTS_DIR. Exits with a message without
a GPU.
"""

from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import asdict
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gemm_batched_int8_suite import copies_for, timed  # noqa: E402  (after the paths above)
from gemm_shapes_suite import MS, NK, errors, require_gpu  # noqa: E402

HEAD = [((8192, 8192, 8192), ("e4m3", "e4m3"), False), ((8192, 8192, 8192), ("e4m3", "e4m3"), True),
        ((8192, 8192, 8192), ("e4m3", "e5m2"), False)]
SAMPLE_ROWS = 64  # rows of d checked against the float64 product


def fp8_dtype(torch: Any, kind: str) -> Any:
    return {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}[kind]


def make_operands(torch: Any, M: int, N: int, K: int, kinds: tuple[str, str], rowwise: bool) -> tuple[Any, ...]:
    """Normal values quantized to fp8, f32 scales of the chosen kind, an empty bf16 d."""
    a = torch.randn(M, K, device="cuda").to(fp8_dtype(torch, kinds[0]))
    b_t = torch.randn(N, K, device="cuda").to(fp8_dtype(torch, kinds[1]))
    if rowwise:
        scale_a, scale_b = torch.rand(M, device="cuda") + 0.5, (torch.rand(N, device="cuda") + 0.5) / 64
    else:
        scale_a, scale_b = torch.tensor([0.3712], device="cuda"), torch.tensor([0.01953], device="cuda")
    return a, b_t, scale_a, scale_b, torch.empty(M, N, device="cuda", dtype=torch.bfloat16)


def torch_scaled_mm(torch: Any, ops: tuple[Any, ...], out: Any, fast: bool) -> Any:
    a, b_t, scale_a, scale_b, _ = ops
    if scale_a.numel() != 1 or scale_b.numel() != 1:
        scale_a, scale_b = scale_a.view(-1, 1), scale_b.view(1, -1)
    return torch._scaled_mm(a, b_t.t(), scale_a, scale_b, out_dtype=torch.bfloat16, use_fast_accum=fast, out=out)


def exact_rows(torch: Any, ops: tuple[Any, ...], rows: Any) -> Any:
    """The float64 product on `rows` of d, in column blocks (a float64 copy of a whole weight can be GBs)."""
    a, b_t, scale_a, scale_b, _ = ops
    left = a.view(torch.uint8)[rows].view(a.dtype).float().double()  # rows of the fp8 codes (uint8 indexing)
    out = []
    for n0 in range(0, b_t.shape[0], 4096):
        out.append(left @ b_t[n0:n0 + 4096].float().double().T)
    product = torch.cat(out, dim=1)
    sa = scale_a.double()[rows].view(-1, 1) if scale_a.numel() != 1 else scale_a.double()
    return product * sa * scale_b.double().view(1, -1)


def relative(got: Any, ref: Any) -> float:
    return float((got.double() - ref).norm() / ref.norm())


def fp8_row(torch: Any, M: int, N: int, K: int, kinds: tuple[str, str], rowwise: bool, l2: int, reps: int
            ) -> dict[str, Any]:
    """One row: kdsl's pick checked against torch and the exact product, then the three sides timed."""
    import gemm_fp8 as g8

    copies = copies_for(M * K + N * K + 4 * M * N, l2)
    ops = [make_operands(torch, M, N, K, kinds, rowwise) for _ in range(copies)]
    out_ref = [torch.empty(M, N, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
    d = ops[0][4]
    d.fill_(float("nan"))
    plan = g8.scaled_mm(*ops[0])
    assert not d.isnan().any(), f"fp8 {M}x{N}x{K} {plan.describe()}: NaN or unwritten elements"
    rel, worst = errors(torch, d, torch_scaled_mm(torch, ops[0], out_ref[0], fast=True))
    rows = torch.unique(torch.linspace(0, M - 1, min(M, SAMPLE_ROWS), device="cuda").round().long())
    ref = exact_rows(torch, ops[0], rows)
    exact_error = {"kdsl": relative(d[rows], ref),
                   "torch": relative(torch_scaled_mm(torch, ops[0], out_ref[0], fast=True)[rows], ref),
                   "torch_default": relative(torch_scaled_mm(torch, ops[0], out_ref[0], fast=False)[rows], ref)}
    assert exact_error["kdsl"] <= 2 * exact_error["torch"] + 1e-2, \
        f"fp8 {M}x{N}x{K} {plan.describe()}: error {exact_error} against the exact product"

    def kdsl(i: int) -> None:
        g8.scaled_mm(*ops[i], plan=plan)

    def fast(i: int) -> None:
        torch_scaled_mm(torch, ops[i], out_ref[i], fast=True)

    def default(i: int) -> None:
        torch_scaled_mm(torch, ops[i], out_ref[i], fast=False)

    entry: dict[str, Any] = {
        "M": M, "N": N, "K": K, "a": kinds[0], "b": kinds[1], "scales": "rowwise" if rowwise else "tensor",
        "plan": asdict(plan), "describe": plan.describe(), "copies": copies, "rel_error_vs_torch": rel,
        "max_error_vs_torch": worst, "rel_error_vs_exact": exact_error}
    entry.update(timed(torch, {"kdsl": kdsl, "torch": fast, "torch_default": default}, copies, reps, 2 * M * N * K))
    entry["ratio_default"] = entry["ms"]["torch_default"] / entry["ms"]["kdsl"]
    entry["under_90"] = entry["ratio"] < 0.9
    if M <= 128:
        entry["tbs_b"] = {k: N * K / v / 1e9 for k, v in entry["ms"].items()}
    return entry


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    head = [r for r in rows if r["table"] is False]
    table = [r for r in rows if r["table"]]
    out: dict[str, Any] = {"8192^3": {f"{r['a']} x {r['b']} {r['scales']}": r["ratio"] for r in head}}
    if table:
        ratios = [r["ratio"] for r in table]
        out.update({"table_rows": len(table), "geomean_ratio": math.exp(sum(math.log(x) for x in ratios) / len(ratios)),
                    "min_ratio": min(ratios),
                    "under_90": [f"{r['M']}x{r['N']}x{r['K']}" for r in table if r["under_90"]]})
    out["goal"] = "ratio (torch._scaled_mm fast-accum ms / kdsl ms) >= 1.0 at 8192^3, >= 0.9 on every table row"
    return out


def table_lines(rows: list[dict[str, Any]], summary: dict[str, Any]) -> list[str]:
    """The markdown table of the run (also printed)."""
    lines = ["| M x N x K | a x b, scales | kdsl ms | torch ms (fast / default) | kdsl TF/s | TB/s of B | ratio "
             "(fast / default) | kdsl kernel |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        tbs = r.get("tbs_b")
        tb = f"{tbs['kdsl']:.2f} / {tbs['torch']:.2f}" if tbs else ""
        flag = " (under 90%)" if r["under_90"] else ""
        lines.append(f"| {r['M']} x {r['N']} x {r['K']} | {r['a']} x {r['b']}, {r['scales']} | {r['ms']['kdsl']:.4f} | "
                     f"{r['ms']['torch']:.4f} / {r['ms']['torch_default']:.4f} | {r['tflops']['kdsl']:.1f} | {tb} | "
                     f"{r['ratio']:.2f}{flag} / {r['ratio_default']:.2f} | {r['describe']} |")
    if "geomean_ratio" in summary:
        lines.append(f"\nTable: geometric mean of torch / kdsl {summary['geomean_ratio']:.3f}, lowest "
                     f"{summary['min_ratio']:.3f}, under 90%: {', '.join(summary['under_90']) or 'none'}.")
    return lines


def main(out_dir: str, quick: bool, rowwise: bool, ms: list[int]) -> None:
    torch = require_gpu("gemm_fp8_suite", "torch._scaled_mm")
    import dsl

    l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    reps = 7 if quick else 25
    header = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "sm_count": dsl.sm_count(),
              "l2_bytes": l2, "quick": quick, "table_scales": "rowwise" if rowwise else "tensor"}
    print(json.dumps(header), flush=True)
    plan = [(shape, kinds, scales, False) for shape, kinds, scales in HEAD]
    plan += [((M, N, K), ("e4m3", "e4m3"), rowwise, True) for M in ms for N, K in NK]
    rows: list[dict[str, Any]] = []
    for (M, N, K), kinds, scales, in_table in plan:
        rows.append({**fp8_row(torch, M, N, K, kinds, scales, l2, reps), "table": in_table})
        print(json.dumps(rows[-1]), flush=True)
        torch.cuda.empty_cache()
    summary = summarize(rows)
    print(json.dumps({"summary": summary}), flush=True)
    lines = table_lines(rows, summary)
    print("\n" + "\n".join(lines))
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "gemm_fp8.json"), "w") as f:
        json.dump({**header, "rows": rows, "summary": summary}, f, indent=1)
    with open(os.path.join(out_dir, "gemm_fp8.md"), "w") as f:
        f.write("\n".join([f"FP8 GEMM on {header['device']} (torch {header['torch']}), "
                           f"`python benchmarks/gemm_fp8_suite.py`", "", *lines, ""]))


if __name__ == "__main__":
    args = sys.argv[1:]
    only = next((a.split("=", 1)[1] for a in args if a.startswith("--m=")), None)
    main(next((a for a in args if not a.startswith("--")), "."), "--quick" in args, "--rowwise" in args,
         [int(m) for m in only.split(",")] if only else MS)
