"""Batched bf16 and int8 GEMMs against torch on one Hopper GPU (H100 / H200), interleaved in one run.

    python benchmarks/gemm_batched_int8_suite.py RESULTS_DIR [--quick]

- bmm rows: `c[b] = a[b] @ b_t[b].T`, (B, M, N, K) in {16 x 1024^3, 32 x 512 x 512 x 4096,
  8 x 2048^3}: kdsl's `batched_matmul` (examples/gemm_batched.py, the width it picks) against
  `torch.bmm(a, b_t.transpose(1, 2))` (cuBLAS).
- int8 rows: `c = a @ b_t.T`, int8 into int32, (M, N, K) in {4096^3, 8192^3, 16 x 4096 x 4096},
  kdsl's `gemm_int8_hopper` (examples/gemm_int8_hopper.py, wgmma s8) against
  `torch._int_mm(a, b_t.T)` (cuBLASLt).
- Each row checks every side against torch first (bf16: relative Frobenius and max errors; int8:
  exact), then times them with gemm_shapes_suite's Timer: CUDA graphs of many calls replayed in
  turns, the order alternating, median per call; operands rotate over copies spanning three
  times L2. A side that fails (a shape torch refuses, say) is reported in the row, not fatal.
- Reported: ms and TFLOP/s (TOP/s for int8) per side, the ratio torch time / kdsl time.

One JSON line per row; writes gemm_batched_int8.json to RESULTS_DIR. Exits with a message without a GPU.
"""

from __future__ import annotations

import json
import math
import os
import sys
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gemm_shapes_suite import Timer, errors  # noqa: E402  (after the paths above)

BMM = [(16, 1024, 1024, 1024), (32, 512, 512, 4096), (8, 2048, 2048, 2048)]
INT8 = [(4096, 4096, 4096), (8192, 8192, 8192), (16, 4096, 4096)]


def require_gpu() -> Any:
    """torch with a Hopper GPU, or exit saying what is missing."""
    try:
        import torch
    except ImportError:
        sys.exit("gemm_batched_int8_suite: needs PyTorch with CUDA (to compare against cuBLAS); torch is not installed")
    from dsl.runtime import driver

    if not torch.cuda.is_available() or not driver.available():
        sys.exit("gemm_batched_int8_suite: needs an NVIDIA GPU (H100 / H200); none is visible here")
    if torch.cuda.get_device_capability() != (9, 0):
        sys.exit(f"gemm_batched_int8_suite: needs a Hopper GPU (sm_90a); this is {torch.cuda.get_device_name()}")
    return torch


def copies_for(nbytes: int, l2: int) -> int:
    return max(1, math.ceil(3 * l2 / nbytes))


def timed(torch: Any, impls: dict[str, Any], copies: int, reps: int, flops: int) -> dict[str, Any]:
    """The Timer's medians as ms and TFLOP/s, plus torch / kdsl where both ran."""
    timer = Timer(torch, impls, copies)
    times = timer.run(reps)
    out: dict[str, Any] = {"mode": timer.mode, "calls_per_graph": timer.calls, "ms": times,
                           "tflops": {k: flops / v / 1e9 for k, v in times.items()}}
    if "kdsl" in times and "torch" in times:
        out["ratio"] = times["torch"] / times["kdsl"]
    return out


