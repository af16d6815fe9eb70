"""On a GPU: exported jit functions, called from a C program built with gcc alone and from
Python through `dsl.load_export`, compute what torch computes (marked gpu; skipped where no
GPU is present).

    python -m pytest tests/export/test_export_gpu.py -v

needs an NVIDIA GPU with its driver, torch, gcc and the MLIR bindings (exporting compiles).
The C program is `data/gpu_program.c`; it calls saxpy, softmax and `copy`, one entry point
with two specializations (f32 with BLOCK=256, f16 with BLOCK=128), and checks that a BLOCK
no specialization has is refused. The others call through `dsl.load_export` with torch
tensors: on their stream, from eight threads at once, a cluster launch, the Hopper GEMM with
its TMA tensor maps.
"""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest

import dsl
from dsl.export import ExportCallError
from tests.export.conftest import EXAMPLES

pytestmark = pytest.mark.gpu

DATA = Path(__file__).parent / "data"
COPY = """
import dsl
from dsl import Constexpr, Int32, Tensor

@dsl.kernel
def copy_kernel(x: Tensor, y: Tensor, n: Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    if i < n:
        y[i] = x[i]

@dsl.jit
def copy(x: Tensor, y: Tensor, BLOCK: Constexpr[int] = 256):
    copy_kernel(x, y, x.shape[0]).launch(grid=dsl.cdiv(x.shape[0], BLOCK), block=BLOCK)
"""


@pytest.fixture(scope="module")
def arch():
    """The attached GPU's architecture, read from libcuda (exports need no cuda-bindings)."""
    from dsl.runtime.driver import current_arch
    from dsl.targets import TARGETS

    found = current_arch()
    if found is None:
        pytest.skip("no NVIDIA GPU here")
    if found not in TARGETS:
        pytest.skip(f"kdsl has no target for this GPU ({found})")
    return found


@pytest.fixture
def torch(arch):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    torch.manual_seed(0)
    return torch


def export(out, *functions: str, target: str, extra: tuple[str, ...] = ()) -> None:
    from dsl.cli_export import main

    assert main([*functions, "--target", target, "-o", str(out), *extra]) == 0


