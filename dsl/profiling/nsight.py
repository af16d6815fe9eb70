"""Nsight Compute: find it, run a child under it, read its report into `RawAction`s.

`ncu` comes from `KDSL_NCU`, else PATH, else the CUDA toolkit's (`/usr/local/cuda/bin`), else
the newest `/opt/nvidia/nsight-compute/*`. Its `ncu_report` Python module lives beside it
in `extras/python`; it is imported from there (it ships a compiled extension for the Python
ncu was built for), and only where a report is read.

The child is profiled between `cuProfilerStart` and `cuProfilerStop` only
(`--profile-from-start off`), so compiling, loading and the warm-up call are not measured,
with the sections that give the summary and the per-instruction source counters, and with
the GPU's clocks left as they are (`--clock-control none`: the figures are the ones the
program gets).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from dsl import environment
from dsl.profiling.analysis import ALL_KERNEL_METRICS, PER_PC_METRICS, RawAction
from dsl.profiling.flops import OPTIONAL_METRICS

SECTIONS = ("SpeedOfLight", "LaunchStats", "Occupancy", "MemoryWorkloadAnalysis", "SourceCounters",
            "WarpStateStats")
TIME_LIMIT_S = 300.0
INSTALL_HINT = ("Nsight Compute (`ncu`) is needed: it ships with the CUDA toolkit, or install it on its own "
                "(NVIDIA's nsight-compute package); point KDSL_NCU at it if it is not on PATH")


class ProfilerUnavailable(RuntimeError):
    """No GPU, or no Nsight Compute: what is missing, in words (the CLI exits 2 on it)."""


def find_ncu() -> str | None:
    chosen = environment.path("KDSL_NCU")
    if chosen:
        return chosen if os.access(chosen, os.X_OK) else None
    found = shutil.which("ncu")
    if found:
        return found
    candidates = ["/usr/local/cuda/bin/ncu", *sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"), reverse=True)]
    return next((c for c in candidates if os.access(c, os.X_OK)), None)


def _report_module_dirs(ncu: str) -> list[Path]:
    real = Path(os.path.realpath(ncu)).parent
    dirs = [real / "extras" / "python", real.parent / "extras" / "python"]
    dirs += [Path(p) for p in sorted(glob.glob("/opt/nvidia/nsight-compute/*/extras/python"), reverse=True)]
    return [d for d in dirs if (d / "ncu_report.py").exists()]


def import_ncu_report(ncu: str) -> Any:
    """The `ncu_report` module of this `ncu`; `ProfilerUnavailable` when it cannot be loaded."""
    for folder in _report_module_dirs(ncu):
        if str(folder) not in sys.path:
            sys.path.append(str(folder))
        try:
            import ncu_report  # type: ignore[import-not-found]

            return ncu_report
        except ImportError as err:
            raise ProfilerUnavailable(f"{folder}/ncu_report.py does not load in this Python ({err}); "
                                      "it needs the Python that Nsight Compute was built for") from err
    raise ProfilerUnavailable(f"Nsight Compute's ncu_report module is not beside {ncu} (extras/python)")


def require_ncu() -> str:
    ncu = find_ncu()
    if ncu is None:
        raise ProfilerUnavailable(f"no Nsight Compute found: {INSTALL_HINT}")
    return ncu


def command(ncu: str, report: str, child: list[str], optional: bool = True) -> list[str]:
    """The ncu command line that profiles `child`'s profiling range into `report` (.ncu-rep),
    with the roofline's counters unless `optional` is false."""
    sections = [arg for name in SECTIONS for arg in ("--section", name)]
    metrics = (*ALL_KERNEL_METRICS, *OPTIONAL_METRICS) if optional else ALL_KERNEL_METRICS
    return [ncu, "--clock-control", "none", "--profile-from-start", "off", "--import-source", "yes",
            *sections, "--metrics", ",".join(metrics), "--target-processes", "all",
            "--force-overwrite", "--export", report, *child]


def _unknown_metric(said: str) -> bool:
    """ncu refused a metric name (`==ERROR== Failed to find metric ...` and its kin)."""
    return any(line.startswith("==ERROR==") and "metric" in line.lower() for line in said.splitlines())


def run_under_ncu(child: list[str], report: str, env: dict[str, str] | None = None,
                  cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    """Runs `child` under ncu; `ProfilerUnavailable` when ncu cannot profile (no GPU, no access
    to the counters), with ncu's own words."""
    ncu = require_ncu()
    done = subprocess.run(command(ncu, report, child), capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=TIME_LIMIT_S, stdin=subprocess.DEVNULL)
    said = done.stdout + done.stderr
    if _unknown_metric(said):  # this ncu lacks a roofline counter: profile without them
        done = subprocess.run(command(ncu, report, child, optional=False), capture_output=True, text=True, env=env,
                              cwd=cwd, timeout=TIME_LIMIT_S, stdin=subprocess.DEVNULL)
        said = done.stdout + done.stderr
    for problem in ("ERR_NVGPUCTRPERM", "No CUDA-capable device", "LibraryNotLoaded", "no kernels were profiled",
                    "Failed to initialize the profiler"):
        if problem in said:
            lines = [line for line in said.splitlines() if line.startswith("==ERROR==") or problem in line]
            raise ProfilerUnavailable("Nsight Compute could not profile: " + " ".join(lines[:3]).strip())
    return done


def _value(metric: Any, index: int | None = None) -> float | str | None:
    try:
        if index is None:
            value = metric.value()
        else:
            value = metric.as_double(index)
    except Exception:  # a metric ncu lists but cannot evaluate for this launch
        return None
    return value if isinstance(value, int | float | str) else None


def read_report(path: str, ncu: str | None = None) -> tuple[str, list[RawAction]]:
    """(device name, one RawAction per profiled kernel launch, in launch order)."""
    module = import_ncu_report(ncu or require_ncu())
    context = module.load_report(path)
    actions: list[RawAction] = []
    device = ""
    for r in range(context.num_ranges()):
        rng = context.range_by_idx(r)
        for a in range(rng.num_actions()):
            action = rng.action_by_idx(a)
            actions.append(_raw_action(action))
            name = action.metric_by_name("device__attribute_display_name")
            device = device or (str(name.value()) if name is not None else "")
    return device, actions


def _sass(action: Any, pc: int) -> str:
    try:
        return str(action.sass_by_pc(pc) or "")
    except Exception:  # a PC outside the kernel's code (ncu's own sampling of the prologue)
        return ""


def _raw_action(action: Any) -> RawAction:
    metrics: dict[str, Any] = {}
    for name in (*ALL_KERNEL_METRICS, *OPTIONAL_METRICS):
        metric = action.metric_by_name(name)
        if metric is not None:
            metrics[name] = _value(metric)
    pcs: dict[int, dict[str, Any]] = {}
    for name in PER_PC_METRICS:
        metric = action.metric_by_name(name)
        if metric is None or not metric.num_instances():
            continue
        ids = metric.correlation_ids()
        for j in range(metric.num_instances()):
            pc = int(ids.as_uint64(j))
            entry = pcs.get(pc)
            if entry is None:
                info = action.source_info(pc)
                entry = pcs[pc] = {"pc": pc, "file": info.file_name() if info else "",
                                   "line": int(info.line()) if info else 0, "sass": _sass(action, pc),
                                   "metrics": {}}
            value = _value(metric, j)
            if isinstance(value, int | float) and value:
                entry["metrics"][name] = value
    return {"name": action.name(), "metrics": metrics, "pcs": sorted(pcs.values(), key=lambda e: e["pc"])}
