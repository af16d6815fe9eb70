"""`dsl.run_function`: compile a `@jit` function from source, run it on synthesized data,
time it, and check it against its reference — what the editor's "Run on GPU" shows.

Inputs come from the function's first `examples=` entry when it has one (a
`dsl.TensorSpec` with a shape gives that shape), else from its annotations: rank-1
tensors get 1<<20 elements, rank-2 tensors 4096 x 4096, higher ranks a shape of at most
1<<24 elements. Every tensor argument of one rank gets the same shape. Floating tensors
hold standard-normal values, integer tensors values in [0, 100). Float scalars are 1.5
(an `examples=` value wins), integer scalars the size of the first tensor's first
dimension, Constexpr parameters their defaults.

Reference convention (`@dsl.jit(reference=fn)`): `fn` is called with the same arguments,
tensors replaced by NumPy copies of the GPU inputs taken before the run. It either

- returns None, having updated its arrays in place as the kernels update theirs: every
  tensor argument is compared;
- returns a dict {parameter name: expected array}: those arguments are compared;
- returns one array or a tuple of arrays: compared with the last tensor arguments, in order
  (outputs conventionally come last, as in `add(a, b, c)`).

Comparison: relative L2 error ||out - ref|| / ||ref|| at most 1e-4 for f32/f64 (2e-2 for
f16/bf16), NaNs must match; integers and bools exactly.

Device: `device=N` runs on GPU N (`cuda:N`, after CUDA_VISIBLE_DEVICES), default 0: its
primary context is made current for the run (and the caller's restored after it), so the
inputs are allocated, the kernels launched and the events recorded there. A device that
does not exist is the answer's message, not an exception.

Timing: CUDA events around each call after warm-up; `median_ms` is the median per call.
`bandwidth_gbs` counts every tensor argument's bytes once (an input is read once, an
output written once); an argument that is read and written is counted once, so for such
kernels the figure is a lower bound.
"""

from __future__ import annotations

import statistics
from typing import Any

from dsl.runtime.driver import DeviceBuffer, DriverError, check, device_count, driver, on_context, primary_context

DEFAULT_1D = 1 << 20
DEFAULT_2D = (4096, 4096)
MAX_ELEMENTS = 1 << 24


class DeviceArray:
    """A minimal GPU array (what `run_function` synthesizes): `__cuda_array_interface__`,
    `shape`, `dtype`, and NumPy round trips."""

    def __init__(self, shape: tuple[int, ...], np_dtype: Any):
        import numpy as np

        self.shape = tuple(shape)
        self.dtype = np.dtype(np_dtype)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        self.buffer = DeviceBuffer(self.nbytes)

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.buffer.ptr, False),
                "strides": None, "version": 3}

    @classmethod
    def from_numpy(cls, array: Any) -> DeviceArray:
        import numpy as np

        array = np.ascontiguousarray(array)
        out = cls(array.shape, array.dtype)
        out.buffer.upload(array)
        return out

    def numpy(self) -> Any:
        import numpy as np

        out = np.empty(self.shape, self.dtype)
        self.buffer.download(out)
        return out

    def free(self) -> None:
        self.buffer.free()


NUMPY_NAMES = {"f16": "float16", "f32": "float32", "f64": "float64", "i8": "int8", "i16": "int16", "i32": "int32",
             "i64": "int64", "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64", "bool": "bool"}


def _default_shape(rank: int) -> tuple[int, ...]:
    if rank == 1:
        return (DEFAULT_1D,)
    if rank == 2:
        return DEFAULT_2D
    side = max(1, int(round(MAX_ELEMENTS ** (1.0 / rank))))
    return (side,) * rank


