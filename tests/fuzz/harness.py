"""Runs one generated program three ways (reference, interpreter, optionally the GPU) and
says whether they agree.

The verdicts, and why each is what it is:

- `compared`: it compiled, and every way gave the same output bits;
- `refused`: the compiler refused it (a DSL3xx) where the rules say it must (the generator
  wrote an ill-typed line, or the reference met one while running);
- `mismatch`: the outputs differ, or one side faulted and the other did not;
- `unexpected-refusal`: the compiler refused a program the rules accept;
- `missed-refusal`: the compiler took a program the rules refuse;
- `internal`: DSL402 from the compiler, or an exception that is no diagnostic at all.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import dsl
from dsl.diagnostics import CompileError
from dsl.language.types import DType, i32
from tests.fuzz import reference
from tests.fuzz.program import WIDTH, Program

_modules = itertools.count()
FAILURES = ("mismatch", "unexpected-refusal", "missed-refusal", "internal")
_NUMPY = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
          "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64}


@dataclass
class Verdict:
    status: str  # one of the module doc's verdicts
    detail: str = ""
    gpu: bool = False  # whether the GPU took part

    @property
    def failed(self) -> bool:
        return self.status in FAILURES


def edge_values(t: DType) -> list[int]:
    lo = -(2 ** (t.bits - 1)) if t.is_signed else 0
    hi = 2 ** (t.bits - 1) - 1 if t.is_signed else 2**t.bits - 1
    return [lo, lo + 1, hi, hi - 1, 0, 1, 2, 3, -1 if t.is_signed else hi // 2, 7, 8, 15, 16, 17]


def make_inputs(program: Program) -> tuple[list[np.ndarray], np.ndarray]:
    """The input tensors (edges, small values and full-range noise) and the output's starting
    contents (noise, so a slot nobody writes is compared too), all from the program's data seed."""
    rng = np.random.default_rng(program.data_seed)
    size = program.threads * WIDTH
    inputs = []
    for _, t in program.tensors:
        np_t = _NUMPY[t.name]
        info = np.iinfo(np_t)
        noise = rng.integers(info.min, int(info.max) + 1, size=size, dtype=np_t)
        small = rng.integers(-8 if t.is_signed else 0, 9, size=size).astype(np_t)
        edges = np.array(edge_values(t), dtype=object)[rng.integers(0, 14, size=size)].astype(np_t)
        pick = rng.integers(0, 3, size=size)
        inputs.append(np.where(pick == 0, noise, np.where(pick == 1, small, edges)).astype(np_t))
    info = np.iinfo(_NUMPY[program.out_dtype.name])
    out = rng.integers(info.min, int(info.max) + 1, size=program.threads * program.slots,
                       dtype=_NUMPY[program.out_dtype.name])
    return inputs, out


def run_reference(program: Program, source: str) -> reference.Outcome:
    inputs, out = make_inputs(program)
    tensors = [reference.Tensor(name, t, [int(v) for v in a.tolist()]) for (name, t), a in zip(program.tensors, inputs)]
    tensors.append(reference.Tensor("out", program.out_dtype, [int(v) for v in out.tolist()]))
    return reference.run(source, "run", tensors, [reference.Val(i32, program.n)], C=program.const)


class Loaded:
    """The program's module, written to `directory` and imported (the compiler reads the file)."""

    def __init__(self, program: Program, source: str, directory: Path):
        name = f"kdsl_fuzz_{program.seed}_{next(_modules)}"
        self.path = directory / f"{name}.py"
        self.path.write_text(source)
        spec = importlib.util.spec_from_file_location(name, self.path)
        assert spec is not None and spec.loader is not None
        self.module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.module)

    def close(self) -> None:
        self.path.unlink(missing_ok=True)


def run_interpreter(program: Program, loaded: Loaded) -> tuple[str, Any]:
    """('ok', output array) or ('refused' | 'internal' | 'fault', message)."""
    inputs, out = make_inputs(program)
    try:
        dsl.interpret(loaded.module.run, *inputs, out, program.n, C=program.const)
    except CompileError as err:
        if any(d.code == "DSL402" for d in err.diagnostics):
            return "internal", str(err)
        return "refused", str(err)
    except Exception as err:
        diagnostic = getattr(err, "diagnostic", None)
        if diagnostic is not None and diagnostic.code == "DSL601":
            return "fault", str(err)
        return "internal", "".join(traceback.format_exception(err))
    return "ok", out


