"""Runs one generated program three ways (reference, interpreter, optionally the GPU) and
says whether they agree.

The verdicts, and why each is what it is:

- `compared`: it compiled, and every way gave the same output bits (both faulting counts);
- `refused`: the compiler refused it (a DSL3xx at a range of the program's own file) where
  the rules say it must (the generator wrote an ill-typed line, or the reference met one
  while running);
- `skipped`: the reference does not model something the program does (never generated;
  a shrinking step may reach it);
- `mismatch`: the outputs differ, or one side faulted and the other did not, or the GPU's
  kernel was still running after `HANG_SECONDS` (where the reference finished);
- `unexpected-refusal`: the compiler refused a program the rules accept;
- `missed-refusal`: the compiler took a program the rules refuse;
- `internal`: DSL402 from the compiler, a refusal that points nowhere in the program, or an
  exception that is no diagnostic at all (in the compiler, the interpreter, or the reference).

Outputs (`out`, and `hist` where atomics write it) are compared as bits, float NaNs as NaN:
any NaN equals any NaN (the payload and sign of a NaN are the hardware's own choice, not
the language's), every other float must have the same bits (-0.0 is not 0.0).
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import dsl
from dsl.diagnostics import CompileError
from dsl.interpreter import bits
from dsl.language.types import DType, i32
from tests.fuzz import floats as F
from tests.fuzz import reference
from tests.fuzz.program import HIST, WIDTH, Program

_modules = itertools.count()
FAILURES = ("mismatch", "unexpected-refusal", "missed-refusal", "internal")
_NUMPY: dict[str, Any] = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
          "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64}
_BITS = {16: np.uint16, 32: np.uint32, 64: np.uint64}
_FLOAT_VIEW = {"f16": np.float16, "f32": np.float32, "f64": np.float64}


HANG_SECONDS = 60.0  # a generated kernel finishes in milliseconds; one still running after this never will


@dataclass
class Verdict:
    status: str  # one of the module doc's verdicts
    detail: str = ""
    gpu: bool = False  # whether the GPU took part
    stuck: bool = False  # the GPU still runs this program's kernel: nothing more can run in this process

    @property
    def failed(self) -> bool:
        return self.status in FAILURES


def edge_values(t: DType) -> list[int]:
    """The extremes and small values, and integers just past a tie when converted to f32, f16
    and bf16 (rounding them through f64 first would round the wrong way)."""
    lo = -(2 ** (t.bits - 1)) if t.is_signed else 0
    hi = 2 ** (t.bits - 1) - 1 if t.is_signed else 2**t.bits - 1
    top = t.bits - 2
    ties = [2**top + 2 ** (top - p) + 1 for p in (24, 11, 8) if top - p > 0]
    return [lo, lo + 1, hi, hi - 1, 0, 1, 2, 3, -1 if t.is_signed else hi // 2, 7, 8, 15, 16, 17] + ties


def float_edges(t: DType) -> list[int]:
    """The bits of IEEE corners of `t`: zeros, infinities, NaN, the extremes, subnormals, halves."""
    fmt = F.FORMATS[t.name]
    top = fmt.bits - 1
    biggest = ((1 << fmt.exp_bits) - 2) << fmt.man_bits | ((1 << fmt.man_bits) - 1)
    patterns = [0, 1 << top, (((1 << fmt.exp_bits) - 1) << fmt.man_bits), biggest, 1, 1 << fmt.man_bits,
                (1 << fmt.man_bits) - 1, ((1 << fmt.exp_bits) - 1) << fmt.man_bits | 1]
    values = [1.0, -1.0, 0.5, 1.5, 2.5, -3.0, 0.1, 1e4, 65504.0, 1.0 + 2.0 ** -fmt.man_bits, 2.0**fmt.precision + 1,
              127.5, -128.5, 255.5, 32767.5, 2.0**31, -(2.0**31) - 256, 2.0**32, 2.0**63, 2.0**64]  # integer edges
    patterns += [F.encode(fmt, F.round_float(fmt, v)) for v in values]
    return patterns + [p | (1 << top) for p in patterns[3:8]]


def _random_bits(rng: np.random.Generator, t: DType, size: int, finite: bool = False) -> np.ndarray:
    """Elements of `t` as their bits (floats) or values (integers): noise, small values, edges."""
    pick = rng.integers(0, 3, size=size)
    if t.is_float:
        fmt, store = F.FORMATS[t.name], _BITS[t.bits]
        noise = rng.integers(0, 2**t.bits, size=size, dtype=np.uint64).astype(store)
        quarters = np.array([F.encode(fmt, k / 4) for k in range(-40, 41)], dtype=np.uint64).astype(store)
        small = quarters[rng.integers(0, 81, size)]
        edges = np.array(float_edges(t), dtype=np.uint64).astype(store)[rng.integers(0, len(float_edges(t)), size)]
        out = np.where(pick == 0, noise, np.where(pick == 1, small, edges)).astype(store)
        if finite:
            out = np.where([F.is_nan_bits(fmt, int(b)) or F.decode(fmt, int(b)) in (np.inf, -np.inf) for b in out],
                           small, out).astype(store)
        return out
    np_t = _NUMPY[t.name]
    info = np.iinfo(np_t)
    noise = rng.integers(info.min, int(info.max) + 1, size=size, dtype=np_t)
    small = rng.integers(-8 if t.is_signed else 0, 9, size=size).astype(np_t)
    table = edge_values(t)
    edges = np.array(table, dtype=object)[rng.integers(0, len(table), size=size)].astype(np_t)
    return np.where(pick == 0, noise, np.where(pick == 1, small, edges)).astype(np_t)


def tensor_layout(program: Program) -> list[tuple[str, DType, tuple[int, ...]]]:
    """Every tensor argument in order: name, element type, shape."""
    rows = program.threads
    out: list[tuple[str, DType, tuple[int, ...]]] = [
        (name, t, (rows, WIDTH) if name in program.rank2 else (rows * WIDTH,)) for name, t in program.tensors]
    out.append(("out", program.out_dtype, (rows, program.slots) if "out" in program.rank2 else (rows * program.slots,)))
    if program.hist is not None:
        out.append(("hist", program.hist, (HIST,)))
    return out


def make_inputs(program: Program) -> list[np.ndarray]:
    """The tensors' starting contents (integers as values, floats as bits) from the data seed:
    edges, small values and full-range noise; `out` starts as noise, so a slot nobody writes is
    compared too; a float `hist` starts finite (an atomic max of a NaN start is undefined)."""
    rng = np.random.default_rng(program.data_seed)
    arrays = []
    for name, t, shape in tensor_layout(program):
        size = int(np.prod(shape))
        arrays.append(_random_bits(rng, t, size, finite=name == "hist").reshape(shape))
    return arrays


def _for_interpreter(array: np.ndarray, t: DType) -> Any:
    if t.name == "bf16":
        return bits(array, t)
    return array.view(_FLOAT_VIEW[t.name]) if t.is_float else array


def _values(array: np.ndarray, t: DType) -> list[Any]:
    flat = [int(v) for v in array.reshape(-1).tolist()]
    return [F.decode(F.FORMATS[t.name], b) for b in flat] if t.is_float else flat


def run_reference(program: Program, source: str) -> reference.Outcome:
    tensors = [reference.Tensor(name, t, _values(a, t), tuple(a.shape))
               for (name, t, _), a in zip(tensor_layout(program), make_inputs(program))]
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
    """('ok', the arrays' bits after the call) or ('refused' | 'internal' | 'fault', message)."""
    arrays = make_inputs(program)
    args = [_for_interpreter(a, t) for a, (_, t, _) in zip(arrays, tensor_layout(program))]
    try:
        dsl.interpret(loaded.module.run, *args, program.n, C=program.const)
    except CompileError as err:
        if any(d.code == "DSL402" for d in err.diagnostics):
            return "internal", str(err)
        errors = [d for d in err.diagnostics if d.is_error]
        if not errors or any(d.range.file != str(loaded.path) or d.range.line < 1 for d in errors):
            return "internal", "a refusal that does not point into the program:\n" + str(err)
        return "refused", str(err)
    except Exception as err:
        diagnostic = getattr(err, "diagnostic", None)
        if diagnostic is not None and diagnostic.code == "DSL601" and "internal interpreter error" not in str(err):
            return "fault", str(err)
        return "internal", "".join(traceback.format_exception(err))
    return "ok", arrays


def run_gpu(program: Program, loaded: Loaded) -> tuple[str, Any]:
    """The same call on the GPU, through torch (as on the team's H200 machine)."""
    import torch

    arrays = make_inputs(program)
    views = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64}
    signed = {16: (np.int16, torch.int16), 32: (np.int32, torch.int32), 64: (np.int64, torch.int64)}
    device = []
    for a, (_, t, _) in zip(arrays, tensor_layout(program)):  # floats travel as signed integers of their bits
        moved = torch.from_numpy(a.view(signed[t.bits][0]) if t.is_float else a).cuda()
        device.append(moved.view(views[t.name]) if t.is_float else moved)
    try:
        loaded.module.run(*device, program.n, C=program.const)
        if not _finished(torch, HANG_SECONDS):
            return "hang", (f"the kernel was still running after {HANG_SECONDS:g} s (the reference finishes); "
                            "this process can run nothing more on the GPU")
        torch.cuda.synchronize()
    except CompileError as err:
        return ("internal" if any(d.code == "DSL402" for d in err.diagnostics) else "refused"), str(err)
    except Exception as err:
        return "internal", "".join(traceback.format_exception(err))
    back = []
    for d, a, (_, t, _) in zip(device, arrays, tensor_layout(program)):
        host = d.view(signed[t.bits][1]).cpu().numpy() if t.is_float else d.cpu().numpy()
        back.append(host.view(a.dtype))
    return "ok", back


