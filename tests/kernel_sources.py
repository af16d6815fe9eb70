"""Kernel sources that several suites compile (the compiler's, lint's, the editor's): one
text each, so every suite checks the same kernel."""

from __future__ import annotations


def spilling_kernel(name: str) -> str:
    """A kernel that keeps 160 loaded values live at 1024 threads a block: ptxas must spill
    (DSL501 at its `def`). Needs `import dsl` and `from dsl import Tensor, f32` above it."""
    return f"""
@dsl.kernel(known_block_size=[1024, 1, 1])
def {name}(x: Tensor[f32]):
    vals = ()
    for j in dsl.static_range(160):
        vals = vals + (x[j * 1024 + dsl.thread_idx.x],)
    acc = 0.0
    for j in dsl.static_range(160):
        acc = acc + vals[j] * vals[159 - j]
    x[0] = acc
"""
