"""Examples run on the GPU and match PyTorch; launch and argument errors (marked gpu)."""

import importlib
import os
import subprocess
import sys

import pytest

from dsl.runtime import ArgumentError, LaunchError

pytestmark = pytest.mark.gpu


def module_from(folder, name, source):
    """Writes `source` as `folder/name.py` and imports it (a module written by a test)."""
    (folder / f"{name}.py").write_text(source)
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(folder))


def _rel(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


@pytest.mark.parametrize("n", [0, 1, 1000, 1 << 20, (1 << 20) + 3])
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
    with pytest.raises(ArgumentError, match=r"argument 'b' is in host memory \(cpu\) while 'a' is on cuda:0"):
        add(a, torch.randn(16), a)


def test_dtype_differing_from_specialization(torch):
    from examples.saxpy import run_saxpy

    x = torch.randn(16, device="cuda")
    run_saxpy(x, x.clone(), 1.0)
    spec = run_saxpy._kdsl_state.specs
    launcher = next(iter(spec.values())).launch
    with pytest.raises(ArgumentError, match="element type f16"):
        launcher(x.half(), x, 1.0)


def test_each_call_runs_its_own_specialization(torch, tmp_path):
    """Constexpr passed, then defaulted, then another dtype: every call runs the right code."""
    specs_mod = module_from(tmp_path, "specs_mod", (
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
        "        fill16(x, S).launch(grid=1, block=32)\n"))
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
    bigsmem = module_from(tmp_path, "bigsmem", (
        "import dsl\nfrom dsl import Tensor, f32, Int32, Constexpr\n\n"
        "@dsl.kernel\n"
        "def k(x: Tensor[f32], n: Int32):\n"
        "    i = dsl.thread_idx.x\n"
        "    if i < n:\n"
        "        x[i] = x[i] + 1.0\n\n"
        "@dsl.jit\n"
        "def run(x: Tensor[f32], SMEM: Constexpr[int] = 1 << 20):\n"
        "    k(x, x.shape[0]).launch(grid=1, block=32, smem=SMEM)\n"))
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


def _outcome(fn, *args):
    try:
        return "ok", fn(*args)
    except ArgumentError as err:
        return "error", str(err)


def test_native_reader_matches_the_python_reader(torch):
    """The C argument reader answers as the Python one does, or hands the call to it."""
    import functools

    from dsl.runtime.launch import Runtime
    from dsl.runtime.module import ModuleImage
    from dsl.runtime.native import fastpath

    if fastpath is None:
        pytest.skip("the native launch path is not built here")
    params = (("x", "f32", 2), ("s", "f32", None), ("n", "i32", None))
    rt = Runtime(ModuleImage(None, None))
    native = rt.arg_reader(params)
    python = functools.partial(rt._read_args, params)
    assert native is not python and type(native).__name__ == "builtin_function_or_method"
    x = torch.randn(64, 32, device="cuda")
    stream = torch.cuda.Stream()
    tensors = [x, x.half(), x[0], x.t(), x[:, ::2], x[:, :5], x.cpu(), x[:0], x.unsqueeze(0),
               torch.empty(0, 32, device="cuda"), "x"]
    scalars = [(2.5, 3), (2, True), (True, 3), (2.5, 3.0), (2.5, "3"), (2.5, 1 << 40)]
    for t in tensors:
        for s, n in scalars:
            for st in (None, 0, stream, stream.cuda_stream):
                got, want = _outcome(native, t, s, n, st), _outcome(python, t, s, n, st)
                assert got == want, (getattr(t, "shape", t), s, n, st)


def test_native_launch_is_armed_by_the_first_launch(torch):
    from dsl.runtime.jit_call import specialization
    from dsl.runtime.native import fastpath
    from examples.vector_add import add

    if fastpath is None:
        pytest.skip("the native launch path is not built here")
    a = torch.randn(1000, device="cuda")
    c = torch.empty_like(a)
    rt = specialization(add, a, a, c).rt
    kernel = rt.kernel("vector_add", ("ptr", "i32", "ptr", "i32", "ptr", "i32", "i32"))
    values = (a.data_ptr(), 1000, a.data_ptr(), 1000, c.data_ptr(), 1000, 1000)
    assert not kernel.__self__.armed()
    kernel((4, 1, 1), (256, 1, 1), 0, 0, *values)  # through Python: loads the module, then arms
    assert kernel.__self__.armed()
    c.zero_()
    kernel((4, 1, 1), (256, 1, 1), 0, 0, *values)  # native
    torch.cuda.synchronize()
    assert torch.equal(c, a + a)


def test_scalar_parameters_reach_the_kernel(torch, tmp_path):
    """Each scalar type is packed as the kernel reads it; a value that does not fit is refused."""
    mod = module_from(tmp_path, "scalars_mod", (
        "import dsl\nfrom dsl import Tensor, f32, f64, i32, i64, u32\n\n"
        "@dsl.kernel\n"
        "def put(out: Tensor[f64], a: f32, b: f64, n: i32, m: i64, u: u32):\n"
        "    out[0] = dsl.cast(a, f64)\n"
        "    out[1] = b\n"
        "    out[2] = dsl.cast(n, f64)\n"
        "    out[3] = dsl.cast(m, f64)\n"
        "    out[4] = dsl.cast(u, f64)\n\n"
        "@dsl.jit\n"
        "def run(out: Tensor[f64], a: f32, b: f64, n: i32, m: i64, u: u32):\n"
        "    put(out, a, b, n, m, u).launch(grid=1, block=1)\n"))
    out = torch.zeros(5, device="cuda", dtype=torch.float64)
    for values in [(1.5, 0.1, -7, -(1 << 40), 4000000000), (2, 3, True, 5, 0), (-0.0, 1e300, 2**31 - 1, 2**62, 1)]:
        mod.run(out, *values)
        torch.cuda.synchronize()
        expected = [float(torch.tensor(float(values[0]), dtype=torch.float32)), *map(float, values[1:])]
        assert out.tolist() == expected, values
    with pytest.raises(LaunchError, match="does not fit"):
        mod.run(out, 1.0, 1.0, 2**31, 0, 0)
    with pytest.raises(LaunchError, match="does not fit"):
        mod.run(out, 1e300, 1.0, 0, 0, 0)
    with pytest.raises(LaunchError, match="does not fit"):
        mod.run(out, 1.0, 1.0, 0, 0, -1)


def test_launch_from_another_thread(torch):
    import threading

    from examples.vector_add import add

    a, b = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    c = torch.empty_like(a)
    add(a, b, c)  # loaded (and the native launch armed) in this thread
    results = []

    def worker():
        c2 = torch.zeros_like(a)
        add(a, b, c2)
        torch.cuda.synchronize()
        results.append(torch.equal(c2, a + b))

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    c.zero_()
    add(a, b, c)
    torch.cuda.synchronize()
    assert results == [True] and torch.equal(c, a + b)


def test_pure_python_path_gives_the_same_results(torch):
    """KDSL_PURE_PYTHON=1 (what runs where the C extension is not built) on every example."""
    code = ("import sys; sys.path.insert(0, 'examples'); import torch;"
            "from dsl.runtime.native import fastpath; assert fastpath is None;"
            "from examples.vector_add import add; from examples.softmax import run_softmax;"
            "from examples.layernorm import run_layernorm;"
            "a = torch.randn(5000, device='cuda'); c = torch.empty_like(a); add(a, a, c);"
            "x = torch.randn(64, 1024, device='cuda'); y = torch.empty_like(x); run_softmax(x, y);"
            "w = torch.randn(1024, device='cuda'); z = torch.empty_like(x); run_layernorm(x, w, w, z, 1e-5);"
            "torch.cuda.synchronize();"
            "ref = torch.nn.functional.layer_norm(x, (1024,), w, w, 1e-5);"
            "print(torch.equal(c, a + a), bool(torch.allclose(y, torch.softmax(x, -1), atol=1e-6)),"
            " bool(torch.allclose(z, ref, atol=1e-4)))")
    env = dict(os.environ, KDSL_PURE_PYTHON="1")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True)
    assert proc.stdout.strip() == "True True True", proc.stderr


