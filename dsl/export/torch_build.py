"""Compiling C++ against the installed torch: the kdsl operator library and the AOTInductor runner.

`build_torch_library(DIR)` makes `DIR/libNAME_torch.so` from `NAME_torch.cpp`
(`dsl.torch.cpp_library`) and `NAME.c` (the export itself, compiled as C with hidden
visibility, so the library's only exports are torch's registrations and two copies of one
export in a process do not interpose each other's entry points). `build_runner(DIR)` makes
`DIR/kdsl_aoti_runner` (`dsl.export.aoti_runner`). Both use plain g++ (`$CXX`) with the flags
of `dsl.runtime.torch_cxx.torch_flags` (torch's headers, libraries, ABI and C++ standard), and
share the process's C++ runtime as that module explains; where torch has `libtorch_cuda.so` it
is linked and kept (the stream getter is a weak reference, and the runner's CUDA model loader
registers itself from that library's static initializers).

torch is imported here (this path needs it); each build is atomic (a temporary file, then
`os.replace`) and skipped when the result is newer than its sources.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from dsl.export.build import _manifest, built_atomically
from dsl.runtime.torch_cxx import (
    TorchFlags,
    check_shared_cxx_runtime,
    loads_shared_cxx_runtime,
    own_runtime_message,
    torch_flags,
)


def check_package_runtime(package: str | os.PathLike) -> Path:
    """`package` (an AOTInductor `.pt2`), once each shared library in it is known to load the
    shared libstdc++: Inductor compiles the model's library with `$CXX` too, and one that linked
    its own C++ runtime crashed torch's `aoti_load_package` (a segmentation fault, no message)."""
    import tempfile
    import zipfile

    package = Path(package)
    with zipfile.ZipFile(package) as archive, tempfile.TemporaryDirectory(prefix="kdsl-pt2-") as tmp:
        for name in archive.namelist():
            if not name.endswith(".so"):
                continue
            extracted = Path(tmp) / Path(name).name
            extracted.write_bytes(archive.read(name))
            if not loads_shared_cxx_runtime(extracted):
                raise RuntimeError(own_runtime_message(f"{package}: its {name}", "and loading the package would crash"))
    return package


def library_commands(folder: Path, base: str, output: Path, flags: TorchFlags) -> list[list[str]]:
    """The two steps of `libNAME_torch.so`: NAME.c as C, then NAME_torch.cpp with it."""
    obj = Path(f"{output}.o")
    return [[os.environ.get("CC", "gcc"), "-std=c11", "-O2", "-fPIC", "-fvisibility=hidden", "-c", "-o", str(obj),
             str(folder / f"{base}.c")],
            [os.environ.get("CXX", "g++"), *flags.compile(), "-shared", "-o", str(output),
             str(folder / f"{base}_torch.cpp"), str(obj), *flags.link(), "-lm"]]


def runner_command(source: Path, output: Path, flags: TorchFlags) -> list[str]:
    return [os.environ.get("CXX", "g++"), *flags.compile(), "-o", str(output), str(source), *flags.link()]


def shown(commands: list[list[str]]) -> str:
    """Commands as a shell reads them, one line each."""
    return "\n".join(shlex.join(c) for c in commands)


def build_torch_library(folder: str | os.PathLike) -> Path:
    """`lib<NAME>_torch.so` in the export's folder, (re)built when older than its sources."""
    folder = Path(folder)
    base = _manifest(folder)["base"]
    source = folder / f"{base}_torch.cpp"
    if not source.exists():
        raise FileNotFoundError(f"{source} is missing: `python -m dsl.torch.cpp_library ... -o {folder}` writes it")
    library = folder / f"lib{base}_torch.so"
    flags = torch_flags()
    return check_shared_cxx_runtime(built_atomically(library, [source, folder / f"{base}.c"],
                                                     lambda out: library_commands(folder, base, out, flags)))


def build_runner(folder: str | os.PathLike) -> Path:
    """`kdsl_aoti_runner` in `folder` (its source written there first), (re)built when older."""
    from dsl.export.aoti_runner import write_runner

    folder = Path(folder)
    source = write_runner(folder)
    runner = folder / "kdsl_aoti_runner"
    flags = torch_flags()
    built = built_atomically(runner, [source], lambda out: [runner_command(source, out, flags)])
    return check_shared_cxx_runtime(built)
