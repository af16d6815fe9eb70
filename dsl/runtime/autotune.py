"""Autotuned jit calls: choose the fastest config once per key, remember it, agree across processes.

A call of an `@dsl.autotune` function reduces its arguments to a key: the values of the
`key=` parameters (a tensor's dtype and shape), the dtype and rank of every other tensor and
the compile-time values passed. The first call with a new key runs each config on the call's
own arguments and keeps the fastest; later calls with that key launch it straight away.

Layers: `Tuner` holds the selection, persistence and process protocol and knows nothing of
GPUs; a `Bench` (`autotune_bench`) prepares and times one config: `GpuBench` compiles the
config's specialization and times it with CUDA events, `PythonBench` runs a Python function
(CPU tests, where an injected timer stands in for the GPU's).

- **Restore.** Before the first trial the tensors in `restore=` (default: every tensor the
  configs' kernels write, as the compiler recorded in the launcher's `TENSOR_ACCESS`) are
  copied; they are put back after each config's trials, so the call that follows runs on
  the caller's data and tuning never changes a result.
- **Failures.** A config that fails to compile, load or launch (too much shared memory, too
  many registers, a ptxas error, a failing `assert`) is skipped with its reason; when every
  config fails, `AutotuneError` gives each reason.
- **Records.** One record per (device and driver, kdsl version, the function's source and
  its dependencies', argument signature, key values) lives in the kernel cache, under
  `autotune/` (`dsl.compiler.disk_cache` blobs: the same atomic writes, digest checks, lock
  files, `KDSL_CACHE_DIR` and `KDSL_NO_DISK_CACHE`); each config's outcome is its own entry,
  so adding a config measures only it, and a process that finds every config recorded runs
  no trial. A record is written only when some config ran.
- **Processes.** On a miss the process takes the key's lock file (`disk_cache.lock`) and
  reads the record again: the holder measures and writes, the others wait on the lock, then
  read its outcomes. With `torch.distributed` initialised (more than one rank), rank 0 does
  this and broadcasts its choice, which every rank uses: all ranks must reach the first call
  with a key together, as with any collective.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import json
import sys
import textwrap
import threading
from dataclasses import dataclass, field
from typing import Any

from dsl.compiler import disk_cache
from dsl.language.autotune import AutotuneSpec, Config, parameter_kind
from dsl.language.types import DType, TensorSpec, dtype_from_foreign
from dsl.runtime.autotune_bench import Bench, Candidate, snapshot

RECORD_FORMAT = "kdsl-autotune-1"


class AutotuneError(RuntimeError):
    """No config of an autotuned function could run; the message gives each one's reason."""


@dataclass
class Outcome:
    """One config's result for one key: its time per call, or why it failed."""

    ms: float | None = None
    error: str | None = None
    kernels: list[dict[str, Any]] = field(default_factory=list)  # registers, spills, smem, occupancy
    measured: bool = False  # by this process (False: read from the record)

    def to_json(self) -> dict[str, Any]:
        return {"ms": self.ms, "error": self.error, "kernels": self.kernels}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Outcome:
        return cls(data.get("ms"), data.get("error"), list(data.get("kernels") or []))


@dataclass
class Tuning:
    """What tuning one key found: every config's outcome, in the declared order, and the winner."""

    function: str
    key: str
    configs: list[Config]
    outcomes: list[Outcome]
    winner: Config
    trials: int  # configs this process measured for it