def _finished(torch: Any, seconds: float) -> bool:
    """Whether the work queued on the current stream ends within `seconds` (a synchronize would
    wait forever for a kernel that loops forever)."""
    done = torch.cuda.Event()
    done.record()
    limit = time.monotonic() + seconds
    while not done.query():
        if time.monotonic() > limit:
            return False
        time.sleep(0.0002)
    return True


def _same(t: DType, want: Any, got: int) -> bool:
    if not t.is_float:
        return want == got
    fmt = F.FORMATS[t.name]
    return F.is_nan_bits(fmt, got) if want != want else F.encode(fmt, want) == got


def _show(t: DType, v: Any, bits: bool) -> str:
    if not t.is_float:
        return str(v)
    value = F.decode(F.FORMATS[t.name], v) if bits else v
    pattern = v if bits else F.encode(F.FORMATS[t.name], v)
    return f"{value!r} ({pattern:#x})"


def differences(program: Program, expected: dict[str, list[Any]], arrays: list[np.ndarray], label: str) -> str:
    """'' when every compared tensor agrees, else the first few differing elements."""
    lines = []
    for (name, t, _), a in zip(tensor_layout(program), arrays):
        if name not in ("out", "hist"):
            continue
        got = [int(v) for v in a.reshape(-1).tolist()]
        for i, (e, g) in enumerate(zip(expected[name], got)):
            if not _same(t, e, g):
                where = f"element {i}"
                if name == "out":
                    thread, slot = divmod(i, program.slots)
                    where = (f"thread {thread} (block {thread // program.block}, thread_idx "
                             f"{thread % program.block}) slot {slot}")
                lines.append(f"  {name} {where}: reference {_show(t, e, False)}, {label} {_show(t, g, True)}")
    if not lines:
        return ""
    more = f"\n  ... and {len(lines) - 8} more" if len(lines) > 8 else ""
    return "\n".join(lines[:8]) + more


