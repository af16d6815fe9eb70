"""The on-disk compile cache: round trips, damaged entries, concurrency, invalidation."""

import importlib.util
import multiprocessing
import os
import sys
import textwrap

from dsl.compiler import disk_cache
from dsl.compiler.disk_cache import CacheEntry
from dsl.runtime.jit_call import compile_entry

KEY = "ab" + "0" * 62


def _entry(cubin=b"\x7fELF cubin bytes"):
    return CacheEntry(name="f", target="sm_90", cubin=cubin, ptx=".version 8.0",
                      launcher="def launch(rt): pass\n", kernels=[{"symbol": "k"}], launch_ranges={}, diagnostics=[])


def test_round_trip(tmp_path):
    assert disk_cache.store(KEY, _entry())
    got = disk_cache.load(KEY)
    assert got == _entry()
    assert os.environ["KDSL_CACHE_DIR"] in str(disk_cache.cache_dir())


def test_truncated_and_corrupted_entries_are_misses(tmp_path):
    disk_cache.store(KEY, _entry())
    path = disk_cache._path(KEY)
    data = path.read_bytes()
    for damaged in (data[: len(data) // 2], data[:-1], data[:10], b"", data[:-3] + b"xyz", b"garbage" + data):
        path.write_bytes(damaged)
        assert disk_cache.load(KEY) is None
        assert not path.exists()  # removed, so the next run rewrites it


def test_disabled_by_environment(monkeypatch):
    monkeypatch.setenv("KDSL_NO_DISK_CACHE", "1")
    assert not disk_cache.store(KEY, _entry())
    assert disk_cache.load(KEY) is None


def test_writes_leave_no_temporary_files():
    disk_cache.store(KEY, _entry())
    disk_cache.store(KEY, _entry(b"other"))
    files = sorted(p.name for p in disk_cache._path(KEY).parent.iterdir())
    assert files == [f"{KEY}.bin"]
    assert disk_cache.load(KEY).cubin == b"other"


def _writer(args):
    cache_dir, i = args
    os.environ["KDSL_CACHE_DIR"] = cache_dir
    for _ in range(30):
        with disk_cache.lock(KEY):
            disk_cache.store(KEY, _entry(bytes([i]) * 5000))
        entry = disk_cache.load(KEY)
        if entry is not None and len(set(entry.cubin)) != 1:
            return False
    return True


def test_concurrent_writers_never_expose_partial_entries():
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(4) as pool:
        assert all(pool.map(_writer, [(os.environ["KDSL_CACHE_DIR"], i) for i in range(8)]))
    assert disk_cache.load(KEY) is not None


def _load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


MODULE = '''
import dsl
from dsl import Constexpr, Int32, Tensor, f32

def scale(v):
    return v * {factor}

@dsl.kernel
def k(x: Tensor[f32], n: Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    if i < n:
        x[i] = scale(x[i])

@dsl.jit
def run(x: Tensor[f32], BLOCK: Constexpr[int] = 128):
    k(x, x.shape[0]).launch(grid=dsl.cdiv(x.shape[0], BLOCK), block=BLOCK)
'''


def test_compiled_entries_are_reused_and_helper_edits_invalidate(tmp_path):
    from dsl.compiler import cache
    from dsl.language.types import TensorSpec, f32

    path = tmp_path / "kmod.py"
    path.write_text(textwrap.dedent(MODULE.format(factor="2.0")))
    mod = _load_module(path, "kmod_v1")
    entry, from_disk, names = compile_entry(mod.run, (TensorSpec(f32, shape=(256,)),), {}, None)
    assert not from_disk and names == ["x"] and entry.cubin and "rt.kernel('k'" in entry.launcher
    assert entry.launch_ranges["k"]["line"] == 16
    cache.MEMORY.clear()
    again, from_disk, _ = compile_entry(mod.run, (TensorSpec(f32, shape=(256,)),), {}, None)
    assert from_disk and again == entry

    path.write_text(textwrap.dedent(MODULE.format(factor="3.0")))  # edit only the helper
    mod2 = _load_module(path, "kmod_v2")
    edited, from_disk, _ = compile_entry(mod2.run, (TensorSpec(f32, shape=(256,)),), {}, None)
    assert not from_disk
    assert "3.0" in edited.ptx or "0f40400000" in edited.ptx
    assert edited.cubin != entry.cubin
