"""The control-flow property test on the GPU, and the language examples against torch (marked gpu).

The random bodies of `tests/compiler/test_control_flow_oracle.py` (exits under run-time `if`s in
nested loops, a per-thread list) are compiled for the GPU and launched; each thread's results
must equal plain Python's for the same body.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.compiler.test_control_flow_oracle import SLOTS, THREADS, block, kernel_source, make_inputs, python_oracle
from tests.runtime.test_gpu import module_from

pytestmark = pytest.mark.gpu

LAUNCHER = f"""

@dsl.jit
def run(x: Tensor[i32, 2], out: Tensor[i32, 2], n: Int32):
    k(x, out, n).launch(grid=1, block={THREADS})
"""

counter = itertools.count()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(block(0, (), False, itertools.count()), st.integers(0, 2**16))
def test_random_exits_match_python_on_the_gpu(torch, tmp_path, lines, seed):
    source = kernel_source(lines) + LAUNCHER
    x, n = make_inputs(seed)
    expected = python_oracle(kernel_source(lines), x, n)
    mod = module_from(tmp_path, f"gpu_exits_{next(counter)}", source)
    xs = torch.from_numpy(x).cuda()
    out = torch.zeros((THREADS, SLOTS), dtype=torch.int32, device="cuda")
    mod.run(xs, out, n)
    torch.cuda.synchronize()
    assert np.array_equal(out.cpu().numpy(), expected), (source, x, n)


def test_linear_search_example(torch):
    from examples.linear_search import run_first_above

    x = torch.rand(10_000, 64, device="cuda")
    out = torch.full((10_000,), 123, dtype=torch.int32, device="cuda")
    run_first_above(x, out, 0.97)
    above = x > 0.97
    ref = torch.where(above.any(dim=1), above.int().argmax(dim=1), torch.tensor(-1, device="cuda"))
    assert torch.equal(out, ref.int())


@pytest.mark.parametrize("shape", [(64, 64, 8), (1000, 700, 333), (2048, 2048, 2048)])
def test_register_tiled_matmul_example(torch, shape):
    from examples.matmul_tiled import run_matmul_tiled

    M, N, K = shape
    a = torch.randn(M, K, device="cuda")
    b = torch.randn(K, N, device="cuda")
    c = torch.full((M, N), float("nan"), device="cuda")
    run_matmul_tiled(a, b, c)
    ref = a.double() @ b.double()
    assert float((c.double() - ref).norm() / ref.norm()) < 1e-5
