"""A C++ program that runs an AOTInductor package with no Python: `kdsl_aoti_runner`.

    kdsl_aoti_runner PACKAGE.pt2 INPUTS OUTPUTS [--library LIB.so]... [--device cuda|cpu] [--model NAME]

It `dlopen`s each library first (`libNAME_torch.so` of `python -m dsl.torch.cpp_library`: its
static initializers register the `torch.ops.kdsl` operators the package calls), reads the
inputs, moves them to the device, runs the package with
`torch::inductor::AOTIModelPackageLoader` and writes the outputs (copied to the host, which
waits for the GPU). Every failure names its step on stderr (exit code 1; 2 for usage).

Tensors travel in a file format simple enough for twenty lines of C++ (`torch.save` needs
the pickler): the line `kdsl-tensors 1 COUNT`, then per tensor the line `DTYPE RANK D0 ...
NBYTES` (torch's dtype name: `float32`, `bfloat16`, `int64`, ...) and its NBYTES bytes,
row-major and contiguous, in the machine's byte order. `write_tensors` and `read_tensors`
are the Python side; `run_package` runs the program on tensors and returns its outputs.
`dsl.export.torch_build.build_runner(DIR)` builds it.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

RUNNER_NAME = "kdsl_aoti_runner.cpp"
DTYPES = ("float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool")

RUNNER = r"""// kdsl_aoti_runner.cpp: runs an AOTInductor package from C++ alone, with kdsl's operator libraries loaded.
// Made by kdsl (dsl/export/aoti_runner.py, which describes the tensor file format); build it with
// dsl.export.torch_build.build_runner(DIR), or g++ -std=c++17 against torch's headers and libraries.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

namespace {

const std::pair<const char *, c10::ScalarType> dtypes[] = {
    {"float32", c10::ScalarType::Float}, {"float64", c10::ScalarType::Double}, {"float16", c10::ScalarType::Half},
    {"bfloat16", c10::ScalarType::BFloat16}, {"int8", c10::ScalarType::Char}, {"int16", c10::ScalarType::Short},
    {"int32", c10::ScalarType::Int}, {"int64", c10::ScalarType::Long}, {"uint8", c10::ScalarType::Byte},
    {"bool", c10::ScalarType::Bool}};

c10::ScalarType dtype_named(const std::string &name)
{
    for (const auto &d : dtypes)
        if (name == d.first)
            return d.second;
    throw std::runtime_error("unknown dtype '" + name + "'");
}

const char *dtype_name(c10::ScalarType type)
{
    for (const auto &d : dtypes)
        if (type == d.second)
            return d.first;
    throw std::runtime_error(std::string("an output has dtype ") + c10::toString(type) +
                             ", which the tensor file format does not name");
}

std::vector<at::Tensor> read_tensors(const std::string &path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw std::runtime_error("cannot open " + path);
    std::string line, magic;
    int version = 0;
    size_t count = 0;
    std::getline(in, line);
    std::istringstream head(line);
    if (!(head >> magic >> version >> count) || magic != "kdsl-tensors" || version != 1)
        throw std::runtime_error(path + " is no kdsl-tensors 1 file (its first line: '" + line + "')");
    std::vector<at::Tensor> out;
    for (size_t i = 0; i < count; ++i) {
        std::getline(in, line);
        std::istringstream fields(line);
        std::string dtype;
        int64_t rank = 0, nbytes = 0;
        if (!(fields >> dtype >> rank) || rank < 0)
            throw std::runtime_error(path + ": tensor " + std::to_string(i) + " has a bad header '" + line + "'");
        std::vector<int64_t> shape(static_cast<size_t>(rank));
        for (auto &s : shape)
            fields >> s;
        if (!(fields >> nbytes))
            throw std::runtime_error(path + ": tensor " + std::to_string(i) + " has a bad header '" + line + "'");
        at::Tensor t = at::empty(shape, at::TensorOptions().dtype(dtype_named(dtype)));
        if (static_cast<int64_t>(t.nbytes()) != nbytes)
            throw std::runtime_error(path + ": tensor " + std::to_string(i) + " says " + std::to_string(nbytes) +
                                     " bytes, but its shape and dtype make " + std::to_string(t.nbytes()));
        if (nbytes > 0 && !in.read(static_cast<char *>(t.data_ptr()), nbytes))
            throw std::runtime_error(path + ": tensor " + std::to_string(i) + " is cut short");
        out.push_back(std::move(t));
    }
    return out;
}

void write_tensors(const std::string &path, const std::vector<at::Tensor> &tensors)
{
    std::ofstream out(path, std::ios::binary);
    if (!out)
        throw std::runtime_error("cannot write " + path);
    out << "kdsl-tensors 1 " << tensors.size() << "\n";
    for (const at::Tensor &tensor : tensors) {
        const at::Tensor t = tensor.to(at::kCPU).contiguous();
        out << dtype_name(t.scalar_type()) << " " << t.dim();
        for (int64_t s : t.sizes())
            out << " " << s;
        out << " " << t.nbytes() << "\n";
        out.write(static_cast<const char *>(t.const_data_ptr()), static_cast<std::streamsize>(t.nbytes()));
    }
    if (!out)
        throw std::runtime_error("writing " + path + " failed");
}

int usage()
{
    std::fprintf(stderr, "usage: kdsl_aoti_runner PACKAGE.pt2 INPUTS OUTPUTS [--library LIB.so]... "
                         "[--device cuda|cpu] [--model NAME]\n");
    return 2;
}

} // namespace