def bmm_row(torch: Any, B: int, M: int, N: int, K: int, l2: int, reps: int) -> dict[str, Any]:
    """kdsl's batched GEMM checked against torch.bmm, then both timed."""
    import gemm_batched as gb

    copies = copies_for(2 * B * (M * K + N * K + M * N), l2)
    ops = [(torch.randn(B, M, K, device="cuda").bfloat16(), torch.randn(B, N, K, device="cuda").bfloat16(),
            torch.empty(B, M, N, device="cuda", dtype=torch.bfloat16)) for _ in range(copies)]
    out_ref = [torch.empty(B, M, N, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
    a, b_t, c = ops[0]
    c.fill_(float("nan"))
    bn = gb.batched_matmul(a, b_t, c)
    rel, worst = errors(torch, c, torch.bmm(a, b_t.transpose(1, 2)))
    assert rel < 1e-2 and worst < 2e-2, f"bmm {B}x{M}x{N}x{K} BN={bn}: relative error {rel:.2e}, max {worst:.2e}"

    def kdsl(i: int) -> None:
        gb.gemm_batched(*ops[i], BN=bn)

    def cublas(i: int) -> None:
        torch.bmm(ops[i][0], ops[i][1].transpose(1, 2), out=out_ref[i])

    entry = {"kind": "bmm", "B": B, "M": M, "N": N, "K": K, "BN": bn, "copies": copies, "rel_error": rel,
             "max_error": worst}
    return {**entry, **timed(torch, {"kdsl": kdsl, "torch": cublas}, copies, reps, 2 * B * M * N * K)}


def int8_row(torch: Any, M: int, N: int, K: int, l2: int, reps: int) -> dict[str, Any]:
    """kdsl's wgmma int8 GEMM and torch._int_mm, each checked exactly against a float64 product
    (every sum is below 2**53), then timed together; a side that refuses the shape is reported."""
    import gemm_int8_hopper as gi

    copies = copies_for(M * K + N * K + 4 * M * N, l2)
    ops = [(torch.randint(-128, 128, (M, K), device="cuda", dtype=torch.int8),
            torch.randint(-128, 128, (N, K), device="cuda", dtype=torch.int8),
            torch.empty(M, N, device="cuda", dtype=torch.int32)) for _ in range(copies)]
    out_ref = [torch.empty(M, N, device="cuda", dtype=torch.int32) for _ in range(copies)]
    expected = (ops[0][0].double() @ ops[0][1].T.double()).to(torch.int32)
    entry: dict[str, Any] = {"kind": "int8", "M": M, "N": N, "K": K, "copies": copies, "failed": {}}
    impls: dict[str, Any] = {}

    def kdsl(i: int) -> None:
        gi.gemm_int8_hopper(*ops[i])

    def int_mm(i: int) -> None:
        torch._int_mm(ops[i][0], ops[i][1].T, out=out_ref[i])

    for name, fn, got in (("kdsl", kdsl, ops[0][2]), ("torch", int_mm, out_ref[0])):
        try:
            got.fill_(-1)
            fn(0)
            torch.cuda.synchronize()
        except Exception as err:  # a shape this side refuses (torch._int_mm and M <= 16) is a finding
            entry["failed"][name] = repr(err)[:300]
            continue
        mismatches = int((got != expected).sum())
        assert mismatches == 0, f"int8 {M}x{N}x{K} {name}: {mismatches} mismatches"
        impls[name] = fn
    if impls:
        entry.update(timed(torch, impls, copies, reps, 2 * M * N * K))
    return entry


def main(out_dir: str, quick: bool) -> None:
    torch = require_gpu()
    import dsl

    l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    reps = 7 if quick else 25
    header = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "sm_count": dsl.sm_count(),
              "l2_bytes": l2, "quick": quick}
    print(json.dumps(header), flush=True)
    rows: list[dict[str, Any]] = []
    for B, M, N, K in BMM:
        rows.append(bmm_row(torch, B, M, N, K, l2, reps))
        print(json.dumps(rows[-1]), flush=True)
        torch.cuda.empty_cache()
    for M, N, K in INT8:
        rows.append(int8_row(torch, M, N, K, l2, reps))
        print(json.dumps(rows[-1]), flush=True)
        torch.cuda.empty_cache()
    print_table(rows)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "gemm_batched_int8.json"), "w") as f:
        json.dump({**header, "rows": rows, "goal": "ratio (torch ms / kdsl ms) >= 1.0 on every row"}, f, indent=1)


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"\n{'row':>28}  {'kdsl ms':>9} {'torch ms':>9}  {'kdsl T/s':>9} {'torch T/s':>9}  ratio  note")
    for r in rows:
        shape = (f"bmm {r['B']}x{r['M']}x{r['N']}x{r['K']}" if r["kind"] == "bmm" else
                 f"int8 {r['M']}x{r['N']}x{r['K']}")
        ms, tf = r.get("ms", {}), r.get("tflops", {})

        def cell(d: dict[str, float], k: str, fmt: str) -> str:
            return format(d[k], fmt) if k in d else "-"

        note = f"BN={r['BN']}" if r["kind"] == "bmm" else "; ".join(
            f"{k} failed: {v}" for k, v in r.get("failed", {}).items())
        ratio = f"{r['ratio']:5.2f}" if "ratio" in r else "    -"
        print(f"{shape:>28}  {cell(ms, 'kdsl', '9.4f'):>9} {cell(ms, 'torch', '9.4f'):>9}  "
              f"{cell(tf, 'kdsl', '9.1f'):>9} {cell(tf, 'torch', '9.1f'):>9}  {ratio}  {note}")


if __name__ == "__main__":
    args = sys.argv[1:]
    main(next((a for a in args if not a.startswith("--")), "."), "--quick" in args)
