"""A program the debugger runs whole (script mode): `script.py steps|shared|fault|loop`."""

import sys

import numpy as np
from kernels import run_by_warps, run_divergent_barrier, run_out_of_bounds, run_shared_sum, run_steps


def main(which: str) -> None:
    if which == "steps":
        x = np.arange(256, dtype=np.int32) * 3
        out = np.zeros(256, dtype=np.int32)
        run_steps(x, out)
        print("steps:", out[:3].tolist())
    elif which == "shared":
        x = np.arange(128, dtype=np.float32)
        out = np.zeros(2, dtype=np.float32)
        run_shared_sum(x, out)
        print("shared:", out.tolist())
    elif which == "fault":
        run_out_of_bounds(np.zeros(64, dtype=np.float32), np.zeros(64, dtype=np.float32))
    elif which == "barrier":
        run_divergent_barrier(np.zeros(64, dtype=np.float32))
    elif which == "warps":
        out = np.zeros(64, dtype=np.int32)
        run_by_warps(out)
        print("warps:", out[[0, 40]].tolist())
    elif which == "loop":
        x = np.arange(256, dtype=np.int32)
        out = np.zeros(256, dtype=np.int32)
        for _ in range(1000):
            run_steps(x, out)


if __name__ == "__main__":
    main(sys.argv[1])