def _synthesize(jit_fn: Any, rng: Any, example: int = 0) -> tuple[list[Any], dict[str, Any], list[str]]:
    """(call arguments, {tensor param: numpy input}, tensor parameter names) for one run, from
    the `example`-th `examples=` entry where there are any."""
    import inspect

    import numpy as np

    from dsl.compiler.api import parse_examples
    from dsl.compiler.specs import evaluate_annotation
    from dsl.language.types import ConstexprType, DType, TensorSpec, TensorType

    sig = inspect.signature(jit_fn.fn)
    examples = parse_examples(jit_fn)
    if examples and not 0 <= example < len(examples):
        raise ValueError(f"there is no example {example}: '{jit_fn.fn.__name__}' has {len(examples)} examples= "
                         f"(0 to {len(examples) - 1})")
    ex_args, ex_kwargs = (examples[example][0], examples[example][1]) if examples else ((), {})
    given: dict[str, Any] = {}
    names = list(sig.parameters)
    for i, v in enumerate(ex_args):
        if i < len(names):
            given[names[i]] = v
    given.update(ex_kwargs)
    shapes_by_rank: dict[int, tuple[int, ...]] = {}
    plan = []
    for name, p in sig.parameters.items():
        ann = evaluate_annotation(jit_fn.fn, p.annotation)
        value = given.get(name, inspect.Parameter.empty)
        if isinstance(value, TensorSpec):
            rank = value.rank or 1
            if value.shape is not None:
                shapes_by_rank.setdefault(rank, value.shape)
            plan.append((name, "tensor", value.dtype, rank))
        elif isinstance(value, TensorType) or (value is inspect.Parameter.empty and isinstance(ann, TensorType)):
            t = value if isinstance(value, TensorType) else ann
            if t.dtype is None:
                raise ValueError(f"parameter '{name}' has no element type; add examples= to @dsl.jit")
            plan.append((name, "tensor", t.dtype, t.rank))
        elif value is not inspect.Parameter.empty and not isinstance(value, DType):
            plan.append((name, "value", value, None))
        elif isinstance(ann, ConstexprType) or (not isinstance(ann, DType) and p.default is not p.empty):
            if p.default is p.empty:
                raise ValueError(f"Constexpr parameter '{name}' has no default; add examples= to @dsl.jit")
            plan.append((name, "value", p.default, None))
        elif isinstance(ann, DType) or isinstance(value, DType):
            dt = value if isinstance(value, DType) else ann
            plan.append((name, "scalar", dt, p.default))
        else:
            raise ValueError(f"parameter '{name}' needs a type to synthesize an input; annotate it or add examples=")
    args: list[Any] = []
    inputs: dict[str, Any] = {}
    tensor_names: list[str] = []
    first_dim = None
    for name, kind, what, extra in plan:
        if kind == "tensor":
            if what.name not in NUMPY_NAMES:
                raise ValueError(f"cannot synthesize a {what.name} tensor for '{name}'")
            shape = shapes_by_rank.setdefault(extra, _default_shape(extra))
            data = synthesized(rng, shape, np.dtype(NUMPY_NAMES[what.name]))
            inputs[name] = data
            tensor_names.append(name)
            args.append(DeviceArray.from_numpy(data))
            if first_dim is None:
                first_dim = shape[0]
        elif kind == "value":
            args.append(what)
        else:
            if extra is not inspect.Parameter.empty:
                args.append(extra)
            elif what.is_float:
                args.append(1.5)
            elif what.is_bool:
                args.append(True)
            else:
                args.append(int(first_dim or 1024))
    return args, inputs, tensor_names


def _tolerance(dtype: Any) -> float:
    return 2e-2 if dtype.itemsize <= 2 and dtype.kind == "f" else 1e-4


def compare_to_reference(out: Any, ref: Any) -> tuple[bool, str]:
    import numpy as np

    ref = np.asarray(ref)
    if out.shape != ref.shape:
        return False, f"shape {out.shape} differs from the reference's {ref.shape}"
    if out.dtype.kind in "biu":
        bad = int(np.count_nonzero(out != ref))
        return bad == 0, f"{bad} elements differ" if bad else "exact"
    o = out.astype(np.float64)
    r = ref.astype(np.float64)
    if not np.array_equal(np.isnan(o), np.isnan(r)):
        return False, "NaNs differ from the reference"
    mask = ~np.isnan(r)
    denom = np.linalg.norm(r[mask]) or 1.0
    err = float(np.linalg.norm(o[mask] - r[mask]) / denom)
    ok = err <= _tolerance(out.dtype)
    return ok, f"relative L2 error {err:.2e}"


