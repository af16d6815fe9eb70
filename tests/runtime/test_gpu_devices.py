"""Kernels on every GPU of the host (marked gpu): the arguments' device chooses the context,
the module, the stream; threads and processes drive different GPUs at once.

The one-GPU tests run on device 0 named explicitly and under `CUDA_VISIBLE_DEVICES=0`; the
two-GPU tests skip where fewer than two GPUs are visible. Every result is checked against
torch. The kernel is examples/saxpy.py (`y = a * x + y`).
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import dsl
from dsl.runtime import ArgumentError

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
SAXPY = ROOT / "examples" / "saxpy.py"
PARAMS = (("x", "f32", 1), ("y", "f32", 1), ("a", "f32", None))
N = 100_003


@pytest.fixture
def two_gpus(torch):
    """torch, on a host where it sees at least two GPUs."""
    count = torch.cuda.device_count()
    if count < 2:
        pytest.skip(f"needs 2 visible GPUs; {count} visible")
    return torch


def _rel(a, b) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


def _saxpy_on(torch, device: int, a: float = 2.5):
    """Runs run_saxpy once on cuda:`device`; returns (y, the expected y) on that device."""
    from examples.saxpy import run_saxpy

    x = torch.randn(N, device=f"cuda:{device}")
    y = torch.randn(N, device=f"cuda:{device}")
    expected = a * x + y
    run_saxpy(x, y, a)
    torch.cuda.synchronize(device)
    return y, expected


def _env() -> dict[str, str]:
    """The test's environment for a child process, with the project and its examples importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), str(ROOT / "examples"), env.get("PYTHONPATH")) if p)
    return env


# A child process: saxpy `loops` times on cuda:DEVICE (DEVICE None: plain "cuda"), checked
# against torch; prints "ok <visible GPUs>".
CHILD = """
import sys
import torch
from dsl.runtime import driver
from examples.saxpy import run_saxpy

device = None if sys.argv[1] == "none" else int(sys.argv[1])
where = "cuda" if device is None else f"cuda:{device}"
if sys.argv[2] == "set":
    torch.cuda.set_device(device)
x = torch.randn(100_003, device=where)
y = torch.randn(100_003, device=where)
ref = y.clone()
for _ in range(int(sys.argv[3])):
    run_saxpy(x, y, 0.5)
    ref = 0.5 * x + ref
torch.cuda.synchronize(where)
err = float((y.double() - ref.double()).norm() / ref.double().norm())
assert err < 1e-5, err
assert y.device == torch.device(where if device is not None else "cuda:0")
print("ok", driver.device_count())
"""


