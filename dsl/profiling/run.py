"""One profile, start to end: a child under ncu, its report read, the records made.

`profile_function(path, function)` is `kdsl profile FILE::JIT` and the editor's *Profile on
GPU*: the child is `dsl.profiling.target`. `profile_call(fn, args, kwargs)` is
`dsl.profile(fn, *args)`: the child is the user's own script run again (`sys.orig_argv`)
with `KDSL_PROFILE_REQUEST` set, in which that call profiles itself and the script stops.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from dsl.profiling.analysis import RawAction, kernel_profile
from dsl.profiling.nsight import ProfilerUnavailable, read_report, require_ncu, run_under_ncu
from dsl.profiling.records import ProfileReport

REQUEST = "KDSL_PROFILE_REQUEST"
_PROJECT = str(Path(__file__).resolve().parents[2])  # the folder holding `dsl`, for the child's imports


class ProfileFailed(RuntimeError):
    """The profiled program failed (its module, its inputs or its call): the child's words."""


def _require_gpu() -> None:
    from dsl.runtime.driver import NoGPUError, driver

    try:
        driver()
    except NoGPUError as err:
        raise ProfilerUnavailable(str(err)) from err


def _child_env(request: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PROJECT, env.get("PYTHONPATH", "")) if p)
    if request is not None:
        env[REQUEST] = request
    return env


def _sources(actions: list[RawAction], path: str, source: str | None) -> dict[str, list[str]]:
    files = {pc.get("file") for a in actions for pc in a.get("pcs", []) if pc.get("file")}
    out = {path: source.splitlines()} if source is not None else {}
    files -= set(out)
    for file in files:
        try:
            out[str(file)] = Path(str(file)).read_text().splitlines()
        except (OSError, UnicodeDecodeError):
            continue
    return out


def _run(child: list[str], request: dict[str, Any], function: str, env_request: bool = False,
         cwd: str | None = None) -> tuple[str, list[RawAction]]:
    """(device name, raw actions) of `child` run under ncu."""
    _require_gpu()
    ncu = require_ncu()
    with tempfile.TemporaryDirectory(prefix="kdsl-profile-") as tmp:
        request = {**request, "result": os.path.join(tmp, "answer.json")}
        request_path = os.path.join(tmp, "request.json")
        Path(request_path).write_text(json.dumps(request))
        report = os.path.join(tmp, "profile")
        argv = [*child, request_path] if not env_request else child
        done = run_under_ncu(argv, report, env=_child_env(request_path if env_request else None), cwd=cwd)
        answer_path = Path(request["result"])
        answer = json.loads(answer_path.read_text()) if answer_path.exists() else None
        if answer is None or not answer.get("ok"):
            said = answer["message"] if answer else (done.stderr.strip().splitlines() or ["no answer"])[-1]
            raise ProfileFailed(f"{function}: the profiled run failed: {said}")
        if not os.path.exists(report + ".ncu-rep"):
            raise ProfileFailed(f"{function}: Nsight Compute wrote no report: "
                                + " ".join(done.stdout.strip().splitlines()[-3:]))
        device, actions = read_report(report + ".ncu-rep", ncu)
    if not actions:
        raise ProfileFailed(f"{function}: the call launched no kernel that Nsight Compute profiled")
    return device, actions


def _profile(child: list[str], request: dict[str, Any], function: str, file: str,
             env_request: bool = False, cwd: str | None = None) -> ProfileReport:
    device, actions = _run(child, request, function, env_request, cwd)
    sources = _sources(actions, file, request.get("source"))
    kernels = [kernel_profile(raw, i, sources, device) for i, raw in enumerate(actions)]
    return ProfileReport(function=function, file=file, device=device, kernels=kernels)


def _target_request(path: str, function: str, example: int | None, device: int,
                    source: str | None) -> dict[str, Any]:
    return {"path": os.path.abspath(path), "function": function, "example": example, "device": device,
            "source": source}


def profile_function(path: str, function: str, *, example: int | None = None, device: int = 0,
                     source: str | None = None) -> ProfileReport:
    """`function` (a `@dsl.jit` function of the file at `path`, or of `source` standing for
    it) profiled on GPU `device`, on its `example`-th `examples=` entry or the inputs *Run on
    GPU* makes."""
    request = _target_request(path, function, example, device, source)
    return _profile([sys.executable, "-m", "dsl.profiling.target"], request, function, request["path"])


def raw_profile(path: str, function: str, *, example: int | None = None,
                device: int = 0) -> tuple[str, list[RawAction]]:
    """What `profile_function` reads from the report, before analysis: (device name, one
    `RawAction` per launch). The profiler's test fixtures are these (tests/profiling/record_fixtures.py)."""
    request = _target_request(path, function, example, device, None)
    return _run([sys.executable, "-m", "dsl.profiling.target"], request, function)


def _name(fn: Any) -> str:
    inner = getattr(fn, "fn", fn)
    return f"{getattr(inner, '__module__', '?')}.{getattr(inner, '__qualname__', repr(fn))}"


def profile_call(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> ProfileReport | None:
    """`dsl.profile(fn, *args, **kwargs)` (see `dsl.profiling.profile`)."""
    from dsl.language.decorators import JitFunction

    if not isinstance(fn, JitFunction):
        raise TypeError(f"dsl.profile profiles @dsl.jit functions, not {fn!r}")
    request_path = os.environ.get(REQUEST)
    if request_path:  # the run under ncu: profile this call, answer, and stop the script here
        from dsl.profiling.target import profiled_call

        request = json.loads(Path(request_path).read_text())
        if request.get("function") == _name(fn):
            profiled_call(fn, args, kwargs)
            Path(request["result"]).write_text(json.dumps({"ok": True, "message": ""}))
            sys.stdout.flush()
            sys.exit(0)
        fn(*args, **kwargs)
        return None
    script = sys.argv[0] if sys.argv else ""
    if not script or script == "-c" or not (os.path.exists(script) or "-m" in sys.orig_argv):
        raise ProfilerUnavailable("dsl.profile runs the script again under Nsight Compute, so it needs one "
                                  "(python script.py); from a notebook or -c, use kdsl profile FILE::JIT")
    name = _name(fn)
    main = os.path.abspath(script) if os.path.exists(script) else script
    return _profile([sys.executable, *sys.orig_argv[1:]], {"function": name}, getattr(fn.fn, "__name__", name),
                    main, env_request=True, cwd=os.getcwd())