def run_gpu(program: Program, loaded: Loaded) -> tuple[str, Any]:
    """The same call on the GPU, through torch (as on the team's H200 machine)."""
    import torch

    inputs, out = make_inputs(program)
    device_inputs = [torch.from_numpy(a).cuda() for a in inputs]
    device_out = torch.from_numpy(out).cuda()
    try:
        loaded.module.run(*device_inputs, device_out, program.n, C=program.const)
        torch.cuda.synchronize()
    except CompileError as err:
        return ("internal" if any(d.code == "DSL402" for d in err.diagnostics) else "refused"), str(err)
    except Exception as err:
        return "internal", "".join(traceback.format_exception(err))
    return "ok", device_out.cpu().numpy()


def describe_difference(program: Program, expected: list[int], got: np.ndarray, label: str) -> str:
    """The first few differing outputs, by thread and slot."""
    got_ints = [int(v) for v in got.tolist()]
    lines = []
    for i, (e, g) in enumerate(zip(expected, got_ints)):
        if e != g:
            thread, slot = divmod(i, program.slots)
            lines.append(f"  thread {thread} (block {thread // program.block}, thread_idx {thread % program.block}) "
                         f"slot {slot}: reference {e}, {label} {g}")
    more = f"\n  ... and {len(lines) - 8} more" if len(lines) > 8 else ""
    first = next((i // program.slots for i, (e, g) in enumerate(zip(expected, got_ints)) if e != g), None)
    rows = ""
    if first is not None:  # what the first differing thread read
        inputs, _ = make_inputs(program)
        row = slice(first * WIDTH, (first + 1) * WIDTH)
        rows = "".join(f"\n  thread {first} reads {name}[{row.start}:{row.stop}] = {a[row].tolist()}"
                       for (name, _), a in zip(program.tensors, inputs))
    return "\n".join(lines[:8]) + more + rows


def check(program: Program, directory: Path, gpu: bool = False) -> Verdict:
    """Runs `program` by the reference and the interpreter (and the GPU when asked)."""
    source = program.render()
    expected = run_reference(program, source)
    must_refuse = program.refusal or expected.refused
    try:
        loaded = Loaded(program, source, directory)
    except Exception as err:  # the module itself does not import: the generator's fault
        return Verdict("internal", "the generated module does not import:\n" + "".join(traceback.format_exception(err)))
    try:
        kind, got = run_interpreter(program, loaded)
        if kind == "internal":
            return Verdict("internal", got)
        if kind == "refused":
            if must_refuse:
                return Verdict("refused", must_refuse)
            return Verdict("unexpected-refusal", got)
        if must_refuse:
            return Verdict("missed-refusal", f"the rules refuse it ({must_refuse}), the compiler took it")
        if kind == "fault" or expected.fault:
            if kind == "fault" and expected.fault:
                return Verdict("compared", "both fault")
            return Verdict("mismatch", f"reference: {expected.fault or 'no fault'}; interpreter: "
                           f"{got if kind == 'fault' else 'no fault'}")
        assert expected.tensors is not None
        want = expected.tensors["out"]
        if [int(v) for v in got.tolist()] != want:
            return Verdict("mismatch", "interpreter differs from the reference:\n"
                           + describe_difference(program, want, got, "interpreter"))
        if gpu:
            kind, on_gpu = run_gpu(program, loaded)
            if kind != "ok":
                return Verdict("internal" if kind == "internal" else "mismatch", f"on the GPU: {on_gpu}", gpu=True)
            if [int(v) for v in on_gpu.tolist()] != want:
                return Verdict("mismatch", "the GPU differs from the reference:\n"
                               + describe_difference(program, want, on_gpu, "GPU"), gpu=True)
        return Verdict("compared", gpu=gpu)
    finally:
        loaded.close()
        sys.modules.pop(loaded.module.__name__, None)


def quiet_environment() -> None:
    """Fuzzed kernels are compiled once each: keep them out of the user's disk cache."""
    os.environ.setdefault("KDSL_NO_DISK_CACHE", "1")