class Tuner:
    """Chooses and remembers the config of one autotuned jit function (see the module docstring).

    `trials` counts the configs this process has measured; tests count them.
    """

    def __init__(self, jit_fn: Any, bench: Bench | None = None):
        from dsl.runtime.autotune_bench import GpuBench

        self.fn = jit_fn
        self.spec: AutotuneSpec = jit_fn.tuning
        self.bench: Bench = bench if bench is not None else GpuBench(jit_fn)
        self.name = jit_fn.fn.__qualname__
        params = inspect.signature(jit_fn.fn).parameters
        self.names = list(params)
        self.kinds = [parameter_kind(jit_fn, p.annotation) for p in params.values()]
        # how many leading parameters a call may pass positionally: those before the first tuned one
        self._positional = next((i for i, n in enumerate(self.names) if n in self.spec.tuned), len(self.names))
        self.trials = 0
        self._source_digest: str | None = None
        self._chosen: dict[Any, Config] = {}  # call key -> the config it runs
        self._candidates: dict[tuple[str, Any], Candidate] = {}  # (config, signature) -> its loaded form
        self._lock = threading.Lock()  # one thread tunes a key; the others wait for its choice

    # -- calls ----------------------------------------------------------------------------------

    def __call__(self, args: tuple, kwargs: dict) -> Any:
        stream = None
        if "stream" in kwargs and "stream" not in self.names:
            kwargs = dict(kwargs)
            stream = kwargs.pop("stream")
        sig, values = self._call_key(args, kwargs)
        config = self._chosen.get((sig, values))
        if config is None:
            with self._lock:
                config = self._chosen.get((sig, values))
                if config is None:
                    config = self._choose(args, kwargs, stream).winner
                    self._chosen[(sig, values)] = config
        merged = {**kwargs, **config.params}
        return self._candidate(config, sig, args, merged).run(args, merged, stream)

    def tune(self, args: tuple, kwargs: dict, *, force: bool = False) -> Tuning:
        """Tunes this key now (`force`: measures every config again) and reports every outcome."""
        stream = None
        if "stream" in kwargs and "stream" not in self.names:
            kwargs = dict(kwargs)
            stream = kwargs.pop("stream")
        with self._lock:
            tuning = self._choose(args, kwargs, stream, force=force)
            self._chosen[self._call_key(args, kwargs)] = tuning.winner
        return tuning

    # -- keys -----------------------------------------------------------------------------------

    def _bound(self, args: tuple, kwargs: dict) -> list[tuple[int, Any]]:
        """(parameter index, value) of each argument passed; refuses tuned parameters."""
        if len(args) > self._positional:
            if len(args) > len(self.names):
                raise TypeError(f"{self.name}() takes {len(self.names)} arguments but {len(args)} were given")
            self._refuse(self.names[self._positional])
        bound = list(enumerate(args))
        if kwargs:
            for name, value in kwargs.items():
                if name not in self.names:
                    raise TypeError(f"{self.name}() got an unexpected keyword argument '{name}'")
                if name in self.spec.tuned:
                    self._refuse(name)
                bound.append((self.names.index(name), value))
            bound.sort(key=lambda item: item[0])
        return bound

    def _refuse(self, name: str) -> None:
        raise TypeError(f"{self.name} is autotuned over '{name}': leave it out of the call (each config sets it)")

    def _call_key(self, args: tuple, kwargs: dict) -> tuple[Any, Any]:
        """(signature, key values): cheap hashable parts of a call's key, from the raw arguments."""
        sig, values = [], []
        key = self.spec.key
        for i, value in self._bound(args, kwargs):
            name = self.names[i]
            dtype, shape = getattr(value, "dtype", None), getattr(value, "shape", None)
            if name in key:
                values.append((name, (dtype, tuple(shape)) if shape is not None else _hashable(value)))
            elif shape is not None and dtype is not None:
                sig.append((name, dtype, len(shape)))
            elif self.kinds[i] == "compile-time":
                sig.append((name, _hashable(value)))
        return tuple(sig), tuple(values)

    def key_text(self, args: tuple, kwargs: dict) -> str:
        """The key as records store it: `x=f32 rank 2; n=4096` (dtype names as kdsl spells them)."""
        parts = []
        key = self.spec.key
        for i, value in self._bound(args, kwargs):
            name = self.names[i]
            if name in key or self.kinds[i] != "scalar":
                text = describe_value(value, with_shape=name in key)
                if text is not None:
                    parts.append(f"{name}={text}")
        return "; ".join(parts)

    def record_key(self, key_text: str) -> tuple[str, dict[str, str]]:
        """The record's cache key and the named parts it is made of (kept in the record)."""
        parts = {
            "format": RECORD_FORMAT,
            "device": self.bench.device(),
            "kdsl": kdsl_version(),
            "function": self.name,
            "source": self._digest(),
            "key": key_text,
        }
        text = "\n".join(f"{k}={v}" for k, v in parts.items())
        return hashlib.sha256(text.encode()).hexdigest(), parts

    def _digest(self) -> str:
        """The function's source digest, once: its source is fixed once it is defined."""
        if self._source_digest is None:
            self._source_digest = function_digest(self.fn, self.spec)
        return self._source_digest

    # -- choosing -------------------------------------------------------------------------------

    def _choose(self, args: tuple, kwargs: dict, stream: Any, force: bool = False) -> Tuning:
        with self.bench.on_device(self.names, args, kwargs):  # tuned, timed and recorded on the arrays' GPU
            return self._choose_here(args, kwargs, stream, force)

    def _choose_here(self, args: tuple, kwargs: dict, stream: Any, force: bool) -> Tuning:
        key_text = self.key_text(args, kwargs)
        dist = _distributed()
        if dist is None:
            return self._tune(args, kwargs, stream, key_text, force)
        if dist.get_rank() == 0:
            try:
                tuning = self._tune(args, kwargs, stream, key_text, force)
            except Exception as err:
                _broadcast(dist, {"key": key_text, "error": str(err)})
                raise
            _broadcast(dist, {"key": key_text, "winner": tuning.winner.describe()})
            return tuning
        message = _broadcast(dist, None)
        if message["key"] != key_text:
            raise AutotuneError(f"{self.name}: rank {dist.get_rank()} reached its first call with key "
                                f"[{key_text}], rank 0 with [{message['key']}]; every rank must tune the same key")
        if message.get("error"):
            raise AutotuneError(f"{self.name}: rank 0 could not tune [{key_text}]: {message['error']}")
        winner = next((c for c in self.spec.configs if c.describe() == message["winner"]), None)
        if winner is None:
            raise AutotuneError(f"{self.name}: rank 0 chose {message['winner']}, which is no config on rank "
                                f"{dist.get_rank()}; every rank must declare the same configs")
        return Tuning(self.name, key_text, list(self.spec.configs), [], winner, 0)

    def _tune(self, args: tuple, kwargs: dict, stream: Any, key_text: str, force: bool) -> Tuning:
        """The record protocol: read; on a miss lock, read again, measure what is missing, write."""
        key, parts = self.record_key(key_text)
        configs = list(self.spec.configs)
        known = {} if force else load_record(key)
        trials = 0
        if any(c.describe() not in known for c in configs):
            with disk_cache.lock(key):
                known = {} if force else load_record(key)  # the lock's holder may have just written it
                missing = [c for c in configs if c.describe() not in known]
                if missing:
                    before = self.trials
                    measured = self._measure(missing, args, kwargs, stream)
                    trials = self.trials - before
                    known = {**load_record(key), **measured} if force else {**known, **measured}
                    if any(known[c.describe()].ms is not None for c in configs):
                        store_record(key, parts, known)
        outcomes = [known[c.describe()] for c in configs]
        winner = fastest(configs, known)
        if winner is None:
            reasons = "\n".join(f"  {c.describe()}: {o.error}" for c, o in zip(configs, outcomes))
            raise AutotuneError(f"{self.name}: no config ran for [{key_text}]:\n{reasons}")
        return Tuning(self.name, key_text, configs, outcomes, winner, trials)

    def _candidate(self, config: Config, sig: Any, args: tuple, kwargs: dict) -> Candidate:
        found = self._candidates.get((config.describe(), sig))
        if found is None:
            found = self._candidates[(config.describe(), sig)] = self.bench.prepare(config, args, kwargs)
        return found

    def _measure(self, configs: list[Config], args: tuple, kwargs: dict, stream: Any) -> dict[str, Outcome]:
        """Prepares every config, saves what they write, then times each, restoring after each."""
        sig, _ = self._call_key(args, kwargs)
        outcomes: dict[str, Outcome] = {}
        ready: list[tuple[Config, Candidate]] = []
        for config in configs:
            try:
                ready.append((config, self._candidate(config, sig, args, {**kwargs, **config.params})))
            except Exception as err:  # it does not compile or load: skipped, with the reason
                outcomes[config.describe()] = Outcome(error=failure_reason(err), measured=True)
        saved = [snapshot(value) for value in self._restored(ready, args, kwargs)]
        try:
            for config, candidate in ready:
                self.trials += 1
                outcome = Outcome(kernels=candidate.kernels, measured=True)
                try:
                    outcome.ms = self.bench.measure(candidate, args, {**kwargs, **config.params}, stream)
                except Exception as err:
                    outcome.error = failure_reason(err)
                finally:
                    for copy in saved:
                        copy.restore()
                outcomes[config.describe()] = outcome
        finally:
            for copy in saved:
                copy.free()
        return outcomes

    def _restored(self, ready: list[tuple[Config, Candidate]], args: tuple, kwargs: dict) -> list[Any]:
        """The argument values to put back between trials."""
        names = self.spec.restore
        if names is None:
            names = tuple(sorted({name for _, c in ready for name in c.writes}))
        values = {self.names[i]: v for i, v in self._bound(args, kwargs)}
        return [values[name] for name in names if name in values]