def test_cluster_launch(torch, tmp_path):
    """A launch with `cluster=` goes through cuLaunchKernelEx and covers the whole grid."""
    mod = module_from(tmp_path, "cluster_mod", (
        "import dsl\nfrom dsl import Tensor, f32\n\n"
        "@dsl.kernel\n"
        "def mark(out: Tensor[f32]):\n"
        "    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x\n"
        "    out[i] = dsl.cast(i, f32)\n\n"
        "@dsl.jit\n"
        "def run(out: Tensor[f32]):\n"
        "    mark(out).launch(grid=out.shape[0] // 64, block=64, cluster=(2, 1, 1))\n"))
    out = torch.full((64 * 8,), float("nan"), device="cuda")
    mod.run(out)
    torch.cuda.synchronize()
    assert torch.equal(out, torch.arange(64 * 8, device="cuda", dtype=torch.float32))
    assert "cluster=(2, 1, 1)" in mod.run.compile(out).launcher


def test_run_time_block_breaking_known_block_size_is_refused(torch, tmp_path):
    """DSL202 from the launcher: nothing is launched with a block the kernel was not built for."""
    mod = module_from(tmp_path, "contract_mod", (
        "import dsl\nfrom dsl import Tensor, f32\n\n"
        "@dsl.kernel(known_block_size=[256, 1, 1])\n"
        "def k(x: Tensor[f32]):\n"
        "    x[dsl.thread_idx.x] = 1.0\n\n"
        "@dsl.jit\n"
        "def run(x: Tensor[f32]):\n"
        "    k(x).launch(grid=1, block=x.shape[0])\n"))
    ok = torch.zeros(256, device="cuda")
    mod.run(ok)
    torch.cuda.synchronize()
    assert float(ok.sum()) == 256.0
    bad = torch.zeros(128, device="cuda")
    with pytest.raises(LaunchError) as info:
        mod.run(bad)
    torch.cuda.synchronize()
    assert info.value.diagnostic.code == "DSL202" and info.value.diagnostic.range.line == 10
    assert float(bad.sum()) == 0.0