def jit_function_of(source: str, path: str, function: str) -> tuple[Any, str]:
    """Runs the module and finds its `@dsl.jit` function `function`: (it, "") or (None, why
    not), for "Run on GPU" and "Run on CPU" alike."""
    from dsl.language.decorators import JitFunction, KernelFunction
    from dsl.module_analysis import run_module

    namespace, diags = run_module(source, path)
    fn = namespace.get(function)
    if isinstance(fn, KernelFunction):
        return None, f"'{function}' is a @dsl.kernel; run the @dsl.jit function that launches it"
    if not isinstance(fn, JitFunction):
        errors = "; ".join(d.format() for d in diags if d.is_error)
        return None, f"no @dsl.jit function '{function}' in {path}" + (f" ({errors})" if errors else "")
    return fn, ""


def run_function(source: str, path: str, function: str, *, target: str | None = None,
                 repeat: int | None = None, device: int = 0) -> dict[str, Any]:
    """Runs `function` (a `@dsl.jit` function defined in `source`) on GPU `device`.

    Returns {ok, message, median_ms, bandwidth_gbs, correct}; `correct` is None when no
    reference is declared; the message names the device (`on cuda:1 (NVIDIA H200)`). Raises
    `NoGPUError` when there is no GPU.
    """
    result: dict[str, Any] = {"ok": False, "message": "", "median_ms": None, "bandwidth_gbs": None, "correct": None}
    if isinstance(device, bool) or not isinstance(device, int) or device < 0:
        result["message"] = f"device must be a GPU ordinal (0, 1, ...), not {device!r}"
        return result
    count = device_count()  # NoGPUError before anything else
    if device >= count:
        visible = f"cuda:0 to cuda:{count - 1}" if count > 1 else "cuda:0"
        result["message"] = (f"there is no cuda:{device}: {count} GPU{'s are' if count != 1 else ' is'} visible "
                             f"({visible}; CUDA_VISIBLE_DEVICES chooses which)")
        return result
    try:
        ctx = primary_context(device)
    except DriverError as err:
        result["message"] = str(err)
        return result
    with on_context(ctx):
        return _run_on(ctx, result, source, path, function, target, repeat)