def fastest(configs: list[Config], known: dict[str, Outcome]) -> Config | None:
    """The config with the least time (the first of equals), None when none has one."""
    timed = [(known[c.describe()].ms, i) for i, c in enumerate(configs)
             if c.describe() in known and known[c.describe()].ms is not None]
    return configs[min(timed)[1]] if timed else None


def build_configs(jit_fn: Any, args: tuple, kwargs: dict, target: str) -> list[Config]:
    """What `kdsl build` compiles for one example of an autotuned function: the winner this GPU
    recorded for the example's key (when a GPU of `target` is attached and every config is
    recorded), else every config, so that whichever a run chooses is in the cache."""
    from dsl.runtime import driver

    configs = list(jit_fn.tuning.configs)
    t = tuner(jit_fn)
    key_text = t.key_text(args, kwargs)  # raises TypeError for an example that sets a tuned parameter
    if not driver.available() or driver.current_context().arch != target:
        return configs
    known = load_record(t.record_key(key_text)[0])
    winner = fastest(configs, known) if all(c.describe() in known for c in configs) else None
    return [winner] if winner is not None else configs


# --- what a record is keyed by, and where it is kept ----------------------------------------------

def describe_value(value: Any, *, with_shape: bool) -> str | None:
    """A value as a key shows it: a tensor (or `TensorSpec`) by its dtype and shape (or rank), a
    DSL type by its name, anything else by `repr`; None for a run-time scalar's type."""
    if isinstance(value, TensorSpec):
        dtype, shape, rank = value.dtype, value.shape, value.rank
    else:
        dtype, shape = getattr(value, "dtype", None), getattr(value, "shape", None)
        rank = len(tuple(shape)) if shape is not None else None
    if dtype is not None and rank is not None:
        known = dtype_from_foreign(dtype)
        name = known.name if known is not None else str(dtype)
        if with_shape and shape is not None:
            return f"{name}[{', '.join(str(int(s)) for s in shape)}]"
        return f"{name} rank {rank}"
    if isinstance(value, DType):
        return None
    return repr(value)


