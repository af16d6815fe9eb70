"""Examples run on the GPU and match PyTorch; launch and argument errors (marked gpu)."""

import importlib
import os
import subprocess
import sys

import pytest

from dsl.runtime import ArgumentError, LaunchError

pytestmark = pytest.mark.gpu


@pytest.fixture
def torch(gpu):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    torch.manual_seed(0)
    return torch


def import_from(folder, name):
    """Imports the module `name` written into `folder` by a test."""
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(folder))


def _rel(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


@pytest.mark.parametrize("n", [1, 1000, 1 << 20, (1 << 20) + 3])
def test_vector_add(torch, n):
    from examples.vector_add import add

    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.full_like(a, float("nan"))
    add(a, b, c)
    torch.cuda.synchronize()
    assert torch.equal(c, a + b)


def test_saxpy(torch):
    from examples.saxpy import run_saxpy

    x, y = torch.randn(100_003, device="cuda"), torch.randn(100_003, device="cuda")
    expected = 2.5 * x + y
    run_saxpy(x, y, 2.5)
    torch.cuda.synchronize()
    assert _rel(y, expected) < 1e-6


@pytest.mark.parametrize("shape", [(7, 1024), (512, 4096)])
def test_row_sum(torch, shape):
    from examples.row_sum import run_row_sum

    x = torch.randn(*shape, device="cuda")
    out = torch.full((shape[0],), float("nan"), device="cuda")
    run_row_sum(x, out)
    torch.cuda.synchronize()
    assert _rel(out, x.double().sum(1)) < 1e-5


@pytest.mark.parametrize("shape", [(3, 1024), (256, 4096)])
def test_softmax(torch, shape):
    from examples.softmax import run_softmax

    x = torch.randn(*shape, device="cuda") * 4
    y = torch.full_like(x, float("nan"))
    run_softmax(x, y)
    torch.cuda.synchronize()
    assert _rel(y, torch.softmax(x.double(), -1)) < 1e-5


def test_layernorm(torch):
    from examples.layernorm import run_layernorm

    x = torch.randn(256, 4096, device="cuda") + 3
    w, b = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    y = torch.full_like(x, float("nan"))
    run_layernorm(x, w, b, y, 1e-5)
    torch.cuda.synchronize()
    ref = torch.nn.functional.layer_norm(x.double(), (4096,), w.double(), b.double(), 1e-5)
    assert _rel(y, ref) < 1e-4


@pytest.mark.parametrize("shape", [(64, 96), (1000, 333), (4096, 4096)])
def test_transpose(torch, shape):
    from examples.transpose import run_transpose

    x = torch.randn(*shape, device="cuda")
    out = torch.full((shape[1], shape[0]), float("nan"), device="cuda")
    run_transpose(x, out)
    torch.cuda.synchronize()
    assert torch.equal(out, x.t())


def test_explicit_and_current_streams(torch):
    from examples.vector_add import add

    a, b = torch.randn(1 << 16, device="cuda"), torch.randn(1 << 16, device="cuda")
    c = torch.empty_like(a)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        add(a, b, c)  # goes on torch's current stream, s
    s.synchronize()
    assert torch.equal(c, a + b)
    c.zero_()
    add(a, b, c, stream=s)
    s.synchronize()
    assert torch.equal(c, a + b)


def test_cupy_arrays(gpu):
    cp = pytest.importorskip("cupy")
    from examples.vector_add import add

    a, b = cp.random.randn(4099, dtype=cp.float32), cp.random.randn(4099, dtype=cp.float32)
    c = cp.empty_like(a)
    add(a, b, c)
    cp.cuda.Device().synchronize()
    assert bool((c == a + b).all())


def test_host_array_rejected(torch):
    from examples.vector_add import add

    a = torch.randn(16, device="cuda")
    with pytest.raises(ArgumentError, match="argument 'b' is a CPU tensor"):
        add(a, torch.randn(16), a)


def test_dtype_differing_from_specialization(torch):
    from examples.saxpy import run_saxpy

    x = torch.randn(16, device="cuda")
    run_saxpy(x, x.clone(), 1.0)
    spec = run_saxpy._kdsl_state.specs
    launcher = next(iter(spec.values())).launch
    rt = next(iter(spec.values())).rt
    with pytest.raises(ArgumentError, match="element type f16"):
        launcher(rt, x.half(), x, 1.0)


def test_each_call_runs_its_own_specialization(torch, tmp_path):
    """Constexpr passed, then defaulted, then another dtype: every call runs the right code."""
    src = tmp_path / "specs_mod.py"
    src.write_text(
        "import dsl\nfrom dsl import Tensor, Constexpr, f32, f16\n\n"
        "@dsl.kernel\n"
        "def fill(x: Tensor[f32], S: Constexpr[int]):\n"
        "    x[dsl.thread_idx.x] = dsl.cast(S, f32)\n\n"
        "@dsl.kernel\n"
        "def fill16(x: Tensor[f16], S: Constexpr[int]):\n"
        "    x[dsl.thread_idx.x] = dsl.cast(S, f16)\n\n"
        "@dsl.jit\n"
        "def run(x: Tensor[f32], S: Constexpr[int] = 3):\n"
        "    if dsl.const_expr(x.dtype == f32):\n"
        "        fill(x, S).launch(grid=1, block=32)\n"
        "    else:\n"
        "        fill16(x, S).launch(grid=1, block=32)\n")
    specs_mod = import_from(tmp_path, "specs_mod")
    x = torch.zeros(32, device="cuda")
    for args, expected in [((x,), 3.0), ((x, 7), 7.0), ((x,), 3.0), ((x,), 3.0), ((x, 7), 7.0)]:
        x.fill_(float("nan"))
        specs_mod.run(*args)
        torch.cuda.synchronize()
        assert torch.all(x == expected), (args[1:], x[:4])
    h = torch.zeros(32, device="cuda", dtype=torch.float16)
    specs_mod.run(h)  # another dtype after the f32 calls: looked up, not guessed
    torch.cuda.synchronize()
    assert torch.all(h == 3.0)
    specs_mod.run(x)
    torch.cuda.synchronize()
    assert torch.all(x == 3.0)


def test_too_much_shared_memory_is_dsl601(torch, tmp_path):
    src = tmp_path / "bigsmem.py"
    src.write_text(
        "import dsl\nfrom dsl import Tensor, f32, Int32, Constexpr\n\n"
        "@dsl.kernel\n"
        "def k(x: Tensor[f32], n: Int32):\n"
        "    i = dsl.thread_idx.x\n"
        "    if i < n:\n"
        "        x[i] = x[i] + 1.0\n\n"
        "@dsl.jit\n"
        "def run(x: Tensor[f32], SMEM: Constexpr[int] = 1 << 20):\n"
        "    k(x, x.shape[0]).launch(grid=1, block=32, smem=SMEM)\n")
    bigsmem = import_from(tmp_path, "bigsmem")
    x = torch.zeros(32, device="cuda")
    with pytest.raises(LaunchError) as info:
        bigsmem.run(x)
    err = info.value
    assert err.kernel == "k" and err.smem == 1 << 20 and err.block == (32, 1, 1)
    assert err.diagnostic.code == "DSL601"
    assert err.diagnostic.range.line == 12 and err.diagnostic.range.file.endswith("bigsmem.py")
    x2 = torch.zeros(32, device="cuda")
    bigsmem.run(x2, 64 * 1024)  # above 48 KiB: opted in, runs
    torch.cuda.synchronize()
    assert float(x2.sum()) == 32.0


def test_cold_process_uses_disk_cache(torch, tmp_path):
    code = ("import sys, time; sys.path.insert(0, 'examples'); import torch;"
            "from examples.saxpy import run_saxpy; x = torch.ones(1024, device='cuda');"
            "run_saxpy(x, x.clone(), 2.0);"
            "torch.cuda.synchronize(); from dsl.runtime.jit_call import specialization;"
            "print(specialization(run_saxpy, x, x, 2.0).loaded_from_disk)")
    env = dict(os.environ, KDSL_CACHE_DIR=str(tmp_path / "c"))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    first = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True)
    second = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True)
    assert first.stdout.strip() == "False", first.stderr
    assert second.stdout.strip() == "True", second.stderr


