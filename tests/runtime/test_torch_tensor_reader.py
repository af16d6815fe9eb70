"""The native launch path's C++ reader of torch tensors (`dsl/runtime/_torch_tensors.cpp`),
built here against the installed torch and checked against torch's own answers.

No GPU needed: the reader reads CPU tensors the same way (the launch path then refuses them
for their device). The launches that use it are tests/runtime/test_gpu_argument_refusals.py's.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from dsl.runtime import torch_tensors  # noqa: E402


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Any:
    if shutil.which("g++") is None and shutil.which("c++") is None:
        pytest.skip("no C++ compiler to build the reader")
    folder = tmp_path_factory.mktemp("native")
    return torch_tensors.load(torch_tensors.build(folder / torch_tensors.library_path().name))


def torch_says(t: Any, reader: Any) -> tuple:
    ptr, shape, strides, _, device_type, index = torch_tensors.torch_reading(t)
    return ptr, shape, strides, reader.scalar_type(t.dtype), device_type, index


def test_it_reads_what_torch_says_of_views_dtypes_and_parameters(reader):
    base = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).view(2, 3, 4, 5)
    tensors = [base, base[1], base[:, 1:, ::2], base.transpose(1, 3), base.to(memory_format=torch.channels_last),
               torch.ones(3).expand(4, 3), base.flatten()[7:], torch.tensor(2.5), torch.empty(0, 3),
               torch.nn.Parameter(torch.randn(4, 4)), torch.randn(4, 4).requires_grad_()]
    tensors += [torch.ones(6, dtype=getattr(torch, d)) for d in torch_tensors.DTYPES
                if isinstance(getattr(torch, d, None), torch.dtype)]
    for t in tensors:
        assert reader.read(t) == torch_says(t, reader), (t.shape, t.stride(), t.dtype)
    codes = [reader.scalar_type(getattr(torch, d)) for d in ("float32", "float16", "bfloat16", "int8", "bool")]
    assert len(set(codes)) == 5 and min(codes) >= 0


def test_it_refuses_what_is_not_a_plain_dense_tensor(reader):
    class Marked(torch.Tensor):
        pass

    nested = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], layout=torch.jagged)
    others = [torch.ones(3).as_subclass(Marked), torch.eye(3).to_sparse(), nested, 3, 2.0, None, [1, 2],
              torch.float32, object()]
    for value in others:
        assert reader.read(value) is None, type(value)
    assert reader.scalar_type("float32") == -1 and reader.scalar_type(None) == -1


def test_the_tensor_pointer_is_found_only_where_every_probe_agrees(reader):
    a, b = torch.empty(2), torch.empty(3)
    with pytest.raises(RuntimeError, match="no place"):
        reader.configure(torch.Tensor, torch.nn.Parameter, [(a, b._cdata)], {})
    with pytest.raises(RuntimeError, match="no place"):
        reader.configure(torch.Tensor, torch.nn.Parameter, [], {})
    with pytest.raises(TypeError, match="probe"):
        reader.configure(torch.Tensor, torch.nn.Parameter, [(3, 4)], {})
    # a failed configure keeps the reader as it was
    assert reader.read(a) == torch_says(a, reader)


def test_a_reader_that_disagrees_with_torch_is_refused(reader):
    class Off:
        """A reader whose pointers are one element off."""

        def read(self, t: Any) -> tuple:
            ptr, *rest = reader.read(t)
            return (ptr + 4, *rest)

        scalar_type = staticmethod(reader.scalar_type)

    torch_tensors.check(reader, [torch.ones(3)])
    with pytest.raises(RuntimeError, match="where torch says"):
        torch_tensors.check(Off(), [torch.ones(3)])


def test_it_is_kept_per_torch_and_python_and_built_once(reader, tmp_path, monkeypatch):
    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path))
    path = torch_tensors.library_path()
    assert path.parent == tmp_path / "native"
    assert torch.__version__.replace("+", "_") in path.name
    built = torch_tensors.build(path)
    stamp = built.stat().st_mtime_ns
    assert torch_tensors.build(path).stat().st_mtime_ns == stamp  # there: not rebuilt
    assert [p.name for p in path.parent.iterdir() if not p.name.endswith(".lock")] == [path.name]
    stale, fresh = path.parent / f".{path.name}-killed", path.parent / f".{path.name}-building"
    for leftover in (stale, fresh):
        leftover.write_bytes(b"")
    os.utime(stale, (0, 0))  # a build killed long ago, and one under way in another process
    path.unlink()
    torch_tensors.build(path)
    assert path.exists() and not stale.exists() and fresh.exists()
    monkeypatch.setenv("KDSL_NO_DISK_CACHE", "1")
    assert not torch_tensors.library_path().is_relative_to(tmp_path)  # the cache off: a private folder


def test_install_is_a_no_op_without_the_native_path(monkeypatch):
    from dsl.runtime import native

    if native.fastpath is not None:
        monkeypatch.setenv("KDSL_NO_TORCH_READER", "1")
    assert torch_tensors.install() is None


def test_a_failing_build_names_its_command_and_output(tmp_path, monkeypatch):
    source = tmp_path / "_torch_tensors.cpp"
    source.write_text("#error this reader does not compile\n")
    monkeypatch.setattr(torch_tensors, "SOURCES", (source, Path(torch_tensors.SOURCES[1])))
    with pytest.raises(RuntimeError, match="(?s)reader failed:.*_torch_tensors.cpp.*does not compile"):
        torch_tensors.build(tmp_path / "out.so")
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith((".out.so", "out.so"))]  # no leftovers
