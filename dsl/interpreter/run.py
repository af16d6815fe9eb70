"""`run_function` on the CPU: what the editor's "Run on CPU (interpreter)" shows.

The interpreter's twin of `dsl.runtime.run.run_function`, for machines without a GPU: the
module runs, the `@dsl.jit` function is called once in the interpreter on small synthesized
NumPy inputs and checked against its `reference=` with the same convention and tolerances
(relative L2 error 1e-4 for f32/f64, 2e-2 for f16; integers exactly).

Inputs: rank-1 tensors get 4096 elements, rank-2 tensors 128 x 128, higher ranks 16 per
dimension (an `examples=` entry gives dtypes, ranks and scalar values; its shapes are sized
for a GPU and are not used). Float tensors hold standard-normal values, integer tensors values
in [0, 100); float scalars are 1.5, integer scalars the first tensor's first dimension,
Constexpr parameters their defaults.

The answer says what ran: each tensor the kernels write (the launcher's access facts) with
its shape, dtype, min / max / mean and NaN / inf counts, the interpreter's wall time (which
says nothing of the GPU's), and the comparison with the reference when there is one.
"""

from __future__ import annotations

import inspect
import time
from typing import Any

from dsl.diagnostics import ArgumentError, CompileError
from dsl.interpreter.mode import require_numpy

require_numpy()  # before NumPy is imported, so a missing one says what to install

import numpy as np  # noqa: E402

from dsl.runtime.run import (  # noqa: E402
    NUMPY_NAMES,
    compare_to_reference,
    jit_function_of,
    reference_pairs,
    synthesized,
)

DEFAULT_1D = 4096
DEFAULT_2D = (128, 128)
DEVICE = "the CPU (interpreter)"


def _shape(rank: int) -> tuple[int, ...]:
    return (DEFAULT_1D,) if rank == 1 else DEFAULT_2D if rank == 2 else (16,) * rank


def synthesize(jit_fn: Any, rng: np.random.Generator, example: int = 0) -> tuple[list[Any], list[str]]:
    """(call arguments, names of the tensor parameters) for one interpreted run, typed by the
    `example`-th `examples=` entry where there are any."""
    from dsl.compiler.api import parse_examples
    from dsl.compiler.specs import evaluate_annotation
    from dsl.language.types import ConstexprType, DType, TensorSpec, TensorType

    sig = inspect.signature(jit_fn.fn)
    examples = parse_examples(jit_fn)
    given: dict[str, Any] = {}
    if examples and not 0 <= example < len(examples):
        raise ValueError(f"there is no example {example}: '{jit_fn.fn.__name__}' has {len(examples)} examples= "
                         f"(0 to {len(examples) - 1})")
    if examples:
        ex_args, ex_kwargs, _ = examples[example]
        given.update(zip(sig.parameters, ex_args))
        given.update(ex_kwargs)
    args: list[Any] = []
    tensors: list[str] = []
    first_dim: int | None = None
    for name, p in sig.parameters.items():
        ann = evaluate_annotation(jit_fn.fn, p.annotation)
        value = given.get(name, inspect.Parameter.empty)
        tensor = value if isinstance(value, TensorSpec | TensorType) else ann if (
            value is inspect.Parameter.empty and isinstance(ann, TensorType)) else None
        if tensor is not None:
            if tensor.dtype is None or tensor.dtype.name not in NUMPY_NAMES:
                what = tensor.dtype.name if tensor.dtype is not None else "untyped"
                raise ValueError(f"cannot synthesize a {what} tensor for '{name}'")
            shape = _shape(tensor.rank or 1)
            data = synthesized(rng, shape, np.dtype(NUMPY_NAMES[tensor.dtype.name]))
            args.append(data)
            tensors.append(name)
            first_dim = shape[0] if first_dim is None else first_dim
        elif value is not inspect.Parameter.empty and not isinstance(value, DType):
            args.append(value)
        elif isinstance(ann, ConstexprType) or (not isinstance(ann, DType) and p.default is not p.empty):
            if p.default is p.empty:
                raise ValueError(f"Constexpr parameter '{name}' has no default; add examples= to @dsl.jit")
            args.append(p.default)
        elif isinstance(ann, DType) or isinstance(value, DType):
            dt = value if isinstance(value, DType) else ann
            assert isinstance(dt, DType)
            args.append(p.default if p.default is not p.empty else 1.5 if dt.is_float else True if dt.is_bool
                        else int(first_dim or 1024))
        else:
            raise ValueError(f"parameter '{name}' needs a type to synthesize an input; annotate it or add examples=")
    return args, tensors


