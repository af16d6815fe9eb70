"""Tensor-core GEMMs against cuBLAS and Triton, side by side in one run (H100 / H200).

    python benchmarks/tensor_core_suite.py RESULTS_DIR [--quick]

- bf16 `c = a @ b_t.T` at 8192^3, 4096^3 and the decode shape 16 x 8192 x 8192: kdsl
  `examples/gemm_hopper.py` (TMA + wgmma, warp-specialized, persistent; BN=64 tiles for
  the decode shape) against
  torch.matmul (cuBLAS) on the same tensors and a plain Triton `tl.dot` kernel;
- the sm_80-style `examples/matmul_mma.py` (mma.sync, cp.async, ldmatrix) at 4096^3;
- attention forward B=4, H=32, S=4096, head dim 128 and 64, causal and not: kdsl
  `examples/attention_hopper.py` against torch SDPA (its FlashAttention / cuDNN kernels);
- the Hopper GEMM's compile time, trace to cubin with the IR views: cold (a fresh process's
  first compile, no caches) and warm (MLIR and the toolchain loaded, no cached result).

Each kdsl result is checked against torch before it is timed. Prints one JSON line per row
and writes tensor_cores.json to RESULTS_DIR.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from gpu_suite import bench  # noqa: E402


def triton_matmul():
    """A plain Triton GEMM: one tile per program, `tl.dot` over K (what a Triton user writes first)."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def kernel(a, b_t, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr):
        pid = tl.program_id(0)
        tiles_m, tiles_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
        group = pid // (GROUP * tiles_n)
        first = group * GROUP
        rows = min(tiles_m - first, GROUP)
        pm = first + (pid % (GROUP * tiles_n)) % rows
        pn = (pid % (GROUP * tiles_n)) // rows
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            x = tl.load(a + rm[:, None] * K + (k + rk)[None, :], mask=rm[:, None] < M, other=0.0)
            y = tl.load(b_t + rn[None, :] * K + (k + rk)[:, None])
            acc += tl.dot(x, y)
        tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16), mask=rm[:, None] < M)

    def run(a, b_t, c, BM=128, BN=256, BK=64, warps=8, stages=3):
        M, K = a.shape
        N = b_t.shape[0]
        grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
        kernel[grid](a, b_t, c, M, N, K, BM, BN, BK, 8, num_warps=warps, num_stages=stages)

    return run


def cold_compile_seconds() -> float:
    """Trace to cubin in a fresh process with empty caches (imports not counted)."""
    code = (
        "import sys, time; sys.path.insert(0, 'examples'); import dsl, gemm_hopper; "
        "S = dsl.TensorSpec; a = S(dsl.bf16, shape=(8192, 8192)); "
        "import dsl.compiler.api; t = time.perf_counter(); "
        "dsl.compiler.api.compile_function(gemm_hopper.gemm_hopper, (a, a, a), until='cubin'); "
        "print(time.perf_counter() - t)"
    )
    env = {**os.environ, "KDSL_NO_DISK_CACHE": "1"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main(out_dir: str, quick: bool = False) -> None:
    import torch
    from gemm_hopper import gemm_hopper
    from matmul_mma import matmul_mma

    rows = []
    triton_run = triton_matmul()
    reps = 10 if quick else 30

    def row(name, flops, nbytes, times):
        entry = {"name": name, "ms": times,
                 "tflops": {k: flops / v / 1e9 for k, v in times.items()},
                 "tbs": {k: nbytes / v / 1e9 for k, v in times.items()}}
        rows.append(entry)
        print(json.dumps(entry), flush=True)

    def gemm_row(M: int, N: int, K: int) -> None:
        a = torch.randn(M, K, device="cuda").bfloat16()
        b_t = torch.randn(N, K, device="cuda").bfloat16()
        c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        bn = 64 if M <= 64 else 256  # a decode shape: narrower tiles, so every SM streams B
        gemm_hopper(a, b_t, c, bn)
        err = float((c.float() - (a @ b_t.T).float()).abs().max())
        assert err < 1.0, f"gemm_hopper {M}x{N}x{K}: max error {err}"
        times = {"kdsl": bench(lambda: gemm_hopper(a, b_t, c, bn), reps=reps),
                 "cuBLAS": bench(lambda: torch.matmul(a, b_t.T), reps=reps)}
        if triton_run is not None:
            ct = torch.empty_like(c)
            triton_run(a, b_t, ct)
            times["Triton"] = bench(lambda: triton_run(a, b_t, ct), reps=reps)
        row(f"gemm_bf16_{M}x{N}x{K}", 2 * M * N * K, 2 * (M * K + N * K + M * N), times)

    for shape in [(8192, 8192, 8192), (4096, 4096, 4096), (16, 8192, 8192)]:
        gemm_row(*shape)

    M = N = K = 4096
    a = torch.randn(M, K, device="cuda").bfloat16()
    b_t = torch.randn(N, K, device="cuda").bfloat16()
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    matmul_mma(a, b_t, c)
    err = float((c.float() - (a @ b_t.T).float()).abs().max())
    assert err < 1.0, f"matmul_mma: max error {err}"
    row("mma_sync_bf16_4096", 2 * M * N * K, 2 * (M * K + N * K + M * N),
        {"kdsl": bench(lambda: matmul_mma(a, b_t, c), reps=reps),
         "cuBLAS": bench(lambda: torch.matmul(a, b_t.T), reps=reps)})

    from attention_hopper import attention_hopper

    def attention_row(B: int, H: int, S: int, D: int, causal: bool) -> None:
        import torch.nn.functional as F

        q, k, v = (torch.randn(B, H, S, D, device="cuda").bfloat16() for _ in range(3))
        o = torch.empty(B * H, S, D, device="cuda", dtype=torch.bfloat16)
        flat = [t.view(B * H, S, D) for t in (q, k, v)]
        attention_hopper(*flat, o, D, causal)
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        err = float((o.view(B, H, S, D).float() - ref.float()).abs().max())
        assert err < 0.05, f"attention {B}x{H}x{S}x{D} causal={causal}: max error {err}"
        flops = 4 * B * H * S * S * D // (2 if causal else 1)
        row(f"attention_bf16_B{B}_H{H}_S{S}_D{D}{'_causal' if causal else ''}", flops, 2 * 4 * B * H * S * D,
            {"kdsl": bench(lambda: attention_hopper(*flat, o, D, causal), reps=reps),
             "torch SDPA": bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), reps=reps)})

    for D in (128, 64):
        for causal in (False, True):
            attention_row(4, 32, 4096, D, causal)

    import dsl
    from dsl.compiler import api, cache

    spec = dsl.TensorSpec(dsl.bf16, shape=(8192, 8192))
    api.compile_function(gemm_hopper, (spec, spec, spec), until="cubin")
    cache.MEMORY = cache.MemoryCache()  # warm: MLIR and the toolchain loaded, nothing cached
    start = time.perf_counter()
    api.compile_function(gemm_hopper, (spec, spec, spec), until="cubin")
    warm = time.perf_counter() - start
    compile_times = {"cold_s": cold_compile_seconds(), "warm_s": warm}
    print(json.dumps({"compile_gemm_hopper": compile_times}), flush=True)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "tensor_cores.json"), "w") as f:
        json.dump({"rows": rows, "compile": compile_times}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".", quick="--quick" in sys.argv)