def _child(device: int | None, set_device: bool, loops: int, **env: str) -> subprocess.Popen:
    args = [sys.executable, "-c", CHILD, "none" if device is None else str(device), "set" if set_device else "no",
            str(loops)]
    return subprocess.Popen(args, cwd=ROOT, env={**_env(), **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _finished(proc: subprocess.Popen) -> str:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out + err
    return out.strip().splitlines()[-1]


# --- one GPU -------------------------------------------------------------------------------------

def test_saxpy_on_device_0_named_explicitly(torch):
    y, expected = _saxpy_on(torch, 0)
    assert _rel(y, expected) < 1e-6


def test_run_function_on_device_0(torch):
    result = dsl.run_function(SAXPY.read_text(), str(SAXPY), "run_saxpy", device=0)
    assert result["ok"] is True, result
    assert " on cuda:0 (" in result["message"]


def test_under_cuda_visible_devices_0_one_gpu_is_seen_and_used(torch):
    assert _finished(_child(None, False, 20, CUDA_VISIBLE_DEVICES="0")) == "ok 1"


def test_a_device_that_does_not_exist_is_the_run_s_answer(torch):
    count = torch.cuda.device_count()
    result = dsl.run_function(SAXPY.read_text(), str(SAXPY), "run_saxpy", device=count)
    assert result["ok"] is False
    assert result["message"].startswith(f"there is no cuda:{count}: {count} GPU")


# --- two GPUs ------------------------------------------------------------------------------------

def test_a_kernel_on_cuda_1_runs_on_cuda_1_and_leaves_the_current_device(two_gpus):
    torch = two_gpus
    before = torch.cuda.current_device()
    for _ in range(3):  # the first call compiles and loads; then the native path
        y, expected = _saxpy_on(torch, 1)
        assert _rel(y, expected) < 1e-6
        assert torch.cuda.current_device() == before
    with torch.cuda.device(1):  # and with cuda:1 current, as a thread driving it has
        y, expected = _saxpy_on(torch, 1)
        assert _rel(y, expected) < 1e-6


def test_each_device_loads_its_own_module_once(two_gpus):
    from dsl.runtime.jit_call import specialization
    from examples.saxpy import run_saxpy

    torch = two_gpus
    for device in (0, 1, 0, 1):
        y, expected = _saxpy_on(torch, device)
        assert _rel(y, expected) < 1e-6
    x = torch.randn(8, device="cuda:1")
    rt = specialization(run_saxpy, x, x, 1.0).rt
    devices = sorted(fn.ctx.device for fn in rt._functions.values())
    assert devices == [0, 1] and len(rt.image.loaded_from) == 2


def test_the_native_path_is_armed_on_each_device(two_gpus):
    from dsl.runtime.jit_call import specialization
    from dsl.runtime.native import fastpath
    from examples.saxpy import run_saxpy

    torch = two_gpus
    if fastpath is None:
        pytest.skip("the native launch path is not built here")
    x = {d: torch.randn(1000, device=f"cuda:{d}") for d in (0, 1)}
    spec = specialization(run_saxpy, x[0], x[0], 1.0)
    codes = ast.literal_eval(re.search(r"rt\.kernel\('saxpy', (\(.*?\))\)", spec.entry.launcher).group(1))
    kernel = spec.rt.kernel("saxpy", codes)
    for device in (0, 1):
        y = torch.zeros(1000, device=f"cuda:{device}")
        values = (x[device].data_ptr(), 1000, y.data_ptr(), 1000, 2.0, 1000)[:len(codes)]
        fastpath.set_device(device)
        assert not kernel.__self__.armed(device)
        kernel((4, 1, 1), (256, 1, 1), 0, 0, *values)  # through Python: loads there, then arms
        assert kernel.__self__.armed(device)
        y.zero_()
        kernel((4, 1, 1), (256, 1, 1), 0, 0, *values)  # native
        torch.cuda.synchronize(device)
        assert torch.equal(y, 2.0 * x[device])


def test_a_launch_on_cuda_1_goes_on_cuda_1_s_current_stream(two_gpus):
    from dsl.runtime.jit_call import specialization
    from examples.saxpy import run_saxpy

    torch = two_gpus
    x, y = torch.randn(N, device="cuda:1"), torch.randn(N, device="cuda:1")
    expected = 3.0 * x + y
    torch.cuda.synchronize(1)  # the inputs are ready before another stream writes y
    stream = torch.cuda.Stream(device=1)
    rt = specialization(run_saxpy, x, y, 3.0).rt
    with torch.cuda.device(1), torch.cuda.stream(stream):
        assert torch.cuda.current_stream(1) == stream != torch.cuda.current_stream(0)
        assert rt.arg_reader(PARAMS)(x, y, 3.0, None)[-1] == stream.cuda_stream  # the native reader
        assert rt._read_args(PARAMS, x, y, 3.0, None)[-1] == stream.cuda_stream  # the Python one
        torch.cuda._sleep(10_000_000)  # keeps the stream busy: the launch waits behind it there
        run_saxpy(x, y, 3.0)
    stream.synchronize()
    assert _rel(y, expected) < 1e-6


def test_arguments_on_two_devices_are_refused_before_anything_launches(two_gpus):
    from examples.saxpy import run_saxpy

    torch = two_gpus
    x0, y1 = torch.randn(64, device="cuda:0"), torch.randn(64, device="cuda:1")
    kept = y1.clone()
    mixed = r"arguments 'x' and 'y' are on different devices \(cuda:0 and cuda:1\)"
    with pytest.raises(ArgumentError, match=mixed):  # before this specialization was compiled
        run_saxpy(x0, y1, 2.0)
    run_saxpy(x0, torch.randn(64, device="cuda:0"), 2.0)  # compiled and armed
    with pytest.raises(ArgumentError, match=mixed):  # the native reader hands it to Python
        run_saxpy(x0, y1, 2.0)
    with pytest.raises(ArgumentError, match=r"argument 'y' is in host memory \(cpu\) while 'x' is on cuda:1"):
        run_saxpy(y1, torch.randn(64), 2.0)
    torch.cuda.synchronize(1)
    assert torch.equal(y1, kept)


@pytest.mark.parametrize("set_device", [True, False], ids=["set_device", "cuda0-current"])
def test_one_process_two_threads_each_on_its_own_gpu(two_gpus, set_device):
    """Two threads launch at once, in a loop, each on its own GPU: with torch.cuda.set_device
    per thread, and without (cuda:1's context pushed over cuda:0's for every launch)."""
    from examples.saxpy import run_saxpy

    torch = two_gpus
    _saxpy_on(torch, 0)  # compiled once, before the threads race for it
    start, errors, done = threading.Barrier(2), [], {}

    def work(device: int) -> None:
        try:
            if set_device:
                torch.cuda.set_device(device)
            x = torch.randn(N, device=f"cuda:{device}")
            y = torch.randn(N, device=f"cuda:{device}")
            ref = y.clone()
            start.wait()
            for _ in range(300):
                run_saxpy(x, y, 0.5)
                ref = 0.5 * x + ref
            torch.cuda.synchronize(device)
            done[device] = _rel(y, ref)
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(d,)) for d in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert errors == [] and sorted(done) == [0, 1], (errors, done)
    assert all(err < 1e-5 for err in done.values()), done


def test_two_processes_each_on_its_own_gpu(two_gpus):
    procs = [_child(0, True, 300), _child(1, False, 300)]
    answers = [_finished(p) for p in procs]
    count = two_gpus.cuda.device_count()
    assert answers == [f"ok {count}", f"ok {count}"]


def test_run_function_on_cuda_1(two_gpus):
    torch = two_gpus
    before = torch.cuda.current_device()
    result = dsl.run_function(SAXPY.read_text(), str(SAXPY), "run_saxpy", device=1)
    assert result["ok"] is True, result
    assert " on cuda:1 (" in result["message"]
    assert torch.cuda.current_device() == before


def test_a_stream_of_another_gpu_is_refused(two_gpus):
    from examples.saxpy import run_saxpy

    torch = two_gpus
    x, y = torch.randn(64, device="cuda:1"), torch.randn(64, device="cuda:1")
    with pytest.raises(ArgumentError, match=r"stream= is a stream of cuda:0, but the arrays are on cuda:1"):
        run_saxpy(x, y, 2.0, stream=torch.cuda.Stream(device=0))
    kept = y.clone()
    run_saxpy(x, y, 2.0, stream=torch.cuda.Stream(device=1))
    torch.cuda.synchronize(1)
    assert torch.allclose(y, 2.0 * x + kept)


def test_tuning_runs_on_the_arrays_gpu_while_cuda_0_is_current(two_gpus, tmp_path, monkeypatch):
    """The trials are timed with events on cuda:1's stream, in cuda:1's context, and the
    record names cuda:1; the current device stays cuda:0."""
    from dsl.runtime import driver
    from dsl.runtime.autotune import load_record, tuner
    from examples.softmax_autotuned import run_softmax_autotuned

    torch = two_gpus
    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path))
    x = torch.randn(64, 1024, device="cuda:1")
    y = torch.empty_like(x)
    torch.cuda.set_device(0)
    tuning = tuner(run_softmax_autotuned).tune((x, y), {}, force=True)
    assert torch.cuda.current_device() == 0
    assert tuning.winner is not None and all(o.ms is not None for o in tuning.outcomes if o.error is None)
    run_softmax_autotuned(x, y)
    torch.cuda.synchronize(1)
    assert torch.allclose(y, torch.softmax(x, dim=1), atol=1e-6)
    with driver.on_context(driver.primary_context(1)):
        key, parts = tuner(run_softmax_autotuned).record_key(tuning.key)
    assert parts["device"].startswith(driver.primary_context(1).name)
    assert load_record(key)  # recorded under cuda:1's name
