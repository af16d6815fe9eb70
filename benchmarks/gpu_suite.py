"""kdsl against its peers on one GPU, side by side in one run.

    python benchmarks/gpu_suite.py RESULTS_DIR [--quick] [--only=bandwidth,dispatch,first_call]

Measures: device copy ceiling; vector add (3 arrays); softmax, layernorm and row sum on
32768 x 4096 f32; transpose; host dispatch overhead per launch (kdsl, a bare
cuLaunchKernel from Python, torch.add, a CuPy RawKernel, Triton); the first call in a
cold process (kdsl compiling, kdsl from its disk cache, Triton, CuPy). Every result is
checked against PyTorch before it is timed. Prints a table and writes results.json to
RESULTS_DIR. Needs PyTorch; Triton and CuPy columns are skipped when they are missing.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples"))


def bench(fn, reps=50, warmup=5):
    """Median milliseconds per call, CUDA events around each call."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def rel_err(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


# --- Triton and CuPy comparison kernels (written here, small and plain) ----------------------------

def triton_kernels():
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def tri_add(a, b, c, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)

    @triton.jit
    def tri_softmax(x, y, cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        m = offs < cols
        v = tl.load(x + row * cols + offs, mask=m, other=-float("inf"))
        v = v - tl.max(v, 0)
        e = tl.exp(v)
        tl.store(y + row * cols + offs, e / tl.sum(e, 0), mask=m)

    return triton, tri_add, tri_softmax


CUPY_ADD = r"""
extern "C" __global__ void cupy_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""


# --- measurements --------------------------------------------------------------------------

def bandwidth_suite(results, quick):
    import torch

    from examples.layernorm import run_layernorm
    from examples.row_sum import run_row_sum
    from examples.softmax import run_softmax
    from examples.transpose import run_transpose
    from examples.vector_add import add

    tk = triton_kernels()
    rows = []

    def row(name, nbytes, impls):
        entry = {"op": name, "bytes": nbytes}
        for impl, fn in impls.items():
            if fn is None:
                continue
            ms = bench(fn)
            entry[impl] = {"ms": ms, "TBs": nbytes / ms / 1e9}
        rows.append(entry)
        results["bandwidth"] = rows

    # copy ceiling
    n = (1 << 26) if quick else (1 << 28)
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    row("device copy (ceiling)", 2 * src.nbytes, {"torch": lambda: dst.copy_(src)})
    src = dst = None

    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.full_like(a, float("nan"))
    add(a, b, c)
    assert torch.equal(c, a + b)
    impls = {"kdsl": lambda: add(a, b, c), "torch": lambda: torch.add(a, b, out=c)}
    sys.path.insert(0, os.path.join(ROOT, "benchmarks", "kernels"))
    from vector_add_x2 import add_x2

    c.fill_(float("nan"))
    add_x2(a, b, c)
    assert torch.equal(c, a + b)
    impls["kdsl x2"] = lambda: add_x2(a, b, c)
    if tk:
        triton, tri_add, _ = tk
        impls["triton"] = lambda: tri_add[(triton.cdiv(n, 1024),)](a, b, c, n, BLOCK=1024)
    row("vector add", 3 * a.nbytes, impls)
    a = b = c = None

    R, C = (8192, 4096) if quick else (32768, 4096)
    x = torch.randn(R, C, device="cuda")
    y = torch.full_like(x, float("nan"))
    run_softmax(x, y)
    assert rel_err(y, torch.softmax(x.double(), -1)) < 1e-5
    impls = {"kdsl": lambda: run_softmax(x, y), "torch": lambda: torch.softmax(x, -1, out=y)}
    for blk in (512, 1024):
        y.fill_(float("nan"))
        run_softmax(x, y, blk)
        assert rel_err(y, torch.softmax(x.double(), -1)) < 1e-5
        impls[f"kdsl B{blk}"] = lambda blk=blk: run_softmax(x, y, blk)
    if tk:
        _, _, tri_softmax = tk
        impls["triton"] = lambda: tri_softmax[(R,)](x, y, C, BLOCK=C, num_warps=16)
    row(f"softmax {R}x{C}", 2 * x.nbytes, impls)

    w, bias = torch.randn(C, device="cuda"), torch.randn(C, device="cuda")
    run_layernorm(x, w, bias, y, 1e-5)
    ref = torch.nn.functional.layer_norm(x.double(), (C,), w.double(), bias.double(), 1e-5)
    assert rel_err(y, ref) < 1e-4
    impls = {"kdsl": lambda: run_layernorm(x, w, bias, y, 1e-5),
             "torch": lambda: torch.nn.functional.layer_norm(x, (C,), w, bias, 1e-5)}
    for blk in (512, 1024):
        y.fill_(float("nan"))
        run_layernorm(x, w, bias, y, 1e-5, blk)
        assert rel_err(y, ref) < 1e-4
        impls[f"kdsl B{blk}"] = lambda blk=blk: run_layernorm(x, w, bias, y, 1e-5, blk)
    row(f"layernorm {R}x{C}", 2 * x.nbytes, impls)

    out = torch.full((R,), float("nan"), device="cuda")
    run_row_sum(x, out)
    assert rel_err(out, x.double().sum(1)) < 1e-5
    impls = {"kdsl": lambda: run_row_sum(x, out), "torch": lambda: torch.sum(x, 1, out=out)}
    for blk in (512, 1024):
        out.fill_(float("nan"))
        run_row_sum(x, out, blk)
        assert rel_err(out, x.double().sum(1)) < 1e-5
        impls[f"kdsl B{blk}"] = lambda blk=blk: run_row_sum(x, out, blk)
    row(f"row sum {R}x{C}", x.nbytes + out.nbytes, impls)
    y = out = None

    T = 4096 if quick else 16384
    xt = torch.randn(T, T, device="cuda")
    yt = torch.full_like(xt, float("nan"))
    run_transpose(xt, yt)
    assert torch.equal(yt, xt.t())
    row(f"transpose {T}x{T}", 2 * xt.nbytes, {
        "kdsl": lambda: run_transpose(xt, yt), "torch": lambda: yt.copy_(xt.t())})
    x = xt = yt = None
    torch.cuda.empty_cache()


def host_us_per_launch(fn, batch=100, rounds=200):
    """Host microseconds per launch: the median over `rounds` batches of `batch` launches,
    each batch issued while the GPU is still busy with a ~2 ms spin kernel queued first
    on the same stream. The clock then reads only the host's enqueue cost: neither the GPU
    draining a full queue (back to back, tiny kernels measure the GPU's per-kernel time)
    nor the extra cost of waking an idle GPU, which varies from machine to machine."""
    import torch

    for _ in range(3 * batch):
        fn()
    times = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        torch.cuda._sleep(4_000_000)  # GPU cycles: longer than the batch takes to issue
        t = time.perf_counter()
        for _ in range(batch):
            fn()
        times.append((time.perf_counter() - t) / batch * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times)


def dispatch_suite(results, quick):
    import torch
    from cuda.bindings import driver as drv

    from dsl.runtime.jit_call import specialization
    from examples.vector_add import add

    n = 1024
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.empty_like(a)
    out = {}

    def per_launch(fn):
        return host_us_per_launch(fn, rounds=40 if quick else 200)

    from dsl.runtime import torch_tensors
    from dsl.runtime.native import fastpath

    reader = torch_tensors.install(wait=True)  # the C++ tensor reader, built now if it is not yet
    out["kdsl"] = per_launch(lambda: add(a, b, c))
    if reader is not None:  # the same launch with the tensors read through torch's Python API
        fastpath.set_torch_reader(None)
        out["kdsl, tensors read through torch's Python API"] = per_launch(lambda: add(a, b, c))
        fastpath.set_torch_reader(reader.READER)
    # bare cuLaunchKernel on the same cubin and arguments, parameters prebuilt
    spec = specialization(add, a, b, c)
    from dsl.runtime.driver import check, current_context

    ctx = current_context()
    fn = spec.rt.image.function(ctx, "vector_add").handle
    from dsl.runtime.launch import ArgPacker

    packer = ArgPacker(("ptr", "i32", "ptr", "i32", "ptr", "i32", "i32"))
    params = packer.pack([a.data_ptr(), n, b.data_ptr(), n, c.data_ptr(), n, n])
    stream = torch.cuda.current_stream().cuda_stream
    launch = drv.cuLaunchKernel
    grid = (n + 1023) // 1024

    def bare():
        (err,) = launch(fn, grid, 1, 1, 256, 1, 1, 0, stream, params, 0)
        if err:
            raise RuntimeError(err)

    out["bare cuLaunchKernel"] = per_launch(bare)
    check((drv.cuCtxSynchronize()[0],), "sync")
    out["torch.add"] = per_launch(lambda: torch.add(a, b, out=c))
    try:
        import cupy as cp

        kern = cp.RawKernel(CUPY_ADD, "cupy_add")
        ca, cb = cp.asarray(a), cp.asarray(b)
        cc = cp.empty_like(ca)
        nn = cp.int32(n)
        out["CuPy RawKernel"] = per_launch(lambda: kern((grid,), (1024,), (ca, cb, cc, nn)))
    except ImportError:
        pass
    tk = triton_kernels()
    if tk:
        triton, tri_add, _ = tk
        out["Triton"] = per_launch(lambda: tri_add[(1,)](a, b, c, n, BLOCK=1024))
    out["kdsl / bare"] = out["kdsl"] / out["bare cuLaunchKernel"]
    results["dispatch_us"] = out


CHILD = {
    "kdsl": """
import torch, time, sys
sys.path.insert(0, %r)
import dsl
from vector_add import add
a = torch.randn(1 << 20, device='cuda'); b = torch.randn_like(a); c = torch.empty_like(a)
torch.cuda.synchronize()
t = time.perf_counter(); add(a, b, c); torch.cuda.synchronize(); dt = time.perf_counter() - t
assert torch.equal(c, a + b)
print(dt)
""".replace("%r", repr(os.path.join(ROOT, "examples"))),
    "triton": """
import torch, time, triton, triton.language as tl
@triton.jit
def tri_add(a, b, c, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)
a = torch.randn(1 << 20, device='cuda'); b = torch.randn_like(a); c = torch.empty_like(a)
torch.cuda.synchronize()
t = time.perf_counter(); tri_add[(1024,)](a, b, c, 1 << 20, BLOCK=1024); torch.cuda.synchronize()
dt = time.perf_counter() - t
assert torch.equal(c, a + b)
print(dt)
""",
    "cupy": """
import cupy as cp, time
SRC = %r
a = cp.random.randn(1 << 20, dtype=cp.float32); b = cp.random.randn(1 << 20, dtype=cp.float32); c = cp.empty_like(a)
cp.cuda.Device().synchronize()
t = time.perf_counter(); k = cp.RawKernel(SRC, 'cupy_add'); k((1024,), (1024,), (a, b, c, cp.int32(1 << 20)))
cp.cuda.Device().synchronize(); dt = time.perf_counter() - t
assert bool((c == a + b).all())
print(dt)
""".replace("%r", repr(CUPY_ADD)),
}


BUILD = "import sys; from dsl.cli_build import main; sys.exit(main(sys.argv[1:]))"  # `kdsl build FILE`


def first_call_suite(results, quick):
    out = {}
    runs = 2 if quick else 5
    with tempfile.TemporaryDirectory() as tmp:
        def child(name, env_extra):
            times = []
            for i in range(runs):
                env = dict(os.environ, PYTHONPATH=os.pathsep.join(
                    p for p in (ROOT, os.environ.get("PYTHONPATH")) if p), **env_extra(i))
                script = os.path.join(tmp, f"first_call_{name}.py")
                with open(script, "w") as f:
                    f.write(CHILD[name])
                proc = subprocess.run([sys.executable, script], cwd=ROOT, env=env,
                                      capture_output=True, text=True, timeout=300)
                if proc.returncode != 0:
                    return {"error": proc.stderr[-2000:]}
                times.append(float(proc.stdout.strip().splitlines()[-1]))
            return {"s": statistics.median(times), "runs": times}

        out["kdsl (compile: trace, lower, PTX, ptxas, load)"] = child(
            "kdsl", lambda i: {"KDSL_NO_DISK_CACHE": "1"})
        out["kdsl (compile, the driver's PTX compiler)"] = child(
            "kdsl", lambda i: {"KDSL_NO_DISK_CACHE": "1", "KDSL_ASSEMBLER": "driver"})
        warm_dir = os.path.join(tmp, "kdsl")
        child("kdsl", lambda i: {"KDSL_CACHE_DIR": warm_dir})  # fills the cache; the next runs hit it
        out["kdsl (disk cache hit)"] = child("kdsl", lambda i: {"KDSL_CACHE_DIR": warm_dir})
        built_dir = os.path.join(tmp, "kdsl-built")  # written ahead of time, as a deployment would
        build = subprocess.run([sys.executable, "-c", BUILD, os.path.join(ROOT, "examples", "vector_add.py")],
                               cwd=ROOT, capture_output=True, text=True, timeout=300,
                               env=dict(os.environ, KDSL_CACHE_DIR=built_dir, PYTHONPATH=os.pathsep.join(
                                   p for p in (ROOT, os.path.join(ROOT, "examples"), os.environ.get("PYTHONPATH"))
                                   if p)))
        out["kdsl (cache written by `kdsl build`)"] = (
            child("kdsl", lambda i: {"KDSL_CACHE_DIR": built_dir}) if build.returncode == 0
            else {"error": build.stdout[-1000:] + build.stderr[-1000:]})
        out["triton (empty cache)"] = child("triton", lambda i: {"TRITON_CACHE_DIR": os.path.join(tmp, f"tr{i}")})
        out["cupy RawKernel (empty cache)"] = child("cupy", lambda i: {"CUPY_CACHE_DIR": os.path.join(tmp, f"cp{i}")})
    results["first_call"] = out


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else "."
    quick = "--quick" in sys.argv
    import torch

    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "quick": quick}
    os.makedirs(out_dir, exist_ok=True)
    suites = {"bandwidth": bandwidth_suite, "dispatch": dispatch_suite, "first_call": first_call_suite}
    only = next((a.split("=", 1)[1].split(",") for a in sys.argv if a.startswith("--only=")), list(suites))
    for suite in (suites[name] for name in only):
        try:
            suite(results, quick)
        except Exception as err:  # report and go on: one failing suite hides no other
            import traceback

            results.setdefault("errors", []).append(f"{suite.__name__}: {traceback.format_exc()}")
            print(f"{suite.__name__} failed: {err}", file=sys.stderr)
        with open(os.path.join(out_dir, "results.json"), "w") as f:
            json.dump(results, f, indent=2)
    print_table(results)


def print_table(results):
    print(f"\n{results['device']}  (torch {results['torch']})")
    print("bandwidth: ms per call and TB/s (bytes: each input read once, each output written once)")
    for r in results.get("bandwidth", []):
        cells = [f"{k} {v['ms']:.3f}ms {v['TBs']:.2f}TB/s" for k, v in r.items() if isinstance(v, dict)]
        print(f"  {r['op']:24s} " + " | ".join(cells))
    print("\ndispatch per launch (us)")
    for k, v in results.get("dispatch_us", {}).items():
        print(f"  {k:28s} {v:8.2f}")
    print("\nfirst call in a cold process (s)")
    for k, v in results.get("first_call", {}).items():
        print(f"  {k:48s} {v.get('s', float('nan')):8.3f}" + (f"  ERROR {v['error'][-300:]}" if "error" in v else ""))
    for e in results.get("errors", []):
        print("ERROR", e)


if __name__ == "__main__":
    main()
