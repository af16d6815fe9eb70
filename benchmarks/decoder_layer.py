"""A Llama-3-8B decoder layer of kdsl kernels against the same layer in plain PyTorch, both
under `torch.compile(mode="max-autotune", fullgraph=True)`, on one GPU, interleaved in one run.

    python benchmarks/decoder_layer.py RESULTS_DIR [--quick] [--only=prefill,decode,overhead]

The layers are `examples/pytorch/llama_layer.py`: `KdslLlamaLayer` (the projections by
gemm_hopper in prefill and by gemm_small_m's swapped split-K kernel in decode, planned for the
batch when the cache is attached; attention_hopper with GQA, attention_decode, and the small
RMSNorm / RoPE / SwiGLU / add kernels, each a kdsl operator) and `TorchLlamaLayer` (F.linear,
F.rms_norm, SDPA with enable_gqa, F.silu), over the same random weights and RoPE tables.
Before anything is timed, each layer's output (eager and compiled) is checked against the
PyTorch layer run eagerly; a mismatch stops the run.

Rows (one JSON line each, also in RESULTS_DIR/decoder_layer.json):

- `prefill_B1_S4096`: one sequence of 4096 tokens, causal attention over them.
- `decode_B32_KV4096`: 32 sequences, one new token each at position 4095 of a 4096-position KV
  cache already filled (the step writes k and v there and attends to all 4096 positions; its
  four GEMMs are M = 32 rows, gemm_small_m with split-K where `plan_for` gives it, on the
  layer's workspace buffers).
  For both: `ms` per layer call of each compiled layer, CUDA events around each call, the
  median of each round's median, rounds alternating kdsl / torch (A, B, A, B, ...), and
  `kdsl_speedup` = torch ms / kdsl ms. max-autotune autotunes the PyTorch layer's GEMMs
  (cuBLAS against Triton templates) and runs both layers in CUDA graphs (cudagraph trees);
  the kdsl layer's graph holds only kdsl operators and views, so it gains the CUDA graph and
  nothing else. `cudagraph_skips` counts Inductor's refusals to use CUDA graphs (0: both did),
  `compile_s` each layer's first compiled call; `kernels_us` what each compiled layer runs on
  the GPU per call (kernels and copies, torch.profiler's CUPTI trace), `kernels_ms` their sum,
  so `ms - kernels_ms` is what the step costs beyond its kernels.
- `overhead_prefill`, `overhead_decode`: the kdsl layer without torch.compile, where the host's
  work shows. `eager_ms`: a plain call (each operator through torch's dispatcher into kdsl's
  launcher, every output allocated), CUDA events around the call, so the host's time counts
  wherever the GPU waits for it; `host_ms`: the host's time alone to issue one call (the clock
  around a batch of calls, the GPU kept busy so that it never waits); `cuda_graph_ms`: the same
  call captured once in a `torch.cuda.CUDAGraph` and replayed (no host work but one launch);
  `kernels_ms`: the sum of the GPU time of the call's kernels (torch.profiler's CUPTI trace of a
  few calls, per call), with each kernel's share in `kernels_us` and `launches` per call.
  `eager_ms - kernels_ms` is what dispatch costs the eager layer; `cuda_graph_ms - kernels_ms`
  the gaps a graph still leaves between kernels.

max-autotune compiles take minutes (the PyTorch layer's GEMMs are tuned per shape): only these
two shapes are compiled, and progress goes to stderr as it happens. `--quick` runs fewer rounds.
Needs a Hopper GPU (sm_90) that torch and kdsl both see; elsewhere it says so and exits.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _path in (ROOT, os.path.join(ROOT, "examples"), os.path.join(ROOT, "examples", "pytorch"),
              os.path.join(ROOT, "benchmarks")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

PREFILL_S = 4096
DECODE_B, CACHE_LEN = 32, 4096
POS = CACHE_LEN - 1  # the new token's position: the step attends to all CACHE_LEN positions
DEVICE = "cuda"
TOLERANCE = 2e-2  # norm-wise relative error against the eager PyTorch layer (bf16 roundings)


def progress(text: str) -> None:
    print(f"[decoder_layer {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def gpu_or_exit() -> None:
    """Exits with a message (no traceback) where torch, kdsl or a Hopper GPU is missing."""
    try:
        import torch
    except ImportError:
        sys.exit("decoder_layer: needs PyTorch (and a Hopper GPU); torch is not installed here")
    from dsl.runtime import driver

    if not torch.cuda.is_available() or not driver.available():
        sys.exit("decoder_layer: needs an NVIDIA Hopper GPU (sm_90) that torch and kdsl both see; none here")
    if torch.cuda.get_device_capability() < (9, 0):
        sys.exit(f"decoder_layer: gemm_hopper and attention_hopper need sm_90; this GPU is "
                 f"{torch.cuda.get_device_name()} (sm_{''.join(map(str, torch.cuda.get_device_capability()))})")


def relative_error(got: Any, expected: Any) -> tuple[float, float]:
    """(norm-wise relative error, largest absolute error)."""
    diff = got.double() - expected.double()
    return float(diff.norm() / expected.double().norm()), float(diff.abs().max())


def check(name: str, got: Any, expected: Any, rows: list) -> None:
    rel, worst = relative_error(got, expected)
    entry = {"check": name, "rel_err": rel, "max_err": worst}
    print(json.dumps(entry), flush=True)
    rows.append(entry)
    if not rel <= TOLERANCE:  # NaN fails too
        sys.exit(f"decoder_layer: {name} differs from the eager PyTorch layer (relative error {rel:.3g}, "
                 f"max {worst:.3g}); nothing is timed")


def interleaved(fns: dict[str, Callable[[], Any]], rounds: int, reps: int) -> dict[str, float]:
    """ms per call of each function: the median over `rounds` of each round's median of `reps`
    calls, the functions taking turns round by round (A, B, A, B, ...)."""
    from gpu_suite import bench

    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            times[name].append(bench(fn, reps=reps, warmup=2))
    return {name: statistics.median(t) for name, t in times.items()}


def host_ms(fn: Callable[[], Any], calls: int = 20, rounds: int = 5) -> float:
    """The host's ms to issue one call, with a spin kernel queued first so the GPU is busy
    throughout and the clock reads only the host's work."""
    import torch

    times = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        torch.cuda._sleep(200_000_000)  # GPU cycles: longer than the batch takes to issue
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls * 1e3)
    torch.cuda.synchronize()
    return statistics.median(times)