def function_digest(jit_fn: Any, spec: AutotuneSpec) -> str:
    """The function's source and its dependencies', as the compile cache hashes them
    (`dependency_digest`), except for the function's own place and the defaults of the tuned
    parameters: a config added on a new line of the decorator (which moves the `def`) or the
    winner written back as the defaults keeps the recorded outcomes."""
    from dsl.compiler.cache import _referenced_names, dependency_digest
    from dsl.frontend.source import closure_vars, function_source, is_user_function
    from dsl.language.decorators import JitFunction, KernelFunction

    fn = jit_fn.fn
    h = hashlib.sha256()
    try:
        node = ast.parse(textwrap.dedent(function_source(fn).text)).body[0]
        assert isinstance(node, ast.FunctionDef)
        args = node.args
        positional = args.posonlyargs + args.args
        for i, arg in enumerate(positional[len(positional) - len(args.defaults):]):
            if arg.arg in spec.tuned:
                args.defaults[i] = ast.Constant("tuned")
        for i, arg in enumerate(args.kwonlyargs):
            if arg.arg in spec.tuned and args.kw_defaults[i] is not None:
                args.kw_defaults[i] = ast.Constant("tuned")
        h.update(ast.unparse(node).encode())
    except (OSError, SyntaxError, AssertionError):
        h.update(fn.__code__.co_code)
    closure = closure_vars(fn)
    for name in sorted(_referenced_names(fn.__code__)):
        value = closure.get(name, fn.__globals__.get(name, _MISSING))
        if isinstance(value, KernelFunction):
            h.update(f"{name}=kernel:{value.options_key()!r}:{dependency_digest(value.fn)}".encode())
        elif isinstance(value, JitFunction):
            h.update(f"{name}=jit:{dependency_digest(value.fn)}".encode())
        elif isinstance(value, type(fn)) and is_user_function(value):
            h.update(f"{name}=fn:{dependency_digest(value)}".encode())
        elif isinstance(value, int | float | bool | str | bytes | type(None)):
            h.update(f"{name}={value!r}".encode())
    return h.hexdigest()


