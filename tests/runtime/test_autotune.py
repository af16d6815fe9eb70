"""Autotuning's selection, pruning, persistence and restore, on the CPU.

The tuner is the real one (`dsl.runtime.autotune.Tuner`, records in the test's own kernel
cache); only the bench is a CPU one (`PythonBench`): each config "launches" a Python function
that doubles `x[:n]` in place, and an injected timer gives each config its time. Each test
writes its module (`MODULE`) to a file, as a user's program is, and imports it.
"""

from __future__ import annotations

import importlib.util
import itertools
import linecache

import numpy as np
import pytest

import dsl
from dsl import Constexpr, Int32, Tensor, f32
from dsl.language.decorators import hint_overrides
from dsl.runtime import driver
from dsl.runtime.autotune import AutotuneError, Tuner, load_record, tuner
from dsl.runtime.autotune_bench import PythonBench

MODULE = '''\
import dsl
from dsl import Constexpr, Int32, Tensor, f32


@dsl.kernel
def scale(x: Tensor[f32], n: Int32, BLOCK: Constexpr[int]):
    i = dsl.block_idx.x * BLOCK + dsl.thread_idx.x
    if i < n:
        x[i] = x[i] * {factor}


@dsl.autotune({configs}, key={key}{extra})
@dsl.jit
def run_scale(x: Tensor[f32], n: Int32, BLOCK: Constexpr[int] = {default}):
    scale(x, n, BLOCK).launch(grid=dsl.cdiv(n, BLOCK), block=BLOCK)
'''
THREE = "configs=[dsl.Config(BLOCK=64), dsl.Config(BLOCK=128), dsl.Config(BLOCK=256)]"
TIMES = {"BLOCK=32": 0.5, "BLOCK=64": 3.0, "BLOCK=128": 1.0, "BLOCK=256": 2.0}
_names = itertools.count()


