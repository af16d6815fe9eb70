"""A run-time launch block is checked against `known_block_size` before launching (no GPU)."""

from __future__ import annotations

import textwrap

import pytest

import dsl
from dsl.runtime.driver import LaunchError
from dsl.runtime.launch import Runtime
from dsl.runtime.module import ModuleImage


def test_dynamic_block_is_checked_against_the_contract(tmp_path):
    source = textwrap.dedent("""
        import dsl
        from dsl import Tensor, f32

        @dsl.kernel(known_block_size=[256, 1, 1])
        def k(x: Tensor[f32]):
            x[dsl.thread_idx.x] = 1.0

        @dsl.jit
        def run(x: Tensor[f32]):
            k(x).launch(grid=1, block=x.shape[0])
    """).lstrip()
    path = tmp_path / "contract.py"
    path.write_text(source)
    report = dsl.analyze_source(source, str(path))
    compiled = report.function("run").compiled
    assert "rt.check_block('k', (1, 1, 1), (x_shape[0], 1, 1), (256, 1, 1))" in compiled.launcher
    launch_range = compiled.launches[0].range
    rt = Runtime(ModuleImage(compiled.cubin, compiled.ptx), {"k": launch_range}, "run")
    rt.check_block("k", (1, 1, 1), (256, 1, 1), (256, 1, 1))  # the contract holds: nothing to say
    with pytest.raises(LaunchError) as info:
        rt.check_block("k", (1, 1, 1), (128, 1, 1), (256, 1, 1))
    d = info.value.diagnostic
    assert d.code == "DSL202" and d.range == launch_range
    assert "launch block x=128 differs from known_block_size x=256 declared on kernel 'k'." in d.message