def test_driver_assembler_gives_a_loadable_cubin_and_ptxas_figures(gpu):
    """The in-process assembler (run-time compiles) yields a cubin the driver loads and the
    register and spill figures of `ptxas -v`; broken PTX is a ToolError carrying the log."""
    import dsl
    from dsl.compiler.toolchain import ToolError, ptxas_path
    from dsl.runtime import driver_assembler
    from dsl.runtime.driver import current_context
    from dsl.runtime.module import ModuleImage
    from examples.softmax import run_softmax

    arch = current_context().arch
    compiled = dsl.compile(run_softmax, dsl.TensorSpec("f32", (4, 1024)), dsl.TensorSpec("f32", (4, 1024)),
                           target=arch)
    symbol = compiled.kernels[0].symbol
    cubin, resources, log = driver_assembler.assemble(compiled.stages["ptx"], arch)
    assert cubin[:4] == b"\x7fELF"
    assert resources[symbol].registers > 0 and resources[symbol].spill_stores == 0, log
    if ptxas_path() is not None:  # static shared memory is the PTX's, whichever ptxas assembles it
        assert resources[symbol].static_smem == compiled.kernels[0].resources.static_smem > 0
    image = ModuleImage(cubin, None)
    assert image.function(current_context(), symbol).address != 0
    assert image.loaded_from[current_context().key] == "cubin"
    with pytest.raises(ToolError, match="PTX compiler"):
        driver_assembler.assemble(compiled.stages["ptx"].replace("ret;", "bogus_instruction;"), arch)


@pytest.mark.parametrize("assembler", ["driver", "ptxas"])
def test_first_call_compiles_with_either_assembler(torch, assembler):
    """A cold process without a disk cache compiles at its first call with the chosen assembler."""
    code = ("import sys; sys.path.insert(0, 'examples'); import torch;"
            "from examples.softmax import run_softmax;"
            "x = torch.randn(64, 1024, device='cuda'); y = torch.empty_like(x); run_softmax(x, y);"
            "torch.cuda.synchronize(); print(bool(torch.allclose(y, torch.softmax(x, -1), atol=1e-6)))")
    env = dict(os.environ, KDSL_NO_DISK_CACHE="1", KDSL_ASSEMBLER=assembler)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True)
    assert proc.stdout.strip() == "True", proc.stderr


def test_quick_architecture_query_agrees_with_the_context(gpu):
    from dsl.runtime.driver import current_arch, current_context

    assert current_arch() == current_context().arch