int main(int argc, char **argv)
{
    std::vector<std::string> positional, libraries;
    std::string device = "cuda", model = "model";
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--library" && i + 1 < argc)
            libraries.push_back(argv[++i]);
        else if (arg == "--device" && i + 1 < argc)
            device = argv[++i];
        else if (arg == "--model" && i + 1 < argc)
            model = argv[++i];
        else if (arg.rfind("--", 0) == 0)
            return usage();
        else
            positional.push_back(arg);
    }
    if (positional.size() != 3)
        return usage();
    const char *step = "loading a library";
    try {
        for (const std::string &lib : libraries)
            if (dlopen(lib.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr)
                throw std::runtime_error(std::string("dlopen: ") + dlerror());
        step = "reading the inputs";
        std::vector<at::Tensor> inputs = read_tensors(positional[1]);
        step = "moving the inputs to the device";
        for (at::Tensor &t : inputs)
            t = t.to(c10::Device(device));
        step = "loading the package";
        torch::inductor::AOTIModelPackageLoader loader(positional[0], model);
        step = "running the package";
        const std::vector<at::Tensor> outputs = loader.run(inputs);
        step = "writing the outputs";
        write_tensors(positional[2], outputs);
    } catch (const c10::Error &e) {
        std::fprintf(stderr, "kdsl_aoti_runner: %s failed: %s\n", step, e.what_without_backtrace());
        return 1;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "kdsl_aoti_runner: %s failed: %s\n", step, e.what());
        return 1;
    }
    return 0;
}
"""


def write_runner(folder: str | os.PathLike) -> Path:
    """`folder/kdsl_aoti_runner.cpp`, rewritten only when its text changed (so a build stays valid)."""
    path = Path(folder) / RUNNER_NAME
    if not path.exists() or path.read_text() != RUNNER:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(RUNNER)
    return path


def write_tensors(path: str | os.PathLike, tensors: list[Any]) -> None:
    """Writes torch tensors in the runner's format (see the module docstring)."""
    import torch

    parts = [f"kdsl-tensors 1 {len(tensors)}\n".encode()]
    for t in tensors:
        name = str(t.dtype).rsplit(".", 1)[-1]
        if name not in DTYPES:
            raise TypeError(f"the runner's tensor files hold {', '.join(DTYPES)}, not {t.dtype}")
        data = t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        parts.append(f"{name} {t.dim()}{''.join(f' {s}' for s in t.shape)} {len(data)}\n".encode() + data)
    Path(path).write_bytes(b"".join(parts))


def read_tensors(path: str | os.PathLike) -> list[Any]:
    """The torch tensors of a file in the runner's format."""
    import torch

    data = Path(path).read_bytes()
    line, at = _line(data, 0)
    magic, version, count = line.split()
    if (magic, version) != ("kdsl-tensors", "1"):
        raise ValueError(f"{path} is no kdsl-tensors 1 file")
    out = []
    for _ in range(int(count)):
        line, at = _line(data, at)
        dtype, rank, *rest = line.split()
        shape, nbytes = [int(s) for s in rest[:int(rank)]], int(rest[int(rank)])
        raw = bytearray(data[at:at + nbytes])
        at += nbytes
        kind = getattr(torch, dtype)
        t = torch.frombuffer(raw, dtype=torch.uint8).view(kind) if nbytes else torch.empty(0, dtype=kind)
        out.append(t.reshape(shape))
    return out


def _line(data: bytes, at: int) -> tuple[str, int]:
    end = data.index(b"\n", at)
    return data[at:end].decode(), end + 1


def run_package(runner: str | os.PathLike, package: str | os.PathLike, inputs: list[Any], workdir: str | os.PathLike,
                libraries: Sequence[str | os.PathLike] = (), device: str = "cuda", timeout: float = 600) -> list[Any]:
    """The outputs of running `package` on `inputs` in the runner (a process of its own, with
    no Python); a failure raises `RuntimeError` with the runner's stderr."""
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    ins, outs = work / "inputs.kdsl-tensors", work / "outputs.kdsl-tensors"
    write_tensors(ins, inputs)
    command = [str(runner), str(package), str(ins), str(outs), "--device", device]
    for lib in libraries:
        command += ["--library", str(lib)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited with {done.returncode}:\n{done.stderr.strip()}")
    return read_tensors(outs)
