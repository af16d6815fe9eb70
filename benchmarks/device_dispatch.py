"""Host time per launch on each visible GPU (microseconds), against a bare `cuLaunchKernel`
on the same device. Goal: dispatch on cuda:1.. within 10% of cuda:0's.

    python benchmarks/device_dispatch.py [RESULTS_DIR] [--rounds N]

Method, as `host_us_per_launch` in gpu_suite.py, per device: a spin kernel (`torch.cuda._sleep`)
is queued on the device's current stream, then 100 launches are timed while that GPU is
still busy, so the clock reads only the host's cost of issuing them; the median over the
rounds. The kernel is examples/vector_add.py on 1024 floats (`add(a, b, c)`: three tensors
checked, the stream read, seven parameters packed), measured
- with the device current (`torch.cuda.device(N)`: a thread or process driving that GPU);
- from a thread where cuda:0 is current (one thread driving several GPUs: the launch pushes
  cuda:N's context and pops it);
- "bare": cuda-bindings' `cuLaunchKernel` of the same function on that device, parameters
  prebuilt, the stream fixed, the device current.
"native" says whether the launch took the C path (`dsl/runtime/_fastpath.c`) on that device.

Needs torch with CUDA and the MLIR bindings (the first call compiles). Writes
RESULTS_DIR/device_dispatch.json when RESULTS_DIR is given.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples"))

N = 1024
BATCH = 100


def us_per_launch(torch: Any, device: int, fn: Callable[[], Any], rounds: int, current: int | None = None) -> float:
    """Median host microseconds per call of `fn`, issued while cuda:`device` is busy with a
    spin kernel; `current` is the device current while timing (default: `device`)."""
    with torch.cuda.device(device):
        for _ in range(3 * BATCH):
            fn()
    times = []
    for _ in range(rounds):
        torch.cuda.synchronize(device)
        with torch.cuda.device(device):
            torch.cuda._sleep(4_000_000)  # GPU cycles: longer than the batch takes to issue
        with torch.cuda.device(device if current is None else current):
            t = time.perf_counter()
            for _ in range(BATCH):
                fn()
            times.append((time.perf_counter() - t) / BATCH * 1e6)
    torch.cuda.synchronize(device)
    return statistics.median(times)


def measure(torch: Any, device: int, rounds: int) -> dict[str, Any]:
    from cuda.bindings import driver as drv

    from dsl.runtime import driver
    from dsl.runtime.jit_call import specialization
    from dsl.runtime.launch import ArgPacker
    from dsl.runtime.native import fastpath
    from examples.vector_add import add

    where = f"cuda:{device}"
    a, b = torch.randn(N, device=where), torch.randn(N, device=where)
    c = torch.empty_like(a)
    with torch.cuda.device(device):
        add(a, b, c)
        torch.cuda.synchronize(device)
    assert torch.equal(c, a + b), f"wrong result on {where}"
    out: dict[str, Any] = {"device": device, "name": torch.cuda.get_device_name(device)}
    out["kdsl"] = us_per_launch(torch, device, lambda: add(a, b, c), rounds)
    if device != 0:
        out["kdsl, cuda:0 current"] = us_per_launch(torch, device, lambda: add(a, b, c), rounds, current=0)
    ctx = driver.primary_context(device)
    fn = specialization(add, a, b, c).rt.image.function(ctx, "vector_add")
    codes = ("ptr", "i32", "ptr", "i32", "ptr", "i32", "i32")
    packer = ArgPacker(codes)  # owns the parameter buffer: kept alive while timing
    params = packer.pack((a.data_ptr(), N, b.data_ptr(), N, c.data_ptr(), N, N))
    with torch.cuda.device(device):
        stream = torch.cuda.current_stream(device).cuda_stream
    out["bare"] = us_per_launch(torch, device,
                                lambda: drv.cuLaunchKernel(fn.handle, 1, 1, 1, 256, 1, 1, 0, stream, params, 0), rounds)
    out["kdsl / bare"] = out["kdsl"] / out["bare"]
    kernels = _native_kernels(specialization(add, a, b, c).launch)
    with torch.cuda.device(device):
        out["native"] = fastpath is not None and bool(kernels) and all(k.armed(device) for k in kernels)
    return out


def _native_kernels(launch: Any) -> list[Any]:
    """The C launch objects (`_fastpath.Kernel`) a generated launcher holds in its closure."""
    found = []
    for cell in launch.__closure__ or ():
        owner = getattr(cell.cell_contents, "__self__", None)
        if type(owner).__name__ == "Kernel":
            found.append(owner)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="?", help="folder for device_dispatch.json")
    parser.add_argument("--rounds", type=int, default=200, help="batches of 100 launches per figure")
    args = parser.parse_args()
    import torch

    count = torch.cuda.device_count()
    if count == 0:
        print("no GPU visible to torch", file=sys.stderr)
        return 1
    rows = [measure(torch, device, args.rounds) for device in range(count)]
    base = rows[0]["kdsl"]
    print(f"{'device':8s} {'name':24s} {'kdsl':>8s} {'cuda:0 cur':>10s} {'bare':>8s} {'kdsl/bare':>9s} "
          f"{'vs cuda:0':>9s} native")
    for row in rows:
        row["vs cuda:0"] = row["kdsl"] / base
        pushed = row.get("kdsl, cuda:0 current")
        print(f"cuda:{row['device']:<3d} {row['name'][:24]:24s} {row['kdsl']:8.2f} "
              f"{(f'{pushed:10.2f}' if pushed is not None else ' ' * 10)} {row['bare']:8.2f} "
              f"{row['kdsl / bare']:9.2f} {row['vs cuda:0']:9.2f} {row['native']}")
    worst = max(row["vs cuda:0"] for row in rows)
    print(f"dispatch on every device within {100 * (worst - 1):.1f}% of cuda:0's (goal: 10%)"
          if count > 1 else "one GPU visible: nothing to compare cuda:0 with")
    if args.results:
        os.makedirs(args.results, exist_ok=True)
        with open(os.path.join(args.results, "device_dispatch.json"), "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
