"""Issue 28 on the GPU (marked gpu): the fused bias + exact-GELU Hopper GEMM against torch, with
libdevice's erf called from one body (`benchmarks/kernels/gemm_hopper_gelu.py`); and the
early-exit examples' vectors against torch."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "benchmarks" / "kernels" / "gemm_hopper_gelu.py"


def _fused():
    spec = importlib.util.spec_from_file_location("kdsl_gemm_hopper_gelu", FIXTURE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # examples/ is on sys.path (tests/runtime/conftest.py)
    return module


@pytest.mark.parametrize(("shape", "bn"), [((256, 512, 192), 256), ((200, 256, 64), 256), ((16, 512, 640), 128),
                                           ((2048, 4096, 128), 256)])
def test_fused_gelu_gemm_matches_torch(torch, shape, bn):
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs a Hopper GPU (sm_90a)")
    M, N, K = shape
    a = torch.randn(M, K, device="cuda").bfloat16()
    b_t = torch.randn(N, K, device="cuda").bfloat16()
    bias = torch.randn(N, device="cuda").bfloat16()
    c = torch.full((M, N), 3.0, device="cuda", dtype=torch.bfloat16)
    _fused().gemm_hopper_gelu(a, b_t, bias, c, bn)
    expected = torch.nn.functional.gelu(a.float() @ b_t.float().T + bias.float())
    torch.testing.assert_close(c.float(), expected, rtol=1e-2, atol=5e-2)


def test_rmsnorm_rows_example_matches_torch(torch):
    from rmsnorm_rows import run_rmsnorm

    x = torch.randn(1027, 2048, device="cuda", dtype=torch.float16)  # the last block's fourth warp returns
    w = torch.randn(2048, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    run_rmsnorm(x, w, y)
    expected = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
    torch.testing.assert_close(y.float(), expected, rtol=1e-2, atol=1e-2)