def check(program: Program, directory: Path, gpu: bool = False) -> Verdict:
    """Runs `program` by the reference and the interpreter (and the GPU when asked)."""
    source = program.render()
    try:
        expected = run_reference(program, source)
    except Exception as err:  # the reference itself broke: its fault, or the generator's
        return Verdict("internal", "the reference raised:\n" + "".join(traceback.format_exception(err)))
    if expected.unmodelled and not program.refusal:
        return Verdict("skipped", expected.unmodelled)
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
        diff = differences(program, expected.tensors, got, "interpreter")
        if diff:
            return Verdict("mismatch", "interpreter differs from the reference:\n" + diff)
        if gpu:
            kind, on_gpu = run_gpu(program, loaded)
            if kind == "hang":
                return Verdict("mismatch", f"on the GPU: {on_gpu}", gpu=True, stuck=True)
            if kind != "ok":
                return Verdict("internal" if kind == "internal" else "mismatch", f"on the GPU: {on_gpu}", gpu=True)
            diff = differences(program, expected.tensors, on_gpu, "GPU")
            if diff:
                return Verdict("mismatch", "the GPU differs from the reference:\n" + diff, gpu=True)
        return Verdict("compared", gpu=gpu)
    finally:
        loaded.close()
        sys.modules.pop(loaded.module.__name__, None)


def quiet_environment() -> None:
    """Fuzzed kernels are compiled once each: keep them out of the user's disk cache."""
    os.environ.setdefault("KDSL_NO_DISK_CACHE", "1")
