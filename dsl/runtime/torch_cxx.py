"""Compiling C++ against the installed torch: its flags, and a C++ compiler that shares its runtime.

`torch_flags()` is what `torch.utils.cpp_extension` reports: include folders, the library
folder (also as rpath, so results run without `LD_LIBRARY_PATH`), `-D_GLIBCXX_USE_CXX11_ABI`
as torch was built, and the C++ standard its headers ask for: C++17 up to torch 2.11, C++20
from 2.12 (whose `cpp_extension` switched; 2.14's headers refuse C++17). No CUDA toolkit is
involved: where torch has `libtorch_cuda.so` it is linked, kept with `--no-as-needed`.

Everything built here shares the process's C++ runtime: the `libstdc++.so.6` the running torch
loaded is named on the link line. A toolchain that links its own libstdc++ statically (a
separate GCC under `$CXX` did on one machine) gave a library a second, never-initialised copy
of the stream and locale code, and formatting a `TORCH_CHECK` message crashed the process; a
library that still does not depend on the shared runtime is refused after linking. Used by the
native launch path's tensor reader (`dsl.runtime.torch_tensors`) and by the C export's torch
operators and AOTInductor packages (`dsl.export.torch_build`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TorchFlags:
    includes: tuple[str, ...]
    library_dir: str
    cxx11_abi: bool
    cuda: bool  # torch has libtorch_cuda.so
    standard: str  # c++17 or c++20
    cxx_runtime: str | None = None  # the libstdc++.so.6 this process runs with, linked by path

    def compile(self) -> list[str]:
        return [f"-std={self.standard}", "-O2", "-fPIC", f"-D_GLIBCXX_USE_CXX11_ABI={int(self.cxx11_abi)}",
                *(f"-I{d}" for d in self.includes)]

    def link(self) -> list[str]:
        # every torch library stays a dependency (a toolchain linking --as-needed by default would
        # drop libtorch.so, which nothing here calls but the packages the runner dlopens need)
        cuda = ["-ltorch_cuda"] if self.cuda else []
        runtime = [self.cxx_runtime] if self.cxx_runtime else []
        return [f"-L{self.library_dir}", f"-Wl,-rpath,{self.library_dir}", "-Wl,--no-as-needed", *runtime, "-lc10",
                "-ltorch_cpu", "-ltorch", *cuda, "-Wl,--as-needed", "-ldl", "-lpthread"]


def torch_flags() -> TorchFlags:
    """The installed torch's headers, libraries and ABI."""
    import importlib.util
    import sys

    if sys.modules.get("torch") is None and importlib.util.find_spec("torch") is None:
        raise ModuleNotFoundError(f"building against torch needs torch, which {sys.executable} cannot import: install "
                                  f"it with `{sys.executable} -m pip install torch`", name="torch")
    import torch
    from torch.utils import cpp_extension

    library_dir = next(d for d in cpp_extension.library_paths() if os.path.exists(os.path.join(d, "libc10.so")))
    version = tuple(int(part) for part in re.findall(r"\d+", torch.__version__)[:2])
    return TorchFlags(tuple(cpp_extension.include_paths()), library_dir, bool(torch._C._GLIBCXX_USE_CXX11_ABI),
                      os.path.exists(os.path.join(library_dir, "libtorch_cuda.so")),
                      "c++20" if version >= (2, 12) else "c++17", process_cxx_runtime())


def process_cxx_runtime() -> str | None:
    """The `libstdc++.so.6` mapped into this process (torch's), where /proc says; else None."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    for line in maps.splitlines():
        path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
        if os.path.basename(path).startswith("libstdc++.so"):
            return path
    return None


def needed_libraries(binary: Path) -> list[str]:
    """The shared libraries `binary` names in its dynamic section (`readelf -d`)."""
    done = subprocess.run(["readelf", "-d", str(binary)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"readelf -d {binary} failed: {(done.stderr or done.stdout).strip()}")
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", done.stdout)


def loads_shared_cxx_runtime(binary: Path) -> bool:
    """Whether `binary`'s dynamic section names the shared libstdc++ (see the module docstring)."""
    return any(name.startswith("libstdc++.so") for name in needed_libraries(binary))


def own_runtime_message(what: str, outcome: str) -> str:
    """The message for a binary that `$CXX` linked its own copy of the C++ runtime into."""
    return (f"{what} does not load the shared libstdc++: the C++ compiler {os.environ.get('CXX', 'g++')} linked a "
            f"copy of the C++ runtime into it, {outcome}; build with a g++ that links libstdc++ dynamically (CXX=g++)")


def check_shared_cxx_runtime(binary: Path) -> Path:
    """`binary`, once it is known to use the shared C++ runtime; a binary that does not is
    removed (so the next build, with another compiler, is not skipped)."""
    if not loads_shared_cxx_runtime(binary):
        binary.unlink()
        raise RuntimeError(own_runtime_message(
            str(binary), "which crashes when it formats an error in a process that runs torch's"))
    return binary


def links_shared_cxx_runtime(compiler: str) -> bool:
    """Whether `compiler` links a C++ shared library against the shared libstdc++: a probe, a
    one-line library compiled in a temporary folder and its dynamic section read."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kdsl-cxx-") as tmp:
        source, library = Path(tmp) / "probe.cpp", Path(tmp) / "libprobe.so"
        source.write_text("#include <string>\nstd::string kdsl_probe(int x) { return std::to_string(x); }\n")
        try:
            done = subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(source)],
                                  capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.SubprocessError):
            return False
        return done.returncode == 0 and loads_shared_cxx_runtime(library)


def package_cxx() -> str:
    """The C++ compiler for the libraries AOTInductor builds into a package: `$CXX` (else g++)
    where it links the shared libstdc++, else the first g++ or c++ on PATH or in /usr/bin that
    does (see the module docstring for why); a RuntimeError naming each one tried if none does.
    Probed at each call (a fraction of a second; a package takes seconds to build)."""
    tried: list[str] = []
    for name in (os.environ.get("CXX", "g++"), "g++", "/usr/bin/g++", "c++", "/usr/bin/c++"):
        path = shutil.which(name)
        if path is None or path in tried:
            continue
        tried.append(path)
        if links_shared_cxx_runtime(path):
            return path
    raise RuntimeError(f"no C++ compiler here links libstdc++ dynamically (tried {', '.join(tried) or 'none found'}); "
                       "an AOTInductor package built with one that links its own copy of the C++ runtime crashes "
                       "when it is loaded: install g++ or set CXX to one")
