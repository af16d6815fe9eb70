"""Where the host time of one warm kdsl launch goes (microseconds per call).

    python benchmarks/dispatch_breakdown.py [RESULTS_DIR]
"""

import cProfile
import io
import json
import os
import pstats
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples"))


def per_call(fn, n=20000):
    import torch

    for _ in range(500):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n * 1e6)
        torch.cuda.synchronize()
    return best


def main():
    import torch
    from cuda.bindings import driver as drv

    from dsl.runtime import jit_call, launch
    from dsl.runtime.native import fastpath as native
    from examples.vector_add import add

    a, b = torch.randn(1024, device="cuda"), torch.randn(1024, device="cuda")
    c = torch.empty_like(a)
    add(a, b, c)
    state = add._kdsl_state
    spec = jit_call.specialization(add, a, b, c)
    rt = spec.rt
    fn = rt.image.function(launch._context(None), "vector_add").handle
    params = launch.ArgPacker(("ptr", "i32", "ptr", "i32", "ptr", "i32", "i32")).pack(
        [a.data_ptr(), 1024, b.data_ptr(), 1024, c.data_ptr(), 1024, 1024])
    codes = ("ptr", "i32", "ptr", "i32", "ptr", "i32", "i32")
    values = (a.data_ptr(), 1024, b.data_ptr(), 1024, c.data_ptr(), 1024, 1024)
    out = {
        "add(a, b, c)": per_call(lambda: add(a, b, c)),
        "call_jit": per_call(lambda: jit_call.call_jit(add, (a, b, c), {})),
        "launcher(rt, a, b, c)": per_call(lambda: spec.launch(rt, a, b, c)),
        "rt.launch (args built)": per_call(lambda: rt.launch("vector_add", (1, 1, 1), (256, 1, 1), 0, None, None,
                                                             codes, values)),
        "rt.launch (stream=0)": per_call(lambda: rt.launch("vector_add", (1, 1, 1), (256, 1, 1), 0, 0, None,
                                                           codes, values)),
        "bare cuLaunchKernel": per_call(lambda: drv.cuLaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, 0, params, 0)),
        **({"native launch (C)": per_call(lambda: native.launch(int(fn), 1, 1, 1, 256, 1, 1, 0, 0, params))}
           if native is not None else {}),
        "key": per_call(lambda: jit_call._key(state, (a, b, c), {})),
        "tensor_arg x3": per_call(lambda: (rt.tensor_arg(a, "a", "f32", 1), rt.tensor_arg(b, "b", "f32", 1),
                                           rt.tensor_arg(c, "c", "f32", 1))),
        "context": per_call(lambda: launch._context(None)),
        "torch raw stream": per_call(lambda: launch._torch_stream(0)),
        "cuCtxGetCurrent": per_call(lambda: drv.cuCtxGetCurrent()),
    }
    for k, v in out.items():
        print(f"{k:28s} {v:7.2f} us")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(20000):
        add(a, b, c)
    prof.disable()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(14)
    print(s.getvalue())
    if len(sys.argv) > 1:
        with open(os.path.join(sys.argv[1], "dispatch_breakdown.json"), "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
