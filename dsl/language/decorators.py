"""`@dsl.kernel` and `@dsl.jit`: what a decorated function becomes.

A `KernelFunction` is device code: traced into a `gpu.func`, launched only from a `@jit`
host function (`saxpy(x, y, a, n).launch(grid=..., block=...)`). A `JitFunction` is host
code: traced into a `func.func` of `gpu.launch_func` ops and a generated Python launcher;
calling it compiles (cached) and runs on the GPU.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import sys
import types
from collections.abc import Iterator
from typing import Any

from dsl import environment
from dsl.diagnostics import ArgumentError, CompileError

# How a jit call runs and how a function compiles belong to the layers above this one; the
# `dsl` package (above them all) plugs them in when it is imported, so the language layer
# names no layer above it.
_call_jit: Any = None  # the interpreter or dsl.runtime.jit_call.call_jit (wired in dsl/__init__.py)
_compile_function: Any = None  # dsl.compiler.api.compile
_call_autotuned: Any = None  # dsl.runtime.autotune.call
_torch_op: Any = None  # dsl.torch.registry.torch_op
# set by `dsl.torch` where torch is installed: whether torch.compile is tracing, and the call of
# a jit function's operator that tracing records instead of the call (`dsl.torch.dynamo`)
_torch_compiling: Any = None
_torch_graph_call: Any = None


# The compile hints a kernel takes besides `known_block_size`, with their defaults. The
# compiler validates them (DSL201 at the decorator argument, see `static_checks.check_hints`).
HINT_DEFAULTS: dict[str, Any] = {"maxnreg": None, "minnctapersm": None, "fastmath": False, "contract": True,
                                 "ftz": False, "debug": False}

# Hints an autotuning config sets for every kernel compiled inside `hint_overrides` (this
# thread or task only): every reader of `KernelFunction.hints` (checks, tracing, cache keys)
# then sees the config's values, so each config compiles, and is cached, on its own.
_hint_overrides: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "kdsl_hint_overrides", default=None)


@contextlib.contextmanager
def hint_overrides(hints: dict[str, Any]) -> Iterator[None]:
    """Compiles inside this block give every kernel these hints (an autotuning config's)."""
    token = _hint_overrides.set(dict(hints) or None)
    try:
        yield
    finally:
        _hint_overrides.reset(token)


class KernelFunction:
    """A `@dsl.kernel` function; `known_block_size` is a contract checked at every launch.

    Compile hints: `maxnreg` caps the registers per thread (PTX `.maxnreg`), `minnctapersm`
    asks for that many resident blocks per SM (`.minnctapersm`, which needs the block size:
    `known_block_size` or a compile-time launch block), `contract=False` keeps `a * b + c`
    as a rounded multiply and a rounded add instead of one FMA, and `fastmath=True` also
    allows approximate division and math functions, reassociation and the assumption that
    no value is NaN, infinite or a signed zero that matters. `ftz=True` flushes f32
    subnormal inputs and results to zero (nvcc's `-ftz=true`): the `.ftz` instructions, e.g.
    one `ex2.approx.ftz.f32` per `dsl.exp2` instead of the extra scaling for subnormals; NaN
    and infinities keep their meaning. `debug=True` (or `KDSL_DEBUG=1` for every kernel)
    compiles with device debug information and without optimisation (`ptxas -g`), so that
    cuda-gdb stops at the kernel's Python lines and steps through them.
    """

    def __init__(self, fn: Any, name: str | None = None, known_block_size: Any = None, target: str | None = None,
                 **hints: Any):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.kernel_name = name or fn.__name__
        self.known_block_size = known_block_size
        # The architecture the kernel is written for ("sm_90a" for wgmma and setmaxnreg): a
        # module with this kernel compiles for it (see `FunctionCompiler.kernel_target`).
        self.target = target
        unknown = set(hints) - set(HINT_DEFAULTS)
        if unknown:
            raise TypeError(f"@dsl.kernel got unknown hint(s) {', '.join(sorted(unknown))}; "
                            f"the hints are {', '.join(HINT_DEFAULTS)}")
        self._hints = {**HINT_DEFAULTS, **hints}

    @property
    def hints(self) -> dict[str, Any]:
        """The declared hints, with those of the autotuning config being compiled, if any."""
        overrides = _hint_overrides.get()
        return self._hints if overrides is None else {**self._hints, **overrides}

    def options_key(self) -> tuple:
        """Everything of the decorator that changes the compiled code (for cache keys)."""
        return (self.kernel_name, repr(self.known_block_size), tuple(repr(self.hints[k]) for k in HINT_DEFAULTS),
                self.target)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from dsl.diagnostics import CompileError, Diagnostic
        from dsl.language.call_site import caller_range

        rng = caller_range(sys._getframe(1))
        raise CompileError([
            Diagnostic.make(
                "DSL304",
                f"kernel '{self.kernel_name}' called outside a @jit function; "
                "launch it from a @dsl.jit function with .launch(grid=..., block=...)",
                rng,
            )
        ])

    def __repr__(self) -> str:
        return f"<dsl.kernel {self.kernel_name}>"


_KDSL_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _user_facing(err: BaseException) -> bool:
    """kdsl's errors about the user's program (not a bug of kdsl's): their traceback is cut."""
    return isinstance(err, CompileError | ArgumentError) or type(err).__module__ == "dsl.runtime.driver"


def user_frames(tb: Any) -> Any:
    """The traceback without kdsl's own frames (the compiler, the runtime), so an error raised
    at a jit call shows the user's code, as Triton's filtered tracebacks do."""
    frames = []
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(_KDSL_ROOT):
            frames.append(tb)
        tb = tb.tb_next
    out = None
    for entry in reversed(frames):
        out = types.TracebackType(out, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return out


def run_for_the_user(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Calls `fn`; an error kdsl raises about the user's program leaves with the user's frames."""
    try:
        return fn(*args, **kwargs)
    except Exception as err:
        if not _user_facing(err) or environment.switch("KDSL_FULL_TRACEBACK"):
            raise
        raise err.with_traceback(user_frames(err.__traceback__)) from err.__cause__


class _PythonJitCall:
    """The pure-Python twin of `_jitcall.c` (used where that optional module is not built)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _torch_compiling is not None and _torch_compiling():  # torch.compile traces this call
            return _torch_graph_call(self, args, kwargs)
        arity, launch = self._fast  # type: ignore[attr-defined]  # one read: a matching pair
        if len(args) == arity and not kwargs:
            # The common case: the same specialization as the previous call. Its launcher
            # checks every argument before it launches anything, so a mismatch (another
            # dtype or rank) only means "look the specialization up" in the slow path.
            try:
                return launch(*args)
            except ArgumentError:
                pass
        return self._call_slow(*args, **kwargs)  # type: ignore[attr-defined]


_JitCall: Any = _PythonJitCall
if not environment.switch("KDSL_PURE_PYTHON"):
    try:
        from dsl.language._jitcall import JitCall as _JitCall  # type: ignore[no-redef]
    except ImportError:
        pass


class JitFunction(_JitCall):
    """A `@dsl.jit` host function: compiles per specialization, then launches its kernels.

    Calling it runs the last specialization's launcher directly when the arguments can be
    its arguments (`_JitCall`), else `_call_slow`, which finds or compiles the right one.
    """

    # set by dsl.runtime.jit_call, as one tuple so that threads never pair one launcher with
    # another's arity: the last specialization's launcher and how many positional arguments
    # it takes as they come
    _fast: tuple[int, Any] = (-1, None)
    # set by @dsl.autotune (dsl.language.autotune.AutotuneSpec); an autotuned function never
    # sets `_fast`, so every call goes through `_call_slow`, which picks the tuned config
    tuning: Any = None

    def __init__(self, fn: Any, examples: list[Any] | None = None, reference: Any = None):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.examples = examples
        self.reference = reference

    def _call_slow(self, *args: Any, **kwargs: Any) -> Any:
        if self.tuning is not None:
            return run_for_the_user(_call_autotuned, self, args, kwargs)
        return run_for_the_user(_call_jit, self, args, kwargs)

    def compile(self, *args: Any, target: str | None = None, **kwargs: Any) -> Any:
        return run_for_the_user(_compile_function, self, *args, target=target, **kwargs)

    @property
    def torch_op(self) -> Any:
        """This function as the PyTorch operator `torch.ops.kdsl.<name>`, registered on first
        use (imports torch; see `dsl.torch`)."""
        return _torch_op(self)

    def __repr__(self) -> str:
        return f"<dsl.jit {self.fn.__qualname__}>"


def kernel(fn: Any = None, *, name: str | None = None, known_block_size: Any = None, maxnreg: Any = None,
           minnctapersm: Any = None, fastmath: Any = False, contract: Any = True, ftz: Any = False,
           debug: Any = False, target: str | None = None) -> Any:
    """Declares a GPU kernel. `known_block_size=[x, y, z]` promises the launch block;
    `maxnreg`, `minnctapersm`, `fastmath`, `contract`, `ftz` and `debug` are compile hints (see
    `KernelFunction`). Float `a * b + c` contracts to FMA unless `contract=False`.
    `target="sm_90a"` says the kernel is written for that architecture (Hopper's wgmma and
    setmaxnreg exist only there); programs with it compile for it."""
    hints = {"maxnreg": maxnreg, "minnctapersm": minnctapersm, "fastmath": fastmath, "contract": contract,
             "ftz": ftz, "debug": debug}
    if fn is None:
        return lambda f: KernelFunction(f, name=name, known_block_size=known_block_size, target=target, **hints)
    return KernelFunction(fn, name=name, known_block_size=known_block_size, target=target, **hints)


def jit(fn: Any = None, *, examples: list[Any] | None = None, reference: Any = None) -> Any:
    """Declares a host function that launches kernels; `examples=` lists specializations to
    compile without data (each a tuple of arguments, arrays or `dsl.TensorSpec`s), and
    `reference=` a plain function whose results a run is checked against."""
    if fn is None:
        return lambda f: JitFunction(f, examples=examples, reference=reference)
    return JitFunction(fn, examples=examples, reference=reference)
