"""The kernels of `kernels.py` on the GPU, built for cuda-gdb (run with KDSL_DEBUG=1)."""

import sys

import torch
from kernels import run_steps


def main() -> None:
    x = torch.arange(256, dtype=torch.int32, device="cuda") * 3
    out = torch.zeros(256, dtype=torch.int32, device="cuda")
    run_steps(x, out)
    torch.cuda.synchronize()
    print("steps:", out[:3].tolist())


if __name__ == "__main__":
    main()
    sys.exit(0)