def write_module(path, configs=THREE, key='["n"]', extra="", default=32, factor="2.0"):
    """Writes `MODULE` to `path` and imports it afresh (as a new run of the program would)."""
    path.write_text(MODULE.format(configs=configs, key=key, extra=extra, default=default, factor=factor))
    linecache.checkcache(str(path))
    spec = importlib.util.spec_from_file_location(f"autotuned_{next(_names)}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Doubler:
    """The Python stand-in for the kernels: doubles `x[:n]` in place, remembering each call."""

    def __init__(self):
        self.calls = []

    def __call__(self, config, x, n, BLOCK):
        self.calls.append(config.describe())
        x[:n] *= 2.0


def bench(launch, **options):
    options.setdefault("writes", ("x",))
    return PythonBench(launch, timer=lambda config: TIMES[config.describe()], **options)


@pytest.fixture
def module(tmp_path):
    return write_module(tmp_path / "program.py")


def test_the_first_call_runs_every_config_once_then_the_fastest(module):
    launch = Doubler()
    t = tuner(module.run_scale, bench(launch))
    x = np.arange(8, dtype=np.float32)
    module.run_scale(x, 8)
    assert launch.calls == ["BLOCK=64", "BLOCK=128", "BLOCK=256", "BLOCK=128"]
    assert t.trials == 3
    assert x.tolist() == [2.0 * i for i in range(8)]  # the trials' doublings were undone


def test_later_calls_with_the_same_key_run_no_trial(module):
    launch = Doubler()
    t = tuner(module.run_scale, bench(launch))
    x = np.ones(8, dtype=np.float32)
    module.run_scale(x, 8)
    module.run_scale(x, 8)
    module.run_scale(np.ones(8, dtype=np.float32), 8)  # other arrays, same key
    assert launch.calls[3:] == ["BLOCK=128", "BLOCK=128", "BLOCK=128"]
    assert t.trials == 3


def test_a_new_key_value_is_tuned_on_its_own(module):
    launch = Doubler()
    times = {8: {"BLOCK=64": 3.0, "BLOCK=128": 1.0, "BLOCK=256": 2.0},
             16: {"BLOCK=64": 0.5, "BLOCK=128": 1.0, "BLOCK=256": 2.0}}
    seen = []

    def launch_n(config, x, n, BLOCK):
        seen.append(n)
        launch(config, x, n, BLOCK)

    t = tuner(module.run_scale, PythonBench(launch_n, writes=("x",), timer=lambda c: times[seen[-1]][c.describe()]))
    x = np.ones(16, dtype=np.float32)
    module.run_scale(x, 8)
    module.run_scale(x, 16)
    module.run_scale(x, 8)
    assert t.trials == 6
    assert launch.calls == ["BLOCK=64", "BLOCK=128", "BLOCK=256", "BLOCK=128",
                            "BLOCK=64", "BLOCK=128", "BLOCK=256", "BLOCK=64", "BLOCK=128"]
    assert x.tolist() == [8.0] * 8 + [2.0] * 8


def test_a_config_that_fails_is_skipped_with_its_reason(tmp_path):
    module = write_module(tmp_path / "program.py", configs="configs=[dsl.Config(BLOCK=32), dsl.Config(BLOCK=64), "
                          "dsl.Config(BLOCK=128), dsl.Config(BLOCK=2048)]")

    def check(config):  # what a compile error is to the GPU bench
        if config.params["BLOCK"] == 2048:
            raise ValueError("DSL203 block (2048, 1, 1) exceeds 1024 threads")

    def launch(config, x, n, BLOCK):
        if BLOCK == 32:
            raise RuntimeError("too many resources requested for launch")
        x[:n] *= 2.0

    t = tuner(module.run_scale, bench(launch, check=check))
    tuning = t.tune((np.ones(8, dtype=np.float32), 8), {})
    assert [(o.ms, o.error) for o in tuning.outcomes] == [
        (None, "RuntimeError: too many resources requested for launch"),
        (3.0, None),
        (1.0, None),
        (None, "ValueError: DSL203 block (2048, 1, 1) exceeds 1024 threads"),
    ]
    assert tuning.winner == dsl.Config(BLOCK=128)
    assert t.trials == 3  # the config that did not "compile" never ran


def test_when_every_config_fails_the_error_gives_each_reason_and_nothing_is_recorded(module):
    def launch(config, x, n, BLOCK):
        raise RuntimeError(f"no launch with BLOCK={BLOCK}")

    t = tuner(module.run_scale, bench(launch))
    args = (np.ones(8, dtype=np.float32), 8)
    with pytest.raises(AutotuneError) as failure:
        module.run_scale(*args)
    assert str(failure.value) == (
        "run_scale: no config ran for [x=f32 rank 1; n=8]:\n"
        "  BLOCK=64: RuntimeError: no launch with BLOCK=64\n"
        "  BLOCK=128: RuntimeError: no launch with BLOCK=128\n"
        "  BLOCK=256: RuntimeError: no launch with BLOCK=256")
    assert load_record(t.record_key(t.key_text(args, {}))[0]) == {}
    with pytest.raises(AutotuneError):
        module.run_scale(*args)
    assert t.trials == 6  # not recorded, so tried again


def test_the_choice_persists_for_a_new_tuner(module):
    Tuner(module.run_scale, bench(Doubler())).tune((np.ones(8, dtype=np.float32), 8), {})
    launch = Doubler()
    fresh = Tuner(module.run_scale, bench(launch))  # what a new process makes
    x = np.ones(8, dtype=np.float32)
    fresh((x, 8), {})
    assert (fresh.trials, launch.calls, x.tolist()) == (0, ["BLOCK=128"], [2.0] * 8)


def test_adding_a_config_measures_only_it(tmp_path):
    path = tmp_path / "program.py"
    first = write_module(path)
    assert Tuner(first.run_scale, bench(Doubler())).tune((np.ones(8, dtype=np.float32), 8), {}).trials == 3
    # the decorator grows by a line (the `def` moves down), with a faster config
    grown = write_module(path, configs="configs=[dsl.Config(BLOCK=64), dsl.Config(BLOCK=128),\n"
                         "                       dsl.Config(BLOCK=256), dsl.Config(BLOCK=32)]")
    launch = Doubler()
    tuning = Tuner(grown.run_scale, bench(launch)).tune((np.ones(8, dtype=np.float32), 8), {})
    assert (tuning.trials, launch.calls, tuning.winner) == (1, ["BLOCK=32"], dsl.Config(BLOCK=32))
    assert [o.measured for o in tuning.outcomes] == [False, False, False, True]


def test_the_winner_written_back_as_default_keeps_the_record_and_a_source_change_does_not(tmp_path):
    path = tmp_path / "program.py"
    Tuner(write_module(path).run_scale, bench(Doubler())).tune((np.ones(8, dtype=np.float32), 8), {})
    defaults = write_module(path, default=128)
    assert Tuner(defaults.run_scale, bench(Doubler())).tune((np.ones(8, dtype=np.float32), 8), {}).trials == 0
    edited = write_module(path, default=128, factor="3.0")  # the kernel changed: timings are stale
    assert Tuner(edited.run_scale, bench(Doubler())).tune((np.ones(8, dtype=np.float32), 8), {}).trials == 3


def test_restore_none_puts_back_what_the_kernels_write_and_restore_empty_nothing(tmp_path):
    x = np.ones(4, dtype=np.float32)
    module = write_module(tmp_path / "b.py", extra=", restore=[]")
    tuner(module.run_scale, bench(Doubler()))
    module.run_scale(x, 4)
    assert x.tolist() == [16.0] * 4  # three trials and the call each doubled it
    named = write_module(tmp_path / "c.py", extra=', restore=["x"]')
    tuner(named.run_scale, bench(Doubler(), writes=()))  # the bench reports no writes: restore= names it
    y = np.ones(4, dtype=np.float32)
    named.run_scale(y, 4)
    assert y.tolist() == [2.0] * 4


def test_a_strided_view_is_restored_over_its_span_only():
    from dsl.runtime.autotune_bench import snapshot

    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    view = base[:, 1]
    saved = snapshot(view)
    base[:] = -1.0
    saved.restore()
    saved.free()
    assert base.tolist() == [[-1, 1, 2, 3], [4, 5, 6, 7], [8, 9, -1, -1]]


def test_a_spec_and_an_array_of_one_shape_have_one_key(tmp_path):
    module = write_module(tmp_path / "program.py", key='["x"]')
    t = Tuner(module.run_scale, bench(Doubler()))
    assert t.key_text((dsl.TensorSpec(f32, shape=(8,)), 8), {}) == "x=f32[8]"
    assert t.key_text((np.ones(8, dtype=np.float32), 8), {}) == "x=f32[8]"
    assert t.key_text((np.ones(8, dtype=np.float64), 8), {}) == "x=f64[8]"


# --- bad declarations are errors that name what is wrong ------------------------------------------

@dsl.kernel
def _double(x: Tensor[f32], n: Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    if i < n:
        x[i] = x[i] * 2.0


def _run_double(x: Tensor[f32], n: Int32, BLOCK: Constexpr[int] = 128):
    _double(x, n).launch(grid=dsl.cdiv(n, BLOCK), block=BLOCK)


@pytest.mark.parametrize(("declaration", "error", "message"), [
    (dict(configs=[dsl.Config(BLOCKK=64)]), TypeError,
     "@dsl.autotune on '_run_double': Config(BLOCKK=...) names no parameter of '_run_double' "
     "(its parameters: x, n, BLOCK)"),
    (dict(configs=[dsl.Config(n=64)]), TypeError,
     "@dsl.autotune on '_run_double': Config(n=...) sets a run-time parameter; a Config sets Constexpr "
     "parameters (annotate 'n' with dsl.Constexpr[...])"),
    (dict(configs=[dsl.Config(BLOCK=64)], key=["m"]), TypeError,
     "@dsl.autotune on '_run_double': key=['m'] names 'm', which is no parameter of '_run_double' "
     "(its parameters: x, n, BLOCK)"),
    (dict(configs=[dsl.Config(BLOCK=64)], key="n"), TypeError,
     "@dsl.autotune on '_run_double': key= takes a list of parameter names, not 'n'"),
    (dict(configs=[dsl.Config(BLOCK=64)], key=["BLOCK"]), TypeError,
     "@dsl.autotune on '_run_double': 'BLOCK' is both tuned and in key="),
    (dict(configs=[dsl.Config(BLOCK=64)], restore=["n"]), TypeError,
     "@dsl.autotune on '_run_double': restore= names 'n', a scalar; it takes tensors"),
    (dict(configs=[dsl.Config(BLOCK=64), dsl.Config(BLOCK=64)]), ValueError,
     "@dsl.autotune on '_run_double': configs[0] and configs[1] are the same (BLOCK=64)"),
    (dict(configs=[]), TypeError, "@dsl.autotune on '_run_double' needs a non-empty list of dsl.Config, got ()"),
])
def test_a_bad_declaration_is_an_error_that_names_it(declaration, error, message):
    with pytest.raises(error) as failure:
        dsl.autotune(**declaration)(dsl.jit(_run_double))
    assert str(failure.value) == message


def test_autotune_needs_a_jit_function():
    with pytest.raises(TypeError, match=r"^@dsl.autotune goes above @dsl.jit, on a jit function, not on "
                                        r"<dsl.kernel _double>$"):
        dsl.autotune(configs=[dsl.Config(BLOCK=64)])(_double)


def test_a_call_passing_a_tuned_parameter_is_refused(module):
    tuner(module.run_scale, bench(Doubler()))
    with pytest.raises(TypeError) as failure:
        module.run_scale(np.ones(8, dtype=np.float32), 8, BLOCK=64)
    assert str(failure.value) == "run_scale is autotuned over 'BLOCK': leave it out of the call (each config sets it)"


# --- a config's hints reach the compiler --------------------------------------------------------

def test_hint_overrides_reach_the_ptx_and_the_cache_key():
    jit = dsl.jit(_run_double)
    with hint_overrides({"maxnreg": 40}):
        capped = dsl.compile(jit)
    free = dsl.compile(jit)  # compiled after: the cache must not hand back the capped build
    assert [line.strip() for line in capped.ptx.splitlines() if ".maxnreg" in line] == [".maxnreg 40"]
    assert [line for line in free.ptx.splitlines() if ".maxnreg" in line] == []
    assert _double.hints["maxnreg"] is None


def test_kdsl_build_without_a_gpu_builds_every_config(tmp_path, capsys):
    from dsl.cli_build import main

    path = tmp_path / "program.py"
    write_module(path, configs="configs=[dsl.Config(BLOCK=64), dsl.Config(BLOCK=128, maxnreg=32)]")
    assert main([str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    lines = [line.split(": ", 1)[1] for line in out if line.startswith(str(path))]
    assert lines == [
        "run_scale(x: Tensor[f32, 1], n: i32, BLOCK=64) [BLOCK=64] for sm_90: built",
        "run_scale(x: Tensor[f32, 1], n: i32, BLOCK=128) [BLOCK=128, maxnreg=32] for sm_90: built",
    ]


def test_the_table_shows_each_config_with_the_winner_marked(tmp_path):
    from dsl.runtime.tune import format_table, tuning_rows

    module = write_module(tmp_path / "program.py", configs="configs=[dsl.Config(BLOCK=64), "
                          "dsl.Config(BLOCK=128, maxnreg=32), dsl.Config(BLOCK=2048)]",
                          extra=", flops=lambda x, n: 2 * n")

    def check(config):
        if config.params["BLOCK"] == 2048:
            raise ValueError("DSL203 block (2048, 1, 1) exceeds 1024 threads")

    times = {"BLOCK=64": 0.5, "BLOCK=128, maxnreg=32": 0.25}
    t = tuner(module.run_scale, PythonBench(Doubler(), writes=("x",), timer=lambda c: times[c.describe()],
                                            check=check))
    x = np.ones(1 << 20, dtype=np.float32)
    rows = tuning_rows(module.run_scale, t.tune((x, 1 << 20), {}), [x, 1 << 20])
    assert (rows["winner"], rows["params"], rows["hints"], rows["trials"]) == (
        "BLOCK=128, maxnreg=32", {"BLOCK": 128}, {"maxnreg": 32}, 2)
    assert format_table(rows).splitlines() == [
        "key: x=f32 rank 1; n=1048576",
        "   config                 time      GB/s   TFLOP/s   regs  spills  smem  occupancy  note",
        "   BLOCK=64               500.0 us  8.389  0.004194  -     -       -     -          measured",
        "*  BLOCK=128, maxnreg=32  250.0 us  16.78  0.008389  -     -       -     -          measured",
        "   BLOCK=2048             -         -      -         -     -       -     -          "
        "ValueError: DSL203 block (2048, 1, 1) exceeds 1024 threads",
    ]


def test_kdsl_build_refuses_an_example_that_sets_a_tuned_parameter(tmp_path, capsys):
    from dsl.cli_build import main

    path = tmp_path / "program.py"
    source = MODULE.format(configs=THREE, key='["n"]', extra="", default=32, factor="2.0")
    example = "@dsl.jit(examples=[(dsl.TensorSpec(dsl.f32, shape=(8,)), dsl.i32, 64)])\n"
    path.write_text(source.replace("@dsl.jit\n", example))
    assert main([str(path)]) == 1
    assert capsys.readouterr().err.splitlines() == [  # line 12: the function's first decorator
        f"{path}:12: run_scale: run_scale is autotuned over 'BLOCK': leave it out of the call (each config sets it)"]


@pytest.mark.skipif(driver.available(), reason="a GPU is present")
def test_kdsl_tune_without_a_gpu_says_so_and_runs_nothing(tmp_path, capsys):
    from dsl.cli_tune import main

    marker = tmp_path / "ran"
    path = tmp_path / "program.py"
    path.write_text(f"open({str(marker)!r}, 'w').close()\n"
                    + MODULE.format(configs=THREE, key='["n"]', extra="", default=32, factor="2.0"))
    assert main([f"{path}::run_scale"]) == 2
    assert capsys.readouterr().err.startswith("kdsl tune: no NVIDIA GPU driver found (")
    assert not marker.exists()