def test_run_function(gpu):
    pytest.importorskip("numpy")
    import dsl

    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "vector_add.py")
    with open(path) as f:
        source = f.read()
    source += (
        "\n\ndef _ref(a, b, c, BLOCK):\n    return a + b\n\nadd.reference = _ref\n")
    result = dsl.runtime.run_function(source, os.path.abspath(path), "add")
    assert result["ok"], result
    assert result["correct"] is True
    assert result["median_ms"] > 0 and result["bandwidth_gbs"] > 100


def test_native_tensor_reads_match_the_python_path(torch):
    from dsl.runtime import dlpack
    from dsl.runtime.native import fastpath

    if fastpath is None:
        pytest.skip("the native launch path is not built here")
    x = torch.randn(64, 32, device="cuda")
    cases = [(x, "f32", 2), (x, "f16", 2), (x, "f32", 1), (x.t(), "f32", 2), (x[:, ::2], "f32", 2),
             (x.cpu(), "f32", 2), (x[0], "f32", 1), (x.half(), "f16", 2)]
    for t, dtype, rank in cases:
        native = dlpack._torch_fast_native(t, dtype, rank)
        python = dlpack._torch_fast_python(t, dtype, rank)
        if python is None:
            assert native is None, (t.shape, t.stride(), dtype, rank)
        else:
            ptr, shape, strides, dev = python
            assert native == (ptr, shape, strides if rank > 1 else (), dev)
