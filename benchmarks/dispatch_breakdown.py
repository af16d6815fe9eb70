"""Where the host time of one warm kdsl launch goes (microseconds per call).

    python benchmarks/dispatch_breakdown.py [RESULTS_DIR]
"""

import cProfile
import io
import json
import os
import pstats
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples"))


def per_call(fn):
    from gpu_suite import host_us_per_launch

    return host_us_per_launch(fn)


def main():
    import torch
    from cuda.bindings import driver as drv

    from dsl.runtime import jit_call, launch, torch_tensors
    from dsl.runtime.native import fastpath as native
    from examples.vector_add import add

    reader = torch_tensors.install(wait=True)  # the C++ tensor reader (built now if it is not yet)
    a, b = torch.randn(1024, device="cuda"), torch.randn(1024, device="cuda")
    c = torch.empty_like(a)
    add(a, b, c)
    state = add._kdsl_state
    spec = jit_call.specialization(add, a, b, c)
    rt = spec.rt
    fn = rt.image.function(launch._context(None), "vector_add").handle
    codes = ("ptr", "i32", "ptr", "i32", "ptr", "i32", "i32")
    values = (a.data_ptr(), 1024, b.data_ptr(), 1024, c.data_ptr(), 1024, 1024)
    packer = launch.ArgPacker(codes)  # owns the parameter buffer: kept alive while timing
    params = packer.pack(values)
    read_args = rt.arg_reader((("a", "f32", 1), ("b", "f32", 1), ("c", "f32", 1)))
    kernel = rt.kernel("vector_add", codes)
    kernel((1, 1, 1), (256, 1, 1), 0, 0, *values)  # loads, and arms the native launch
    stream = torch.cuda.current_stream().cuda_stream
    out = {
        "add(a, b, c)": per_call(lambda: add(a, b, c)),
        "call_jit": per_call(lambda: jit_call.call_jit(add, (a, b, c), {})),
        "launcher launch(a, b, c)": per_call(lambda: spec.launch(a, b, c)),
        "read_args(a, b, c, None)": per_call(lambda: read_args(a, b, c, None)),
        "kernel launch (params built)": per_call(lambda: kernel((1, 1, 1), (256, 1, 1), 0, stream, *values)),
        "bare cuLaunchKernel": per_call(lambda: drv.cuLaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, stream, params, 0)),
        "key": per_call(lambda: jit_call._key(state, (a, b, c), {})),
        "torch raw stream": per_call(lambda: launch._torch_stream(0)),
        "native path": native is not None and kernel.__self__.armed(),
        "C++ tensor reader": native is not None and native.has_torch_reader(),
    }
    if reader is not None:  # the same reads and calls with the tensors read through torch's Python API
        native.set_torch_reader(None)
        out["read_args, Python API reads"] = per_call(lambda: read_args(a, b, c, None))
        out["add(a, b, c), Python API reads"] = per_call(lambda: add(a, b, c))
        native.set_torch_reader(reader.READER)
    for k, v in out.items():
        print(f"{k:28s} {v:7.2f} us" if not isinstance(v, bool) else f"{k:28s} {v}")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(50):
        for _ in range(100):
            add(a, b, c)
        torch.cuda.synchronize()
    prof.disable()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(14)
    print(s.getvalue())
    if len(sys.argv) > 1:
        with open(os.path.join(sys.argv[1], "dispatch_breakdown.json"), "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
