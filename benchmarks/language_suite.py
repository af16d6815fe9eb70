"""The language examples against the peers a user would pick, side by side in one run.

    python benchmarks/language_suite.py RESULTS_DIR

- exact GELU, bf16, 64M elements: kdsl `examples/gelu_bf16.py` against torch.compile
  (Inductor) of `F.gelu(x, approximate="none")` and eager torch;
- per-tensor fp8 quantize (amax, then scale and convert to e4m3), bf16 64M elements: kdsl
  `examples/fp8_quantize.py` against torch.compile of the same expression;
- first column above a threshold, 32768 x 1024 f32: kdsl `examples/linear_search.py` (early
  exit) against torch.compile of the `any`/`argmax` formulation;
- f32 matmul 4096^3 on CUDA cores: kdsl `examples/matmul_tiled.py` (a list of 64 accumulators
  per thread) against torch.matmul with TF32 off (cuBLAS SGEMM).

Each result is checked against torch before it is timed. Prints a table and writes
language.json to RESULTS_DIR.
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


def main(out_dir: str) -> None:
    import torch
    import torch.nn.functional as F

    torch.backends.cuda.matmul.allow_tf32 = False
    rows = []

    def row(name, what, kdsl_ms, peers, nbytes=None, flops=None):
        entry = {"name": name, "what": what, "kdsl_ms": kdsl_ms, "peers": peers}
        if nbytes:
            entry["kdsl_tbs"] = nbytes / kdsl_ms / 1e9
            entry["peer_tbs"] = {k: nbytes / v / 1e9 for k, v in peers.items()}
        if flops:
            entry["kdsl_tflops"] = flops / kdsl_ms / 1e9
            entry["peer_tflops"] = {k: flops / v / 1e9 for k, v in peers.items()}
        rows.append(entry)
        print(json.dumps(entry))

    # exact GELU, bf16
    from gelu_bf16 import run_gelu_bf16

    n = 1 << 26
    x = (torch.randn(n, device="cuda") * 3).to(torch.bfloat16)
    y = torch.empty_like(x)
    run_gelu_bf16(x, y)
    ref = F.gelu(x, approximate="none")
    assert (y.float() - ref.float()).abs().max().item() <= 0.0625
    inductor_gelu = torch.compile(lambda t: F.gelu(t, approximate="none"))
    inductor_gelu(x)
    row("gelu_bf16", "exact GELU bf16, 64M", bench(lambda: run_gelu_bf16(x, y)),
        {"torch.compile": bench(lambda: inductor_gelu(x)), "torch": bench(lambda: F.gelu(x, approximate="none"))},
        nbytes=4 * n)

    # fp8 quantize with amax
    from fp8_quantize import run_fp8_quantize

    q = torch.empty(n, device="cuda", dtype=torch.float8_e4m3fn)
    amax = torch.zeros(1, device="cuda")
    scale_inv = torch.zeros(1, device="cuda")

    def kdsl_quant():
        amax.zero_()
        run_fp8_quantize(x, q, amax, scale_inv)

    kdsl_quant()
    ref_amax = x.float().abs().max()
    assert amax.item() == ref_amax.item()

    def eager_quant(t):
        a = t.float().abs().max()
        s = 448.0 / torch.clamp(a, min=1e-12)
        return (t.float() * s).to(torch.float8_e4m3fn), a / 448.0

    inductor_quant = torch.compile(eager_quant)
    inductor_quant(x)
    row("fp8_quantize", "amax + e4m3 quantize, bf16 64M", bench(kdsl_quant),
        {"torch.compile": bench(lambda: inductor_quant(x)), "torch": bench(lambda: eager_quant(x))},
        nbytes=2 * 2 * n + n)  # x read twice, q written

    # linear search with early exit
    from linear_search import run_first_above

    xs = torch.rand(32768, 1024, device="cuda")
    out = torch.empty(32768, dtype=torch.int32, device="cuda")
    run_first_above(xs, out, 0.999)

    def eager_search(t):
        above = t > 0.999
        return torch.where(above.any(dim=1), above.int().argmax(dim=1), -1)

    assert torch.equal(out, eager_search(xs).int())
    inductor_search = torch.compile(eager_search)
    inductor_search(xs)
    row("linear_search", "first x > 0.999 per row, 32768x1024 f32", bench(lambda: run_first_above(xs, out, 0.999)),
        {"torch.compile": bench(lambda: inductor_search(xs)), "torch": bench(lambda: eager_search(xs))})

    # register-tiled f32 matmul
    from matmul_tiled import run_matmul_tiled

    m = 4096
    a = torch.randn(m, m, device="cuda")
    b = torch.randn(m, m, device="cuda")
    c = torch.empty(m, m, device="cuda")
    run_matmul_tiled(a, b, c)
    ref = a.double() @ b.double()
    assert float((c.double() - ref).norm() / ref.norm()) < 1e-5
    row("matmul_tiled", "f32 matmul 4096^3, CUDA cores", bench(lambda: run_matmul_tiled(a, b, c), reps=20),
        {"torch.matmul (SGEMM, no TF32)": bench(lambda: torch.matmul(a, b), reps=20)}, flops=2 * m**3)

    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "language.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "results")
