"""AOTInductor packages of models that call kdsl operators, served where kdsl's Python
registration never ran: `python -m dsl.torch.cpp_library` (`kdsl export` plus C++ operators)
writes the operators in C++ over the exported C entry points, built into one library against
the installed torch (`dsl/export/torch_build.py`); `kdsl_aoti_runner` (`dsl/export/aoti_runner.py`)
runs a package from C++ with it loaded.

Fixtures (built once per module, real gcc / g++ against torch's headers): `library`, the export
of `programs.py`'s `run_saxpy` (in place, a fixed Constexpr) and `run_fill` (an integer scalar, a
float and a bool Constexpr that are entry-point arguments, a fixed str Constexpr) and
`programs_aoti.py`'s `scaled` (a functional form) as `libkdsl_aoti_torch.so`; `runner`, the
runner. On the CPU: the C++ defines each operator with the Python registration's schema, the
library loaded in a fresh process registers them (the CUDA kernel only) and its checks run, the
refusals name what they refuse, a CPU package names the operators and runs in Python as eager,
and in the C++ runner gets as far as the operator's missing CPU kernel. On a GPU (`cuda`): the
package of a model with kdsl and torch operators runs in the C++ runner and in a fresh Python
process with only the library loaded, as the model runs eagerly.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from tests.torch import programs, programs_aoti

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BASE = "kdsl_aoti"
OPERATORS = {  # the C++ library's operators: name -> schema, as kdsl's Python registration makes them
    "run_saxpy": "(Tensor x, Tensor(a!) y, float a, int BLOCK=64) -> ()",
    "run_fill": ('(Tensor(a!) y, SymInt n, float value=1.0, *, float SCALE=1.0, str MODE="plain", bool CHECK=True) '
                 "-> ()"),
    "run_scale_functional": "(Tensor x, float a) -> Tensor",
}
FILL_EXAMPLES = ["--example", "run_fill: SCALE=1.0, CHECK=True", "--example", "run_fill: SCALE=2.0, CHECK=False"]

pytestmark = pytest.mark.skipif(shutil.which("g++") is None or shutil.which("gcc") is None, reason="needs gcc and g++")


def _target() -> str:
    """This machine's GPU architecture where kdsl and torch both see one, else sm_90."""
    from dsl.runtime import driver
    from dsl.targets import TARGETS

    try:
        import torch

        if driver.available() and torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            if f"sm_{major}{minor}" in TARGETS:
                return f"sm_{major}{minor}"
    except ImportError:
        pass
    return "sm_90"