_MISSING = object()


@functools.cache
def kdsl_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("kdsl")
    except metadata.PackageNotFoundError:
        return "unknown"


RECORDS = "autotune"  # the records' kind in the kernel cache (its subfolder)


def load_record(key: str) -> dict[str, Outcome]:
    """The outcomes recorded for `key` (config -> outcome); empty when none are."""
    data = disk_cache.load_blob(RECORDS, key)
    if data is None:
        return {}
    try:
        record = json.loads(data)
        if record.get("parts", {}).get("format") != RECORD_FORMAT:
            return {}
        return {config: Outcome.from_json(o) for config, o in record["outcomes"].items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        return {}


def store_record(key: str, parts: dict[str, str], outcomes: dict[str, Outcome]) -> bool:
    """Writes a record into the kernel cache (a sealed blob: digest-checked, renamed into place)."""
    payload = {"parts": parts, "outcomes": {c: o.to_json() for c, o in outcomes.items()}}
    return disk_cache.store_blob(RECORDS, key, json.dumps(payload).encode())


# --- helpers -------------------------------------------------------------------------------------

def failure_reason(err: BaseException) -> str:
    """One line saying why a config failed: its compile errors, or the exception."""
    diagnostics = getattr(err, "diagnostics", None)
    if diagnostics:
        errors = [d for d in diagnostics if d.is_error] or list(diagnostics)
        return "; ".join(f"{d.code} {d.message}" for d in errors)
    return " ".join(f"{type(err).__name__}: {err}".split())


def _hashable(value: Any) -> Any:
    try:
        hash(value)
        return (type(value), value)
    except TypeError:
        return (type(value), repr(value))


def _distributed() -> Any:
    """`torch.distributed` when torch is imported and it runs more than one rank, else None."""
    torch = sys.modules.get("torch")
    dist = getattr(torch, "distributed", None) if torch is not None else None
    try:
        if dist is not None and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            return dist
    except (RuntimeError, AttributeError):
        pass
    return None


def _broadcast(dist: Any, message: dict[str, Any] | None) -> dict[str, Any]:
    box = [message]
    dist.broadcast_object_list(box, src=0)
    return box[0]  # type: ignore[return-value]


_TUNERS_LOCK = threading.Lock()


def tuner(jit_fn: Any, bench: Bench | None = None) -> Tuner:
    """The function's tuner, made on first use; `bench` replaces the GPU's (CPU tests)."""
    found = getattr(jit_fn, "_kdsl_tuner", None)
    if found is not None and (bench is None or found.bench is bench):
        return found
    with _TUNERS_LOCK:
        found = getattr(jit_fn, "_kdsl_tuner", None)
        if found is None or (bench is not None and found.bench is not bench):
            found = jit_fn._kdsl_tuner = Tuner(jit_fn, bench)
        return found


def call(jit_fn: Any, args: tuple, kwargs: dict) -> Any:
    """A call of an autotuned jit function (`JitFunction._call_slow`); in the interpreter, its
    first config (tuning measures GPU time), as `dsl.interpret(fn, ...)` runs it."""
    from dsl.interpreter.mode import interpreting

    if interpreting():
        from dsl.interpreter import interpret

        return interpret(jit_fn, *args, **kwargs)
    return tuner(jit_fn)(args, kwargs)