def kernel_times(fn: Callable[[], Any], calls: int = 5) -> tuple[dict[str, float], float]:
    """(microseconds per call of each kernel, and copy, the call runs on the GPU; launches per
    call), from torch.profiler's CUDA activity (CUPTI)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    per_kernel: dict[str, float] = defaultdict(float)
    launches = 0
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            per_kernel[event.name] += getattr(event, "device_time_total", 0.0) / calls
            launches += 1
    return dict(sorted(per_kernel.items(), key=lambda kv: -kv[1])), launches / calls


def graph_of(fn: Callable[[], Any]) -> Any:
    """`fn` captured in a CUDA graph, after warm-up calls on a side stream (as torch asks)."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


def cudagraph_skips() -> int:
    """How many times Inductor has declined CUDA graphs for a compiled graph so far."""
    from torch._dynamo.utils import counters

    return int(counters["inductor"].get("cudagraph_skips", 0))


def compiled(fn: Callable[..., Any], label: str, *args: Any) -> tuple[Callable[..., Any], float]:
    """fn under torch.compile(mode="max-autotune", fullgraph=True), called once (the compile)."""
    import torch

    progress(f"compiling {label} (max-autotune)")
    step = torch.compile(fn, mode="max-autotune", fullgraph=True)
    start = time.perf_counter()
    torch.compiler.cudagraph_mark_step_begin()
    step(*args)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    progress(f"compiled {label} in {seconds:.1f} s")
    return step, seconds