def check_reference(reference: Any, args: list[Any], inputs: list[Any], names: list[str],
                    tensors: list[str]) -> tuple[bool, str]:
    """Compares the run's arrays with what `reference` computes from copies of the inputs
    (the convention of `dsl.runtime.run`)."""
    ref_args = [a.copy() if isinstance(a, np.ndarray) else a for a in inputs]
    pairs = reference_pairs(reference(*ref_args), dict(zip(names, ref_args)), tensors)
    got = dict(zip(names, args))
    ok, details = True, []
    for name, ref in pairs:
        good, text = compare_to_reference(np.asarray(got[name]), np.asarray(ref))
        ok &= good
        details.append(f"{name}: {text}")
    return ok, ", ".join(details)


def statistics(name: str, array: np.ndarray) -> str:
    """`y (128, 128) float32: min -2.31, max 4.05, mean 0.0123, no NaN or inf` for one output."""
    head = f"{name} {tuple(array.shape)} {array.dtype}"
    if array.size == 0:
        return f"{head}: empty"
    if array.dtype.kind in "biu":
        values = array.astype(np.int64)
        return f"{head}: min {int(values.min())}, max {int(values.max())}, mean {float(values.mean()):.4g}"
    values = array.astype(np.float64)
    nan, inf = int(np.isnan(values).sum()), int(np.isinf(values).sum())
    finite = values[np.isfinite(values)]
    spread = (f"min {finite.min():.4g}, max {finite.max():.4g}, mean {finite.mean():.4g}" if finite.size
              else "no finite value")
    bad = "no NaN or inf" if not nan and not inf else f"{nan} NaN, {inf} inf"
    return f"{head}: {spread}, {bad}"


def run_function(source: str, path: str, function: str, *, target: str | None = None,
                 example: int = 0) -> dict[str, Any]:
    """Runs `function` (a `@dsl.jit` function of `source`) once in the interpreter.

    Returns {ok, message, correct, elapsed_ms, device}; `correct` is None without a reference,
    `diagnostics` (as `Diagnostic.to_dict()`) when compiling or running failed."""
    from dsl.interpreter.jit import call_interpreted
    from dsl.language.decorators import hint_overrides
    from dsl.runtime.driver import LaunchError

    result: dict[str, Any] = {"ok": False, "message": "", "correct": None, "elapsed_ms": None, "device": DEVICE}
    fn, problem = jit_function_of(source, path, function)
    if fn is None:
        result["message"] = problem
        return result
    rng = np.random.default_rng(0)
    try:
        args, tensors = synthesize(fn, rng, example)
        inputs = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        names = list(inspect.signature(fn.fn).parameters)
        call = dict(zip(names, args))  # by name: an autotuning config's values replace the defaults
        config = fn.tuning.configs[0] if fn.tuning is not None else None  # tuning measures the GPU
        if config is not None:
            call.update(config.params)
        started = time.perf_counter()
        with hint_overrides(config.hints if config is not None else {}):
            spec = call_interpreted(fn, (), call, config.describe() if config is not None else "")
        elapsed = (time.perf_counter() - started) * 1e3
        all_args = [call[n] for n in names]
        correct, detail = None, "no reference declared (reference= on @dsl.jit compares the outputs)"
        if fn.reference is not None:
            correct, detail = check_reference(fn.reference, all_args, inputs, names, tensors)
        verdict = {True: "matches the reference", False: "DIFFERS from the reference", None: detail}[correct]
        if correct is not None:
            verdict += f" ({detail})"
        written = [statistics(n, call[n]) for n in names if n in spec.writes and isinstance(call[n], np.ndarray)]
        read = ", ".join(f"{n} {tuple(call[n].shape)}" for n in tensors if n not in spec.writes)
        outputs = "; ".join(written) if written else "no tensor written"
        result.update(ok=correct is not False, correct=correct, elapsed_ms=elapsed, outputs=written,
                      message=f"ran in {elapsed:.0f} ms; {outputs}; {verdict}" + (f"; inputs {read}" if read else ""))
    except CompileError as err:
        result["message"] = "compile failed:\n" + "\n".join(d.format() for d in err.diagnostics)
        result["diagnostics"] = [d.to_dict() for d in err.diagnostics]
    except LaunchError as err:
        result["message"] = str(err)
        if err.diagnostic is not None:
            result["diagnostics"] = [err.diagnostic.to_dict()]
    except (ArgumentError, ValueError, TypeError) as err:
        result["message"] = f"{type(err).__name__}: {err}"
    return result
