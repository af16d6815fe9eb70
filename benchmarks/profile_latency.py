"""How long *Profile on GPU* takes: command to report, for a small kernel and the Hopper GEMM,
and where the time goes (Nsight Compute's replay passes against the kernel's own duration).

Target (issue #29): under 10 s from command to report for a small kernel.

    python benchmarks/profile_latency.py            # on a machine with a GPU and ncu

Each row is `kdsl profile FILE::JIT --json` timed end to end, three runs, min and median;
"kernel" is the profiled launch's own duration from the report. A GEMM profile needs the
inputs of a script (bf16 tensors): it is timed through `dsl.profile` in a small script.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SMALL = f"{ROOT}/tests/profiling/planted.py::run_strided"
GEMM_SCRIPT = textwrap.dedent(f"""
    import sys
    sys.path.insert(0, {str(ROOT / "examples")!r})
    import torch, dsl
    from gemm_hopper import gemm_hopper
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(8192, 8192, device="cuda", dtype=torch.bfloat16)
    print("REPORT" + dsl.profile(gemm_hopper, a, b, c).dumps().replace(chr(10), " "))
""")


def timed(command: list[str], cwd: Path) -> tuple[float, dict]:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=cwd, timeout=600)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    text = next((line[len("REPORT"):] for line in done.stdout.splitlines() if line.startswith("REPORT")), done.stdout)
    return elapsed, json.loads(text)


def row(name: str, command: list[str], cwd: Path) -> None:
    runs = [timed(command, cwd) for _ in range(3)]
    walls = [wall for wall, _ in runs]
    kernel = runs[-1][1]["kernels"][0]
    print(f"| {name} | {min(walls):.1f} s | {statistics.median(walls):.1f} s | {kernel['duration_us']:.1f} us "
          f"| {kernel['limiter']} |")


def main() -> None:
    print("| what | command -> report (min) | median | kernel | limiter |\n|---|---|---|---|---|")
    row("small kernel (strided gather, 2^24 f32)", [sys.executable, "-m", "lsp.cli", "profile", SMALL, "--json"], ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "gemm.py"
        script.write_text(GEMM_SCRIPT)
        row("Hopper GEMM bf16 8192^3 (dsl.profile)", [sys.executable, str(script)], Path(tmp))


if __name__ == "__main__":
    main()