def stepper(fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    """A call of a compiled layer as a loop makes it: a new cudagraph-trees step each time."""
    import torch

    def call() -> Any:
        torch.compiler.cudagraph_mark_step_begin()
        return fn(*args)

    return call


def compare(path: str, kdsl_fn: Callable[..., Any], torch_fn: Callable[..., Any], args: tuple, expected: Any,
            rows: list, rounds: int, reps: int, name: str) -> None:
    """Compiles both layers' `path`, checks them, and times them interleaved."""
    skips = cudagraph_skips()
    kdsl_step, kdsl_s = compiled(kdsl_fn, f"kdsl {path}", *args)
    kdsl_skips, skips = cudagraph_skips() - skips, cudagraph_skips()
    torch_step, torch_s = compiled(torch_fn, f"torch {path}", *args)
    torch_skips = cudagraph_skips() - skips
    check(f"{path}: kdsl compiled", stepper(kdsl_step, *args)().clone(), expected, rows)
    check(f"{path}: torch compiled", stepper(torch_step, *args)().clone(), expected, rows)
    progress(f"timing {path}")
    ms = interleaved({"kdsl": stepper(kdsl_step, *args), "torch": stepper(torch_step, *args)}, rounds, reps)
    progress(f"tracing {path}'s kernels")
    kernels = {label: kernel_times(stepper(step, *args))
               for label, step in (("kdsl", kdsl_step), ("torch", torch_step))}
    entry = {"name": name, "ms": ms, "kdsl_speedup": ms["torch"] / ms["kdsl"],
             "compile_s": {"kdsl": kdsl_s, "torch": torch_s},
             "cudagraph_skips": {"kdsl": kdsl_skips, "torch": torch_skips},
             "kernels_ms": {label: sum(k.values()) / 1e3 for label, (k, _) in kernels.items()},
             "launches": {label: n for label, (_, n) in kernels.items()},
             "kernels_us": {label: k for label, (k, _) in kernels.items()}}
    print(json.dumps(entry), flush=True)
    rows.append(entry)


def overhead(path: str, call: Callable[[], Any], rows: list, rounds: int) -> None:
    """The eager kdsl layer's host cost: eager against a CUDA graph of it and its kernels' sum."""
    from gpu_suite import bench

    progress(f"launch overhead of the eager kdsl layer, {path}")
    graph = graph_of(call)
    kernels, launches = kernel_times(call)
    eager = statistics.median(bench(call, reps=10, warmup=2) for _ in range(rounds))
    replay = statistics.median(bench(graph.replay, reps=10, warmup=2) for _ in range(rounds))
    total = sum(kernels.values()) / 1e3
    entry = {"name": f"overhead_{path}", "eager_ms": eager, "host_ms": host_ms(call), "cuda_graph_ms": replay,
             "kernels_ms": total, "launches": launches, "kernels_us": kernels}
    print(json.dumps(entry), flush=True)
    rows.append(entry)


def main(out_dir: str, quick: bool, only: list[str]) -> None:
    gpu_or_exit()
    import llama_layer
    import torch

    rounds, reps = (3, 5) if quick else (10, 20)
    rows: list = []
    torch.manual_seed(0)
    progress("building both layers at Llama-3-8B's dimensions (same weights)")
    config = llama_layer.LlamaConfig()
    kdsl_layer, torch_layer = llama_layer.make_layers(config, device=DEVICE)
    cache_shape = (DECODE_B, config.kv_heads, CACHE_LEN, config.head_dim)
    k_cache = torch.randn(cache_shape, device=DEVICE).bfloat16()
    v_cache = torch.randn(cache_shape, device=DEVICE).bfloat16()
    kdsl_layer.attach_cache(k_cache, v_cache)
    torch_layer.attach_cache(k_cache.clone(), v_cache.clone())
    x_prefill = torch.randn(PREFILL_S, config.hidden, device=DEVICE).bfloat16()
    x_decode = torch.randn(DECODE_B, config.hidden, device=DEVICE).bfloat16()

    path = os.path.join(out_dir, "decoder_layer.json")
    os.makedirs(out_dir, exist_ok=True)

    def save() -> None:  # after every part, so that a later failure keeps what was measured
        with open(path, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "quick": quick,
                       "rows": rows}, f, indent=1)

    with torch.no_grad():
        progress("checking the eager kdsl layer against the eager PyTorch layer (kdsl compiles its kernels)")
        expected_prefill = torch_layer.prefill(x_prefill)
        check("prefill: kdsl eager", kdsl_layer.prefill(x_prefill), expected_prefill, rows)
        expected_decode = torch_layer.decode(x_decode, POS)  # writes the same k, v at POS on every call
        check("decode: kdsl eager", kdsl_layer.decode(x_decode, POS), expected_decode, rows)
        check("decode: kdsl k cache at POS", kdsl_layer.k_cache[:, :, POS], torch_layer.k_cache[:, :, POS], rows)
        save()
        if "prefill" in only:
            compare("prefill", kdsl_layer.prefill, torch_layer.prefill, (x_prefill,), expected_prefill, rows,
                    rounds, reps // 2, f"prefill_B1_S{PREFILL_S}")
            save()
        if "decode" in only:
            compare("decode", kdsl_layer.decode, torch_layer.decode, (x_decode, POS), expected_decode, rows,
                    rounds, reps, f"decode_B{DECODE_B}_KV{CACHE_LEN}")
            save()
        if "overhead" in only:
            overhead("prefill", lambda: kdsl_layer.prefill(x_prefill), rows, rounds)
            overhead("decode", lambda: kdsl_layer.decode(x_decode, POS), rows, rounds)
            save()
    progress(f"wrote {path}")


if __name__ == "__main__":
    arguments = [a for a in sys.argv[1:] if not a.startswith("--")]
    chosen = next((a.split("=", 1)[1].split(",") for a in sys.argv if a.startswith("--only=")),
                  ["prefill", "decode", "overhead"])
    main(arguments[0] if arguments else ".", "--quick" in sys.argv, chosen)