def _export_args(out: Path, *extra: str) -> list[str]:
    return [f"{HERE / 'programs.py'}::run_saxpy", f"{HERE / 'programs.py'}::run_fill",
            f"{HERE / 'programs_aoti.py'}::scaled", "--prefix", BASE, "-o", str(out), "--target", _target(),
            *FILL_EXAMPLES, *extra]


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> Path:
    """`python -m dsl.torch.cpp_library ... --build`, run as a user runs it: the export's folder."""
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("export")
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "KDSL_CACHE_DIR": str(out / "kdsl-cache")}
    done = subprocess.run([sys.executable, "-m", "dsl.torch.cpp_library", *_export_args(out, "--build")],
                          capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert done.returncode == 0, f"python -m dsl.torch.cpp_library --build failed:\n{done.stdout}\n{done.stderr}"
    assert done.stdout.splitlines()[-1] == f"built {out / f'lib{BASE}_torch.so'}", done.stdout
    return out


@pytest.fixture(scope="module")
def runner(tmp_path_factory) -> Path:
    """`kdsl_aoti_runner`, built against the installed torch."""
    pytest.importorskip("torch")
    from dsl.export.torch_build import build_runner

    return build_runner(tmp_path_factory.mktemp("runner"))


def _fresh_python(code: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """`code` in a new interpreter that never imports kdsl (run outside the repository; checked)."""
    script = textwrap.dedent(code)
    script += "\nassert not [m for m in sys.modules if m == 'dsl' or m.startswith('dsl.')], 'kdsl was imported'\n"
    return subprocess.run([sys.executable, "-X", "faulthandler", "-c", script], capture_output=True, text=True,
                          timeout=timeout, cwd="/")  # a crash prints its Python stack


def _kdsl_python(code: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """`code` in a new interpreter that imports kdsl from this checkout."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, "-X", "faulthandler", "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env={**os.environ, "PYTHONPATH": path})


def _python_schemas(torch) -> dict[str, str]:
    """The schemas kdsl's Python registration gives the same operators in this process, under
    the names the C++ library uses (here a name may have been qualified by another test)."""
    from dsl.torch.registry import operator_name

    found = {}
    for base, registered in (("run_saxpy", operator_name(programs.run_saxpy)),
                             ("run_fill", operator_name(programs.run_fill)),
                             ("run_scale_functional", programs_aoti.scaled.name.split("::")[1])):
        text = str(getattr(torch.ops.kdsl, registered).default._schema)
        found[base] = text.replace(f"kdsl::{registered}(", f"kdsl::{base}(", 1)
    return found


def test_the_cpp_library_defines_each_operator_with_the_python_registrations_schema(torch, library):
    source = (library / f"{BASE}_torch.cpp").read_text()
    defined = [line.strip() for line in source.splitlines() if line.strip().startswith("m.def(")]
    assert defined == [f"m.def({json.dumps(name + schema)}, {{at::Tag::pt2_compliant_tag}});"
                       for name, schema in OPERATORS.items()]
    assert [line.strip() for line in source.splitlines() if line.strip().startswith("m.impl(")] == [
        f'm.impl("{name}", &kdsl_op_{name});' for name in OPERATORS]
    python = _python_schemas(torch)
    parsed = {name: str(torch._C.parse_schema(f"kdsl::{name}{schema}")) for name, schema in OPERATORS.items()}
    assert parsed == python  # what torch reads from the C++'s text is what the Python registration defined
    # the entry point's arguments, as the export made them: SCALE and CHECK vary between examples, MODE is fixed
    assert ("void kdsl_op_run_fill(at::Tensor& y, int64_t n, double value, double SCALE, c10::string_view MODE, "
            "bool CHECK)") in source
    assert ("kdsl_aoti_run_fill(kdsl_stream, &kdsl_kt[0], kdsl_to_int<int32_t>(kdsl_op, \"n\", n), "
            "kdsl_to_float(kdsl_op, \"value\", value), SCALE, CHECK);") in source
    assert "at::Tensor y = at::empty_like(x, x.options(), at::MemoryFormat::Contiguous);" in source


def test_loaded_in_a_fresh_process_the_library_registers_the_operators_with_those_schemas(torch, library):
    done = _fresh_python(f"""
        import json, sys, torch
        torch.ops.load_library({str(library / f"lib{BASE}_torch.so")!r})
        found = {{}}
        for name in {list(OPERATORS)!r}:
            op = getattr(torch.ops.kdsl, name).default
            found[name] = [str(op._schema), [t.name for t in op.tags],
                           torch._C._dispatch_has_kernel_for_dispatch_key("kdsl::" + name, "CUDA"),
                           torch._C._dispatch_has_kernel_for_dispatch_key("kdsl::" + name, "CPU")]
        def error(call):
            try:
                call()
            except Exception as err:
                return type(err).__name__ + ": " + str(err).splitlines()[0]
            return "no error"
        x, y = torch.ones(4), torch.ones(4)
        cuda_kernel = torch._C.DispatchKeySet(torch._C.DispatchKey.CUDA)
        found["errors"] = [
            error(lambda: torch.ops.kdsl.run_saxpy(x, y, 2.0)),
            error(lambda: torch.ops.kdsl.run_saxpy.default.redispatch(cuda_kernel, x, y, 2.0, 32)),
            error(lambda: torch.ops.kdsl.run_saxpy.default.redispatch(cuda_kernel, x, y, 2.0, 64)),
            error(lambda: torch.ops.kdsl.run_fill.default.redispatch(cuda_kernel, y, 4, 1.0, SCALE=1.0, MODE="fast",
                                                                     CHECK=True)),
        ]
        print(json.dumps(found))
    """)
    assert done.returncode == 0, f"the fresh process failed:\n{done.stderr}"
    found = json.loads(done.stdout)
    python = _python_schemas(torch)
    for name in OPERATORS:
        schema, tags, has_cuda, has_cpu = found[name]
        assert schema == python[name]
        assert (tags, has_cuda, has_cpu) == (["pt2_compliant_tag"], True, False), name
    assert found["errors"][0].startswith(
        "NotImplementedError: Could not run 'kdsl::run_saxpy' with arguments from the 'CPU' backend.")
    assert found["errors"][1:] == [
        "RuntimeError: kdsl::run_saxpy: this library was exported with BLOCK=64 only, not 32; export again with an "
        "--example for that value",
        "RuntimeError: kdsl::run_saxpy: argument 'x' is on cpu; this operator (a kdsl C++ operator library) runs on "
        "CUDA tensors only",
        "RuntimeError: kdsl::run_fill: this library was exported with MODE='plain' only, not fast; export again with "
        "an --example for that value",
    ]


def test_the_library_and_runner_share_this_processs_cxx_runtime_and_one_that_does_not_is_refused(
        torch, library, runner, tmp_path):
    """A library with its own copy of libstdc++ crashed formatting a TORCH_CHECK message in a process
    running torch's: the link names the process's libstdc++, and a binary without it is refused."""
    from dsl.runtime.torch_cxx import check_shared_cxx_runtime, needed_libraries, process_cxx_runtime, torch_flags

    runtime = process_cxx_runtime()
    assert runtime is not None and os.path.basename(runtime).startswith("libstdc++.so"), runtime
    assert runtime in torch_flags().link()
    for binary in (library / f"lib{BASE}_torch.so", runner):
        assert any(name.startswith("libstdc++.so") for name in needed_libraries(binary)), needed_libraries(binary)
    plain = tmp_path / "libplain.so"  # C only: no C++ runtime at all, as a statically linked one shows
    (tmp_path / "plain.c").write_text("int plain(int x) { return x + 1; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(plain), str(tmp_path / "plain.c")], check=True)
    with pytest.raises(RuntimeError, match=r"does not load the shared libstdc\+\+.*CXX=g\+\+"):
        check_shared_cxx_runtime(plain)
    assert not plain.exists(), "a refused binary stays behind and the next build would skip it"


def test_a_package_whose_library_lacks_the_shared_cxx_runtime_is_refused_before_loading(tmp_path):
    """AOTInductor builds the model's library with `$CXX`; one with its own libstdc++ crashed
    `aoti_load_package` with no message: `check_package_runtime` names it first."""
    from dsl.export.torch_build import check_package_runtime

    (tmp_path / "model.c").write_text("int model(int x) { return x; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(tmp_path / "model.so"), str(tmp_path / "model.c")],
                   check=True)
    package = tmp_path / "model.pt2"
    with zipfile.ZipFile(package, "w") as archive:
        archive.write(tmp_path / "model.so", "model/data/aotinductor/model/model.so")
        archive.writestr("model/data/aotinductor/model/model.json", "{}")
    with pytest.raises(RuntimeError, match=r"model\.so does not load the shared libstdc\+\+.*CXX=g\+\+"):
        check_package_runtime(package)
    (tmp_path / "model.cpp").write_text("#include <string>\nstd::string model() { return std::to_string(1); }\n")
    subprocess.run(["g++", "-shared", "-fPIC", "-o", str(tmp_path / "model.so"), str(tmp_path / "model.cpp")],
                   check=True)
    with zipfile.ZipFile(package, "w") as archive:
        archive.write(tmp_path / "model.so", "model/data/aotinductor/model/model.so")
    assert check_package_runtime(package) == package  # this machine's g++: the shared runtime


@pytest.mark.parametrize(("args", "message"), [
    (["programs.py::run_fill", "--choose", "CHECK", *FILL_EXAMPLES],
     "run_fill (tests/torch/programs.py:32): Constexpr parameter 'CHECK' is chosen by the entry point (--choose CHECK) "
     "among True, False, but the operator's schema passes it, and the value passed would not be the one run; export "
     "without --choose CHECK (it is then an argument of the entry point)"),
    (["programs_aoti.py::scaled_by_function"],
     "run_scale (tests/torch/programs_aoti.py:18): output 'y' is allocated by a Python function, which a C++ operator "
     "cannot run; allocate it like an input (outputs={'y': '<input>'}) or export the in-place operator "
     "(FILE::run_scale)"),
    (["programs.py::run_pick", "--example", "WHICH=1"],
     "run_pick (tests/torch/programs.py:60): the exported specializations write 'z', which the operator's schema "
     "(Tensor x, Tensor(a!) y, Tensor z, int WHICH=0) -> () (made from the function's examples= or annotations) does "
     "not mark mutated; add an example that writes it to its @dsl.jit(examples=[...])"),
])
def test_what_the_library_cannot_map_is_refused_naming_the_function_and_parameter(torch, tmp_path, capsys,
                                                                                   monkeypatch, args, message):
    from dsl.torch.cpp_library import main

    monkeypatch.chdir(ROOT)
    file, *rest = args
    assert main([str(Path("tests/torch") / file), "-o", str(tmp_path), *rest]) == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == f"python -m dsl.torch.cpp_library: {message}"
    assert not list(tmp_path.iterdir())  # nothing written


class _Model:
    """What the packages run: torch ops, kdsl's in-place saxpy and fill, its functional scale."""

    @staticmethod
    def make(torch):
        class Model(torch.nn.Module):
            def forward(self, x, y):
                y = y * 0.5  # torch
                programs.run_saxpy.torch_op(x, y, 2.0)  # kdsl, in place: y = 2 x + y / 2
                z = programs_aoti.scaled(y, 3.0)  # kdsl, functional: z = 3 y
                filled = torch.zeros_like(x)
                programs.run_fill.torch_op(filled, x.shape[0] // 2, 1.5, SCALE=2.0, CHECK=False)  # kdsl: 3.0 in half
                return torch.relu(z) - x, filled + 1.0

        return Model()


def _inputs(torch, n: int = 1000) -> tuple:
    x = torch.linspace(-3.0, 5.0, n, dtype=torch.float32)
    return x, torch.cos(x)


def _package(torch, model, inputs, path: Path) -> Path:
    """`dsl.torch.aoti_compile_and_package` of `model` (torch's, with a compiler whose packages load)."""
    import dsl.torch

    exported = torch.export.export(model, inputs)
    package = dsl.torch.aoti_compile_and_package(exported, path)
    with zipfile.ZipFile(package) as archive:
        texts = [archive.read(n).decode(errors="replace") for n in archive.namelist() if n.endswith(".json")]
    for name in OPERATORS:  # the package calls each kdsl operator through the proxy executor, by name
        assert any(f'"kdsl::{name}"' in text for text in texts), f"the package does not name kdsl::{name}"
    from dsl.export.torch_build import check_package_runtime

    return check_package_runtime(package)  # a clear error where loading it would crash


def _static_runtime_cxx(folder: Path) -> Path:
    """A C++ compiler that links its own copy of libstdc++ into the libraries it builds (as a
    separate GCC under `$CXX` did on one machine): this machine's g++, `-static-libstdc++` added
    to a `-shared` link (g++ given it on a precompiled header would link that)."""
    wrapper = folder / "static-g++"
    gxx = shutil.which("g++")
    wrapper.write_text(f'#!/bin/sh\ncase " $* " in *" -shared "*) exec {gxx} "$@" -static-libstdc++;; esac\n'
                       f'exec {gxx} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def test_packages_are_built_by_a_compiler_that_links_the_shared_cxx_runtime(monkeypatch, tmp_path):
    from dsl.runtime.torch_cxx import links_shared_cxx_runtime, package_cxx

    static = _static_runtime_cxx(tmp_path)
    assert not links_shared_cxx_runtime(str(static))
    monkeypatch.setenv("CXX", str(static))
    chosen = package_cxx()
    assert chosen != str(static) and links_shared_cxx_runtime(chosen), chosen
    monkeypatch.setenv("CXX", shutil.which("g++"))
    assert package_cxx() == shutil.which("g++")  # a $CXX that links the shared runtime is kept
    monkeypatch.setenv("CXX", str(static))  # and no other compiler to fall back to
    monkeypatch.setattr("shutil.which", lambda name: str(static) if name == str(static) else None)
    with pytest.raises(RuntimeError, match=r"no C\+\+ compiler here links libstdc\+\+ dynamically "
                                           r"\(tried .*static-g\+\+\)"):
        package_cxx()


def test_a_cpu_package_names_the_operators_runs_as_eager_and_reaches_them_in_cpp(torch, library, runner, tmp_path,
                                                                                 monkeypatch):
    from dsl.export.aoti_runner import run_package

    model, inputs = _Model.make(torch), _inputs(torch, 200)
    # As in a process started with a $CXX that links its own libstdc++ (torch reads $CXX when it
    # is imported): torch's aoti_compile_and_package would make a package that crashes when it is
    # loaded; kdsl's builds it with a compiler that links the shared runtime
    static = str(_static_runtime_cxx(tmp_path))
    monkeypatch.setenv("CXX", static)
    with torch._inductor.config.patch({"cpp.cxx": (None, static)}):
        package = _package(torch, model, inputs, tmp_path / "model.pt2")
    # loaded by Python, where the operators' CPU kernel is kdsl's interpreter; in a process of its
    # own, so that a crash in torch's loader is this test's failure, not the end of the session
    done = _kdsl_python(f"""
        import torch
        from tests.torch.test_aoti import _Model, _inputs
        model, inputs = _Model.make(torch), _inputs(torch, 200)
        expected = model(*inputs)  # eager: registers the operators
        got = torch._inductor.aoti_load_package({str(package)!r})(*inputs)
        for g, e in zip(got, expected):
            torch.testing.assert_close(g, e)
        print("as eager")
    """)
    assert done.returncode == 0 and done.stdout.strip().endswith("as eager"), (
        f"aoti_load_package of the CPU package failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")
    # In C++ alone the operator is found by its schema, from the library; the library has no CPU kernel
    with pytest.raises(RuntimeError) as failed:
        run_package(runner, package, list(inputs), tmp_path / "run", [library / f"lib{BASE}_torch.so"], device="cpu")
    # (torch 2.13 puts the dispatcher's message in the exception; 2.11 logs it and throws "API call failed")
    assert "kdsl_aoti_runner: running the package failed: " in str(failed.value)
    assert "Could not run 'kdsl::run_saxpy' with arguments from the 'CPU' backend." in str(failed.value)
    with pytest.raises(RuntimeError) as unknown:  # without it, the package cannot even be loaded
        run_package(runner, package, list(inputs), tmp_path / "run", device="cpu")
    assert "kdsl_aoti_runner: loading the package failed: Could not find schema for kdsl::run_saxpy" in str(
        unknown.value)


def test_the_runner_reads_runs_and_writes_a_package_of_torch_operators_alone(torch, runner, tmp_path):
    """What the GPU test needs of the runner, on the CPU: its tensor files both ways, dtypes and shapes kept."""
    from dsl.export.aoti_runner import run_package

    class Plain(torch.nn.Module):
        def forward(self, x, m):
            return x * 2.0 + 1.0, (m.to(torch.int64) * 3).reshape(2, -1), x.to(torch.bfloat16)[None]

    inputs = (torch.linspace(-1.0, 1.0, 12), torch.arange(12, dtype=torch.int32))
    import dsl.torch

    package = dsl.torch.aoti_compile_and_package(torch.export.export(Plain(), inputs), tmp_path / "plain.pt2")
    got = run_package(runner, package, list(inputs), tmp_path / "run", device="cpu")
    expected = Plain()(*inputs)
    assert [(g.dtype, g.shape) for g in got] == [(e.dtype, e.shape) for e in expected]
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=0, atol=0)


@pytest.mark.gpu
def test_a_cuda_package_runs_in_cpp_and_in_a_fresh_python_as_eager(cuda, library, runner, tmp_path):
    from dsl.export.aoti_runner import run_package

    torch = cuda
    model = _Model.make(torch)
    inputs = tuple(t.cuda() for t in _inputs(torch))
    expected = [t.cpu() for t in model(*inputs)]
    package = _package(torch, model, inputs, tmp_path / "model.pt2")
    shim = library / f"lib{BASE}_torch.so"

    got = run_package(runner, package, [t.cpu() for t in inputs], tmp_path / "run", [shim], device="cuda")
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, msg=lambda m: f"the C++ runner's output differs from eager: {m}")

    torch.save([t.cpu() for t in inputs], tmp_path / "inputs.pt")
    done = _fresh_python(f"""
        import sys, torch
        torch.ops.load_library({str(shim)!r})
        inputs = [t.cuda() for t in torch.load({str(tmp_path / "inputs.pt")!r})]
        outputs = torch._inductor.aoti_load_package({str(package)!r})(*inputs)
        torch.save([t.cpu() for t in outputs], {str(tmp_path / "outputs.pt")!r})
        x, y = inputs
        try:  # an argument no exported specialization takes: the entry point's own message, through TORCH_CHECK
            torch.ops.kdsl.run_saxpy(x.double(), y.double(), 2.0)
            print("no error")
        except RuntimeError as err:
            print(str(err).splitlines()[0])
        y2 = y.clone()
        torch.ops.kdsl.run_saxpy(x, y2, 2.0)  # eagerly, on torch's current stream
        print(bool(torch.equal(y2, 2.0 * x + y)))
    """)
    assert done.returncode == 0, f"the fresh Python process failed:\n{done.stdout}\n{done.stderr}"
    for g, e in zip(torch.load(tmp_path / "outputs.pt"), expected):
        torch.testing.assert_close(g, e, msg=lambda m: f"aoti_load_package's output differs from eager: {m}")
    refused, eager = done.stdout.strip().splitlines()[-2:]
    assert refused.startswith(
        "kdsl::run_saxpy: the kdsl entry point kdsl_aoti_run_saxpy failed (CUresult 1): "), refused
    assert "f64" in refused, refused
    assert eager == "True"