def _run_on(ctx: Any, result: dict[str, Any], source: str, path: str, function: str, target: str | None,
            repeat: int | None) -> dict[str, Any]:
    """`run_function` with `ctx` current."""
    import numpy as np

    from dsl.diagnostics import CompileError
    from dsl.runtime.dlpack import ArgumentError
    from dsl.runtime.jit_call import specialization

    fn, problem = jit_function_of(source, path, function)
    if fn is None:
        result["message"] = problem
        return result
    rng = np.random.default_rng(0)
    arrays: list[DeviceArray] = []
    try:
        args, inputs, tensor_names = _synthesize(fn, rng)
        arrays = [a for a in args if isinstance(a, DeviceArray)]
        names = list(__import__("inspect").signature(fn.fn).parameters)
        if target is not None and target != ctx.arch:
            result["message"] = f"target {target} differs from the GPU's {ctx.arch}; running for {ctx.arch}"
        spec = specialization(fn, *args)
        drv = driver()
        fn(*args)  # loads the module; this run's outputs are checked
        check(drv.cuCtxSynchronize(), "running the kernels")
        correct = None
        detail = "no reference declared"
        if fn.reference is not None:
            correct, detail = _check_reference(fn.reference, args, names, inputs, tensor_names)
        # timing
        start = check(drv.cuEventCreate(0), "cuEventCreate")
        stop = check(drv.cuEventCreate(0), "cuEventCreate")
        try:
            for _ in range(3):
                fn(*args)
            check(drv.cuEventRecord(start, 0), "cuEventRecord")
            fn(*args)
            check(drv.cuEventRecord(stop, 0), "cuEventRecord")
            check(drv.cuEventSynchronize(stop), "running the kernels")
            first = check(drv.cuEventElapsedTime(start, stop), "cuEventElapsedTime")
            reps = repeat or max(5, min(100, int(300.0 / max(first, 1e-3))))
            times = []
            for _ in range(reps):
                check(drv.cuEventRecord(start, 0), "cuEventRecord")
                fn(*args)
                check(drv.cuEventRecord(stop, 0), "cuEventRecord")
                check(drv.cuEventSynchronize(stop), "running the kernels")
                times.append(check(drv.cuEventElapsedTime(start, stop), "cuEventElapsedTime"))
        finally:
            drv.cuEventDestroy(start)
            drv.cuEventDestroy(stop)
        median = float(statistics.median(times))
        nbytes = sum(a.nbytes for a in arrays)
        bandwidth = nbytes / (median * 1e-3) / 1e9 if median > 0 else None
        result.update(median_ms=median, bandwidth_gbs=bandwidth, correct=correct,
                      ok=correct is not False)
        head = result["message"] + "; " if result["message"] else ""
        bw = f", {bandwidth:.0f} GB/s" if bandwidth else ""
        verdict = {True: "matches the reference", False: "DIFFERS from the reference", None: detail}[correct]
        if correct is not None:
            verdict += f" ({detail})"
        result["message"] = (f"{head}{function} on cuda:{ctx.device} ({ctx.name}): {median * 1e3:.1f} us median over "
                             f"{len(times)} runs"
                             f"{bw}; {verdict}" + (" [loaded from the disk cache]" if spec.loaded_from_disk else ""))
    except CompileError as err:
        result["message"] = "compile failed:\n" + "\n".join(d.format() for d in err.diagnostics)
        result["diagnostics"] = [d.to_dict() for d in err.diagnostics]
    except (ArgumentError, ValueError, TypeError) as err:
        result["message"] = f"{type(err).__name__}: {err}"
    except DriverError as err:
        result["message"] = str(err)
        diag = getattr(err, "diagnostic", None)
        if diag is not None:
            result["diagnostics"] = [diag.to_dict()]
    finally:
        for a in arrays:
            a.free()
    return result


def synthesized(rng: Any, shape: tuple[int, ...], np_dtype: Any) -> Any:
    """Inputs a run makes up for a tensor: normal floats, random booleans, integers in 0..99."""
    import numpy as np

    if np_dtype.kind == "f":
        return rng.standard_normal(shape, dtype=np.float32).astype(np_dtype)
    if np_dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    return rng.integers(0, 100, shape).astype(np_dtype)


def reference_pairs(expected: Any, arrays: dict[str, Any], tensor_names: list[str]) -> list[tuple[str, Any]]:
    """(tensor, what it should hold) from what a `reference=` function returned: nothing (it
    changed its copies of the arrays in place), a dict by name, or the last outputs in order."""
    if expected is None:
        return [(n, arrays[n]) for n in tensor_names]
    if isinstance(expected, dict):
        return list(expected.items())
    outs = list(expected) if isinstance(expected, tuple | list) else [expected]
    return list(zip(tensor_names[-len(outs):], outs))


def _check_reference(reference: Any, args: list[Any], names: list[str], inputs: dict[str, Any],
                     tensor_names: list[str]) -> tuple[bool, str]:
    import numpy as np

    ref_args = []
    arrays = {}
    for name, a in zip(names, args):
        if isinstance(a, DeviceArray):
            arrays[name] = inputs[name].copy()
            ref_args.append(arrays[name])
        else:
            ref_args.append(a)
    pairs = reference_pairs(reference(*ref_args), arrays, tensor_names)
    by_name = dict(zip(names, args))
    details = []
    ok = True
    for name, ref in pairs:
        got = by_name[name].numpy()
        good, text = compare_to_reference(got, np.asarray(ref))
        ok &= good
        details.append(f"{name}: {text}")
    return ok, ", ".join(details)
