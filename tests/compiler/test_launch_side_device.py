"""`dsl.sm_count()` and `dsl.device_attribute(name)`: read by the launcher from the device
it launches on (once per context), a declared call in the IR, the target's figure where
no GPU is present."""

from __future__ import annotations

import pytest

import dsl
from dsl.diagnostics import SourceRange
from dsl.language import device
from dsl.runtime import driver, launch
from dsl.runtime.launch import Runtime
from dsl.runtime.module import ModuleImage
from tests.compiler.test_launch_side_asserts import bind

PERSISTENT = """
import dsl
from dsl import Tensor, f32

@dsl.kernel
def bump(x: Tensor[f32]):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    while i < x.shape[0]:
        x[i] = x[i] + 1.0
        i = i + dsl.grid_dim.x * dsl.block_dim.x

@dsl.jit
def run(x: Tensor[f32]):
    tiles = dsl.cdiv(x.shape[0], 256)
    bump(x).launch(grid=min(dsl.sm_count() * 2, tiles), block=256,
                   smem=dsl.device_attribute("warp_size") * 0)
"""


def test_a_persistent_grid_reads_the_sm_count_at_run_time(analyse):
    a = analyse(PERSISTENT)
    assert a.diagnostics == []
    launcher = a.stage("run", "launcher")
    assert ("_launch_bump((min((rt.device_attribute('multiprocessor_count') * 2), (-(-x_shape[0] // 256))), 1, 1), "
            "(256, 1, 1), (rt.device_attribute('warp_size') * 0), stream, x_ptr, x_shape[0])") in launcher
    launch_fn, rt = bind(launcher.replace("'warp_size'", "'multiprocessor_count'"))
    launch_fn((100_000,))
    launch_fn((1000,))
    assert rt.launches == [("bump", (264, 1, 1), (256, 1, 1), 0), ("bump", (4, 1, 1), (256, 1, 1), 0)]


def test_the_ir_calls_a_declared_function_for_each_attribute(analyse):
    traced = analyse(PERSISTENT).stage("run", "traced")
    lines = [line.strip() for line in traced.splitlines()]
    assert [line for line in lines if line.startswith("func.func private")] == [
        "func.func private @kdsl_device_attribute_multiprocessor_count() -> i32",
        "func.func private @kdsl_device_attribute_warp_size() -> i32",
    ]
    assert sum("= call @kdsl_device_attribute_" in line for line in lines) == 2


def test_an_unknown_attribute_is_dsl301_at_the_call(analyse):
    a = analyse(PERSISTENT.replace('"warp_size"', '"warps"'))
    d = next(d for d in a.diagnostics if d.code == "DSL301")
    line = a.line_of('"warps"')
    text = a.source.splitlines()[line - 1]
    col = text.index("dsl.device_attribute")
    assert d.range == SourceRange(a.path, line, col, line, text.index(" * 0"))
    assert d.message.startswith("unknown device attribute 'warps'; known: compute_capability_major, ")


def test_a_kernel_cannot_read_device_attributes(analyse):
    a = analyse("""
import dsl
from dsl import Tensor, f32

@dsl.kernel
def k(x: Tensor[f32]):
    x[0] = dsl.cast(dsl.sm_count(), f32)

@dsl.jit
def run(x: Tensor[f32]):
    k(x).launch(grid=1, block=1)
""")
    d = next(d for d in a.diagnostics if d.code == "DSL302")
    line = a.line_of("dsl.sm_count()")
    col = a.source.splitlines()[line - 1].index("dsl.sm_count()")
    assert d.range == SourceRange(a.path, line, col, line, col + len("dsl.sm_count()"))
    assert d.message == ("dsl.sm_count() is read by the launcher: call it in the @jit function and pass the value "
                         "to the kernel (or use dsl.grid_dim)")


def test_plain_python_without_a_gpu_answers_with_the_target(monkeypatch):
    monkeypatch.setattr(driver, "available", lambda: False)
    assert dsl.sm_count() == 132
    assert dsl.device_attribute("max_shared_memory_per_block_optin") == 227 * 1024
    assert device.target_value("multiprocessor_count", "sm_80") == 108
    assert device.target_value("max_threads_per_multiprocessor", "sm_86") == 1536
    with pytest.raises(ValueError, match="unknown device attribute 'sms'"):
        dsl.device_attribute("sms")


def test_the_runtime_reads_an_attribute_once_per_context(monkeypatch):
    class Ctx:
        key, device = 7, 0

    reads = []
    monkeypatch.setattr(launch, "_context", lambda device: Ctx)
    monkeypatch.setattr(driver, "device_attribute", lambda ctx, name: reads.append(name) or 132)
    rt = Runtime(ModuleImage(None, None))
    assert [rt.device_attribute("multiprocessor_count") for _ in range(3)] == [132, 132, 132]
    assert reads == ["multiprocessor_count"]
