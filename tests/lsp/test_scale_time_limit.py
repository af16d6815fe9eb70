"""The time limit stops a step that hangs, not a file that is big: each step of an analysis
(running the module, compiling one function) gets the whole limit.

The kernels here call `time.sleep` in their bodies, which runs while they are traced: six
of them take about three times the 2 s limit in all, but well under it each.
"""

from __future__ import annotations

from pathlib import Path

from lsp.worker import AnalysisWorker

HEAD = "import time\n\nimport dsl\nfrom dsl import Tensor, f32\n"
SLOW_KERNEL = """

@dsl.kernel
def k{i}(x: Tensor[f32, 1]):
    time.sleep({seconds})
    x[dsl.thread_idx.x] = 1.0
"""


def slow_kernels(count: int, seconds: float) -> str:
    return HEAD + "".join(SLOW_KERNEL.format(i=i, seconds=seconds) for i in range(count))


async def analyse(source: str, path: Path, timeout: float):
    worker = AnalysisWorker(parallel=1, keep_warm=0, timeout=timeout)
    try:
        return await worker.analyze(source, str(path))
    finally:
        await worker.close()


async def test_a_file_slower_than_the_limit_in_all_still_compiles(tmp_path: Path) -> None:
    report = await analyse(slow_kernels(6, 0.9), tmp_path / "slow.py", timeout=2.0)
    assert report.all_diagnostics() == []
    assert [(f.name, f.compiled is not None) for f in report.functions] == [(f"k{i}", True) for i in range(6)]


async def test_a_step_that_hangs_is_still_stopped(tmp_path: Path) -> None:
    """k1 sleeps for a minute: DSL002 after its limit (with no line: the sleep is called by the
    tracer, so no frame of the file is running)."""
    report = await analyse(slow_kernels(1, 0.1) + SLOW_KERNEL.format(i=1, seconds=60), tmp_path / "hangs.py", 2.0)
    (failure,) = report.all_diagnostics()
    assert failure.code == "DSL002"
    assert failure.message == "Running this module for analysis timed out after 2 s."
