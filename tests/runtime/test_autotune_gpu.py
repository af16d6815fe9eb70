"""Autotuning on the GPU (marked gpu): the examples' softmax and tiled matmul tuned over a few
configs with CUDA-event timing, a second process doing zero trials, an in-place kernel still
right after its trials, `kdsl tune` then `kdsl build` compiling only the recorded winner.

Each test tunes a fresh copy of the example's function (`fresh`), so one test's in-memory
choice never answers another's; the on-disk records are per test (`KDSL_CACHE_DIR`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import dsl
from dsl import Constexpr, Float32, Int32, Tensor, f32
from dsl.runtime.autotune import tuner

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]


def fresh(jit_fn, configs=None, **options):
    """A new autotuned jit function over the same Python function as `jit_fn`."""
    spec = jit_fn.tuning
    if spec is not None:
        options = {"key": list(spec.key), "restore": spec.restore, **options}
    return dsl.autotune(configs=configs or list(spec.configs), **options)(dsl.jit(jit_fn.fn))


def _rel(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


def test_softmax_is_tuned_over_its_block_sizes_and_a_bad_one_is_skipped(torch):
    from examples.softmax_autotuned import run_softmax_autotuned

    configs = [dsl.Config(BLOCK=b) for b in (128, 256, 512, 1024, 2048)]
    fn = fresh(run_softmax_autotuned, configs)
    x = torch.randn(4096, 4096, device="cuda")
    y = torch.full_like(x, float("nan"))
    tuning = tuner(fn).tune((x, y), {})
    assert tuning.trials == 4  # BLOCK=2048 does not compile, so it never runs
    assert [o.ms is not None for o in tuning.outcomes] == [True, True, True, True, False]
    assert tuning.outcomes[-1].error.startswith("DSL203"), tuning.outcomes[-1].error
    assert tuning.winner in configs[:4]
    fn(x, y)
    torch.cuda.synchronize()
    assert _rel(y, torch.softmax(x, dim=1)) < 1e-5
    assert tuner(fn).trials == 4  # the call found the choice


def test_matmul_is_tuned_over_compile_hints(torch):
    from examples.matmul_tiled import run_matmul_tiled

    configs = [dsl.Config(), dsl.Config(maxnreg=128), dsl.Config(minnctapersm=2), dsl.Config(maxnreg=64)]
    fn = fresh(run_matmul_tiled, configs, key=["a", "b"],
               flops=lambda a, b, c: 2 * a.shape[0] * a.shape[1] * b.shape[1])
    a, b = torch.randn(1024, 512, device="cuda"), torch.randn(512, 768, device="cuda")
    c = torch.full((1024, 768), float("nan"), device="cuda")
    tuning = tuner(fn).tune((a, b, c), {})
    assert tuning.trials == 4
    assert all(o.ms is not None for o in tuning.outcomes), [o.error for o in tuning.outcomes]
    capped = tuning.outcomes[3].kernels[0]
    assert capped["registers"] <= 64 and capped["spill_stores"] > 0  # the hint reached ptxas
    fn(a, b, c)
    torch.cuda.synchronize()
    assert _rel(c, a @ b) < 1e-5


def test_the_hopper_gemm_is_tuned_over_its_tile_width_and_clusters(torch):
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("the Hopper GEMM needs sm_90")
    from examples.gemm_hopper import gemm_hopper

    configs = [dsl.Config(BN=256), dsl.Config(BN=128), dsl.Config(BN=256, CLUSTER=2), dsl.Config(BN=512)]
    fn = fresh(gemm_hopper, configs, key=["a", "b_t"],
               flops=lambda a, b_t, c: 2 * a.shape[0] * a.shape[1] * b_t.shape[0])
    a = torch.randn(2048, 1024, device="cuda", dtype=torch.bfloat16)
    b_t = torch.randn(1536, 1024, device="cuda", dtype=torch.bfloat16)
    c = torch.full((2048, 1536), float("nan"), device="cuda", dtype=torch.bfloat16)
    tuning = tuner(fn).tune((a, b_t, c), {})
    assert [o.ms is not None for o in tuning.outcomes] == [True, True, True, False]
    assert tuning.outcomes[3].error.startswith("DSL301"), tuning.outcomes[3].error  # TMA boxes stop at 256
    assert tuning.trials == 3 and tuning.winner in configs[:3]
    assert all(o.kernels and o.kernels[0]["registers"] > 0 for o in tuning.outcomes[:3])
    fn(a, b_t, c)
    torch.cuda.synchronize()
    assert _rel(c, a @ b_t.T) < 1e-2


@dsl.kernel
def _axpy(x: Tensor[f32], y: Tensor[f32], a: Float32, n: Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    if i < n:
        y[i] = a * x[i] + y[i]


@dsl.autotune(configs=[dsl.Config(BLOCK=b) for b in (64, 128, 256, 512, 1024)], key=["x"])
@dsl.jit
def _run_axpy(x: Tensor[f32], y: Tensor[f32], a: Float32, BLOCK: Constexpr[int] = 256):
    n = x.shape[0]
    _axpy(x, y, a, n).launch(grid=dsl.cdiv(n, BLOCK), block=BLOCK)


def test_an_in_place_kernel_is_right_after_its_trials(torch):
    fn = fresh(_run_axpy)
    x, y = torch.randn(1 << 22, device="cuda"), torch.randn(1 << 22, device="cuda")
    expected = 3.0 * x + y
    fn(x, y, 3.0)  # hundreds of launches while tuning, each adding 3x to y, undone after each config
    torch.cuda.synchronize()
    assert tuner(fn).trials == 5
    assert _rel(y, expected) < 1e-6
    candidates = list(tuner(fn)._candidates.values())
    assert {c.writes for c in candidates} == {("y",)}  # found from what the kernel stores to


CHILD = """\
import json, sys
sys.path.insert(0, {examples!r})
import torch
from softmax_autotuned import run_softmax_autotuned
from dsl.runtime.autotune import tuner
x = torch.randn(2048, 4096, device="cuda")
y = torch.empty_like(x)
run_softmax_autotuned(x, y)
torch.cuda.synchronize()
error = float((y.double() - torch.softmax(x.double(), dim=1)).norm() / torch.softmax(x.double(), dim=1).norm())
print(json.dumps({{"trials": tuner(run_softmax_autotuned).trials, "error": error}}))
"""


def test_a_second_process_does_zero_trials(torch, tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(examples=str(ROOT / "examples")))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}

    def run() -> dict:
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    first, second = run(), run()
    assert first["trials"] == 4 and second["trials"] == 0
    assert first["error"] < 1e-5 and second["error"] < 1e-5


def test_kdsl_tune_records_the_choice_and_kdsl_build_compiles_only_it(torch, capsys):
    from dsl.cli_build import main as build
    from dsl.cli_tune import main as tune

    path = str(ROOT / "examples" / "softmax_autotuned.py")
    assert tune([path]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.lstrip("* ").startswith("BLOCK=")]
    assert len(rows) == 4, out
    winner = next(line.split()[1] for line in rows if line.startswith("*"))
    assert build([path]) == 0
    built = [line for line in capsys.readouterr().out.splitlines() if "run_softmax_autotuned(" in line]
    assert len(built) == 1 and f"[{winner}]" in built[0], built