def test_a_c_program_calls_saxpy_softmax_and_a_two_specialization_kernel(tmp_path, torch, arch):
    (tmp_path / "copy_kernels.py").write_text(COPY)
    out = tmp_path / "lib"
    export(out, f"{EXAMPLES / 'saxpy.py'}::run_saxpy", f"{EXAMPLES / 'softmax.py'}::run_softmax",
           f"{tmp_path / 'copy_kernels.py'}::copy", target=arch,
           extra=("--prefix", "lib", "--example", "copy: x=Tensor[f32, 1], y=Tensor[f32, 1], BLOCK=256",
                  "--example", "copy: x=Tensor[f16, 1], y=Tensor[f16, 1], BLOCK=128"))
    program = tmp_path / "gpu_program"
    subprocess.run(["gcc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{out}", str(DATA / "gpu_program.c"),
                    str(out / "lib.c"), "-o", str(program), "-ldl", "-lpthread", "-lm"], check=True)
    n, rows, cols = 100_003, 64, 3000
    x, y = torch.randn(n), torch.randn(n)
    matrix = torch.randn(rows, cols) * 4
    for name, t in (("x.bin", x), ("y.bin", y), ("rows.bin", matrix)):
        (tmp_path / name).write_bytes(t.numpy().tobytes())
    done = subprocess.run([str(program), str(tmp_path), str(n), str(rows), str(cols)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "ok" and "BLOCK=64, but this specialization has BLOCK=256" in done.stdout

    def read(name: str, dtype):
        return torch.frombuffer(bytearray((tmp_path / name).read_bytes()), dtype=dtype)

    assert torch.allclose(read("saxpy.out", torch.float32), 2.5 * x + y, rtol=1e-6, atol=1e-6)
    assert torch.allclose(read("softmax.out", torch.float32).view(rows, cols), torch.softmax(matrix, dim=1),
                          rtol=1e-5, atol=1e-7)
    assert torch.equal(read("copy32.out", torch.float32), x)
    halves = torch.frombuffer(bytearray(x.numpy().tobytes()), dtype=torch.int16)[:n]
    assert torch.equal(read("copy16.out", torch.int16), halves)


def test_load_export_calls_with_torch_tensors_on_their_stream(tmp_path, torch, arch):
    export(tmp_path, f"{EXAMPLES / 'saxpy.py'}::run_saxpy", target=arch)
    lib = dsl.load_export(tmp_path)
    x, y = torch.randn(1 << 20, device="cuda"), torch.randn(1 << 20, device="cuda")
    expected = 3.0 * x + y
    lib.run_saxpy(x, y, 3.0)
    torch.cuda.synchronize()
    assert torch.allclose(y, expected, rtol=1e-6, atol=1e-6)
    stream = torch.cuda.Stream()
    z = torch.zeros_like(x)
    with torch.cuda.stream(stream):
        lib.run_saxpy(x, z, 1.0)  # on the current torch stream
    stream.synchronize()
    assert torch.equal(z, x)
    with pytest.raises(ExportCallError, match="argument 'x' has element type f16, but this "
                                                         "specialization takes Tensor\\[f32, 1\\]"):
        lib.run_saxpy(x.half(), y, 1.0)


def test_calls_from_many_threads_load_once_and_launch_correctly(tmp_path, torch, arch):
    export(tmp_path, f"{EXAMPLES / 'saxpy.py'}::run_saxpy", target=arch)
    lib = dsl.load_export(tmp_path, debug=True)  # synchronizes and checks after every launch
    pairs = [(torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")) for _ in range(8)]
    expected = [2.0 * x + y for x, y in pairs]
    torch.cuda.synchronize()
    errors = []

    def work(x, y):
        try:
            for _ in range(50):
                lib.run_saxpy(x, y, 0.0)  # y = 0 * x + y: y unchanged, launched 50 times
            lib.run_saxpy(x, y, 2.0)
        except Exception as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=work, args=pair) for pair in pairs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    torch.cuda.synchronize()
    assert errors == []
    assert all(torch.allclose(y, e, rtol=1e-6, atol=1e-6) for (_, y), e in zip(pairs, expected))


CLUSTER = """
import dsl
from dsl import Tensor, f32

@dsl.kernel
def mark(x: Tensor[f32]):
    if dsl.thread_idx.x == 0:
        x[dsl.block_idx.x] = x[dsl.block_idx.x] + 1.0

@dsl.jit
def clustered(x: Tensor[f32]):
    mark(x).launch(grid=dsl.cdiv(x.shape[0], 2) * 2, block=32, cluster=(2, 1, 1))
"""


def test_a_cluster_launch(tmp_path, torch, arch):
    if arch != "sm_90":
        pytest.skip("thread-block clusters need sm_90")
    (tmp_path / "clusters.py").write_text(CLUSTER)
    export(tmp_path / "out", f"{tmp_path / 'clusters.py'}::clustered", target=arch)
    lib = dsl.load_export(tmp_path / "out")
    x = torch.zeros(10, device="cuda")
    lib.clustered(x)
    torch.cuda.synchronize()
    assert torch.equal(x, torch.ones(10, device="cuda"))


def test_the_hopper_gemm_with_tensor_maps(tmp_path, torch, arch):
    if arch != "sm_90":
        pytest.skip("the Hopper GEMM needs sm_90")
    export(tmp_path, f"{EXAMPLES / 'gemm_hopper.py'}::gemm_hopper", target="sm_90")
    lib = dsl.load_export(tmp_path)
    a = torch.randn(1024, 512, device="cuda", dtype=torch.bfloat16)
    b_t = torch.randn(2048, 512, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(1024, 2048, device="cuda", dtype=torch.bfloat16)
    lib.gemm_hopper(a, b_t, c)
    torch.cuda.synchronize()
    expected = (a.float() @ b_t.float().T)
    assert float((c.float() - expected).norm() / expected.norm()) < 1e-2
