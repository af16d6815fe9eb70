"""Tuning ahead of time: what `kdsl tune` and the editor's "Autotune on GPU" run.

`tune_functions(source, path, names)` runs the module, then tunes each named autotuned jit
function for the attached GPU on synthesized arguments, one tuning per `examples=` entry
(or one from the annotations), made as "Run on GPU" makes them (`dsl.runtime.run`: a
`TensorSpec`'s shape, else 1<<20 elements for rank 1 and 4096 x 4096 for rank 2). The
choices go to the same records a program's first call reads, so that call runs no trial.

The answer is JSON-ready, one entry per function: each tuning's key, winner and a row per
config (time, GB/s counting every tensor argument once, TFLOP/s where `flops=` is declared,
registers, spills, smem, occupancy, or why it failed). `format_table` renders a tuning.
"""

from __future__ import annotations

import inspect
from typing import Any

from dsl.runtime.autotune import AutotuneError, Tuning, tuner


class _OneExample:
    """A jit function seen with only one of its examples, for `run._synthesize`."""

    def __init__(self, fn: Any, example: Any):
        self.fn = fn.fn
        self.examples = [example]


def tune_functions(source: str, path: str, names: list[str] | None = None, *, force: bool = False
                   ) -> list[dict[str, Any]]:
    """Tunes the autotuned jit functions `names` (default: all) of the module `source`.

    Raises `NoGPUError` before running anything when there is no GPU."""
    import numpy as np

    from dsl.language.autotune import spec_of
    from dsl.language.decorators import JitFunction
    from dsl.module_analysis import dsl_functions, run_module
    from dsl.runtime.driver import current_context
    from dsl.runtime.run import DeviceArray, _synthesize

    ctx = current_context()
    namespace, diagnostics = run_module(source, path)
    found = {name: fn for name, fn in dsl_functions(namespace, path)
             if isinstance(fn, JitFunction) and spec_of(fn) is not None}
    errors = "; ".join(d.format() for d in diagnostics if d.is_error)
    results = []
    for name in names if names is not None else list(found):
        fn = found.get(name)
        if fn is None:
            why = "is not an autotuned @dsl.jit function" if name in namespace else "is not defined"
            results.append({"function": name, "ok": False, "tunings": [],
                            "message": f"'{name}' {why} in {path}" + (f" ({errors})" if errors else "")})
            continue
        entry: dict[str, Any] = {"function": name, "ok": True, "device": ctx.name, "tunings": [], "message": ""}
        for example in list(fn.examples or []) or [None]:
            arrays: list[Any] = []
            try:
                synthesized, _, _ = _synthesize(fn if example is None else _OneExample(fn, example),
                                                np.random.default_rng(0))
                args, kwargs = _untuned(fn, synthesized)
                arrays = [a for a in args if isinstance(a, DeviceArray)]
                tuning = tuner(fn).tune(tuple(args), kwargs, force=force)
                entry["tunings"].append(tuning_rows(fn, tuning, args))
            except Exception as err:  # a config's own failures are rows; this is the tuning failing
                entry["ok"] = False
                entry["message"] = _reason(err)
                break
            finally:
                for a in arrays:
                    a.free()
        if entry["ok"]:
            first = entry["tunings"][0]
            entry["message"] = (f"{name} on {ctx.name}: {first['winner']} is fastest"
                                + (f" ({first['rows'][first['winner_index']]['ms']:.3f} ms)" if first["rows"] else "")
                                + f"; {sum(t['trials'] for t in entry['tunings'])} configs measured")
        results.append(entry)
    return results


def _untuned(fn: Any, args: list[Any]) -> tuple[list[Any], dict[str, Any]]:
    """The synthesized call without the parameters the configs set (their defaults were
    filled in): positional up to the first tuned one, by keyword after it."""
    names = list(inspect.signature(fn.fn).parameters)
    tuned = fn.tuning.tuned
    first = next((i for i, n in enumerate(names) if n in tuned), len(args))
    kwargs = {n: v for n, v in zip(names[first:], args[first:]) if n not in tuned}
    return list(args[:first]), kwargs


def tuning_rows(fn: Any, tuning: Tuning, args: list[Any]) -> dict[str, Any]:
    """One tuning as JSON: its key, winner and a row per config."""
    nbytes = sum(int(getattr(a, "nbytes", 0)) for a in args if hasattr(a, "shape"))
    flops = fn.tuning.flops(*args) if fn.tuning.flops is not None else None
    rows = []
    for config, outcome in zip(tuning.configs, tuning.outcomes):
        kernels = outcome.kernels
        ms = outcome.ms
        rows.append({
            "config": config.describe(),
            "ms": ms,
            "gbs": nbytes / (ms * 1e-3) / 1e9 if ms else None,
            "tflops": flops / (ms * 1e-3) / 1e12 if ms and flops else None,
            "registers": max((k["registers"] or 0 for k in kernels), default=None),
            "spills": sum((k["spill_stores"] or 0) + (k["spill_loads"] or 0) for k in kernels),
            "smem": max((k["smem"] or 0 for k in kernels), default=None),
            "occupancy": min((k["occupancy"] for k in kernels if k["occupancy"] is not None), default=None),
            "error": outcome.error,
            "measured": outcome.measured,
        })
    index = tuning.configs.index(tuning.winner)
    return {"key": tuning.key, "winner": tuning.winner.describe(), "winner_index": index,
            "params": dict(tuning.winner.params), "hints": dict(tuning.winner.hints),
            "trials": tuning.trials, "rows": rows}


def format_table(tuning: dict[str, Any]) -> str:
    """A tuning (`tuning_rows`) as a plain-text table, the winner marked with `*`."""
    head = ["", "config", "time", "GB/s", "TFLOP/s", "regs", "spills", "smem", "occupancy", "note"]
    lines = [head]
    for i, row in enumerate(tuning["rows"]):
        ms = row["ms"]
        lines.append([
            "*" if i == tuning["winner_index"] else "",
            row["config"],
            "-" if ms is None else f"{ms * 1e3:.1f} us" if ms < 1 else f"{ms:.3f} ms",
            f"{row['gbs']:.4g}" if row["gbs"] else "-",
            f"{row['tflops']:.4g}" if row["tflops"] else "-",
            str(row["registers"]) if row["registers"] is not None else "-",
            str(row["spills"]) if row["registers"] is not None else "-",
            str(row["smem"]) if row["smem"] is not None else "-",
            f"{row['occupancy']:.0%}" if row["occupancy"] is not None else "-",
            row["error"] or ("measured" if row["measured"] else "recorded"),
        ])
    widths = [max(len(line[c]) for line in lines) for c in range(len(head) - 1)]
    text = [f"key: {tuning['key'] or '(none)'}"]
    for line in lines:
        text.append("  ".join(cell.ljust(w) for cell, w in zip(line, widths)) + "  " + line[-1])
    return "\n".join(t.rstrip() for t in text)


def _reason(err: BaseException) -> str:
    if isinstance(err, AutotuneError):
        return str(err)
    diagnostics = getattr(err, "diagnostics", None)
    if diagnostics:
        return "compile failed:\n" + "\n".join(d.format() for d in diagnostics)
    return f"{type(err).__name__}: {err}"
