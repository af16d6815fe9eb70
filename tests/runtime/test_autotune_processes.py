"""Processes sharing one cache directory agree on one tuning: the first tunes under the key's
lock, the others wait on it and read its choice, doing zero trials (real processes, on CPU);
ranks of `torch.distributed` (gloo, CPU; skipped without torch) all run rank 0's choice.

Each process runs `CHILD`: it imports the same program file, gives its autotuned function a
CPU bench whose "launch" is slow (so the first process is still tuning when the second
arrives), calls it once, and prints what it saw as JSON.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.runtime.test_autotune import MODULE, THREE

CHILD = '''\
import importlib.util, json, sys, time
import numpy as np
from dsl.runtime.autotune import load_record, tuner
from dsl.runtime.autotune_bench import PythonBench

program, marker, sleep = sys.argv[1], sys.argv[2], float(sys.argv[3])
spec = importlib.util.spec_from_file_location("program", program)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
times = {"BLOCK=64": 3.0, "BLOCK=128": 1.0, "BLOCK=256": 2.0}

def launch(config, x, n, BLOCK):
    open(marker, "a").close()  # tuning (or the call) has begun
    time.sleep(sleep)
    x[:n] *= 2.0

t = tuner(module.run_scale, PythonBench(launch, writes=("x",), timer=lambda c: times[c.describe()]))
x = np.ones(8, dtype=np.float32)
recorded = bool(load_record(t.record_key(t.key_text((x, 8), {}))[0]))
module.run_scale(x, 8)
print(json.dumps({"recorded_at_start": recorded, "trials": t.trials,
                  "winner": t._chosen[t._call_key((x, 8), {})].describe(), "x": x.tolist()}))
'''


def start(tmp_path: Path, program: Path, marker: Path, sleep: float) -> subprocess.Popen:
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    return subprocess.Popen([sys.executable, str(child), str(program), str(marker), str(sleep)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def answer(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_the_second_process_waits_for_the_first_and_does_zero_trials(tmp_path):
    program = tmp_path / "program.py"
    program.write_text(MODULE.format(configs=THREE, key='["n"]', extra="", default=32, factor="2.0"))
    first_marker, second_marker = tmp_path / "first-began", tmp_path / "second-began"
    first = start(tmp_path, program, first_marker, sleep=1.0)  # 3 trials: about 3 s under the lock
    deadline = time.monotonic() + 60
    while not first_marker.exists():
        assert time.monotonic() < deadline and first.poll() is None, "the first process did not start tuning"
        time.sleep(0.02)
    second = start(tmp_path, program, second_marker, sleep=0.0)
    one, two = answer(first), answer(second)
    assert one == {"recorded_at_start": False, "trials": 3, "winner": "BLOCK=128", "x": [2.0] * 8}
    # it found no record, so it waited on the lock; then it read the first one's choice
    assert two == {"recorded_at_start": False, "trials": 0, "winner": "BLOCK=128", "x": [2.0] * 8}
    third = answer(start(tmp_path, program, tmp_path / "third-began", sleep=0.0))
    assert third == {"recorded_at_start": True, "trials": 0, "winner": "BLOCK=128", "x": [2.0] * 8}


RANK = '''\
import importlib.util, json, os, sys
import numpy as np
import torch.distributed as dist
from dsl.runtime.autotune import tuner
from dsl.runtime.autotune_bench import PythonBench

dist.init_process_group("gloo")
rank = dist.get_rank()
spec = importlib.util.spec_from_file_location("program", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
# each rank's own timings disagree: rank 0 finds BLOCK=128 fastest, rank 1 BLOCK=64
times = {0: {"BLOCK=64": 3.0, "BLOCK=128": 1.0, "BLOCK=256": 2.0},
         1: {"BLOCK=64": 0.5, "BLOCK=128": 1.0, "BLOCK=256": 2.0}}[rank]

def launch(config, x, n, BLOCK):
    x[:n] *= 2.0

t = tuner(module.run_scale, PythonBench(launch, writes=("x",), timer=lambda c: times[c.describe()]))
x = np.ones(8, dtype=np.float32)
module.run_scale(x, 8)
print(json.dumps({"rank": rank, "trials": t.trials, "winner": t._chosen[t._call_key((x, 8), {})].describe(),
                  "x": x.tolist()}))
dist.destroy_process_group()
'''


def test_with_torch_distributed_every_rank_runs_rank_0s_choice(tmp_path):
    """Two ranks on separate cache directories (as on two hosts): rank 0 tunes, rank 1 runs no
    trial and uses rank 0's choice although its own timings would pick another."""
    pytest.importorskip("torch.distributed")
    program = tmp_path / "program.py"
    program.write_text(MODULE.format(configs=THREE, key='["n"]', extra="", default=32, factor="2.0"))
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    root = str(Path(__file__).resolve().parents[2])
    procs = []
    for rank in (0, 1):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": str(port), "KDSL_CACHE_DIR": str(tmp_path / f"cache-{rank}"),
               "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
        procs.append(subprocess.Popen([sys.executable, str(script), str(program)], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, env=env))
    answers = sorted((answer(p) for p in procs), key=lambda a: a["rank"])
    assert answers == [{"rank": 0, "trials": 3, "winner": "BLOCK=128", "x": [2.0] * 8},
                       {"rank": 1, "trials": 0, "winner": "BLOCK=128", "x": [2.0] * 8}]
