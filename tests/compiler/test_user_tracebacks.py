"""An error raised at a jit call shows the user's frames, not the compiler's or the runtime's
(KDSL_FULL_TRACEBACK=1 keeps them, for kdsl's own developers)."""

from __future__ import annotations

import traceback

import numpy as np
import pytest

import dsl
from dsl.diagnostics import ArgumentError
from dsl.language.decorators import user_frames
from dsl.runtime.driver import NoGPUError

SOURCE = """
import dsl
from dsl import Tensor, f32

@dsl.kernel
def fill(x: Tensor[f32]):
    x[dsl.thread_idx.x] = 1.0

@dsl.jit
def run(x: Tensor[f32]):
    fill(x).launch(grid=1, block=32)
"""


def _frames(err: BaseException) -> list[str]:
    return [frame.filename for frame in traceback.extract_tb(err.__traceback__)]


@pytest.fixture
def run_fn(tmp_path, monkeypatch):
    path = tmp_path / "user_mod.py"
    path.write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    module = importlib.import_module("user_mod")
    yield module.run
    import sys

    sys.modules.pop("user_mod", None)


def _kdsl_internal(files: list[str]) -> list[str]:
    root = dsl.__file__.rsplit("/", 1)[0]
    return [f for f in files if f.startswith(root + "/compiler") or f.startswith(root + "/runtime")
            or f.startswith(root + "/frontend")]


def test_a_refused_argument_shows_no_kdsl_frames(run_fn, monkeypatch):
    monkeypatch.delenv("KDSL_FULL_TRACEBACK", raising=False)
    with pytest.raises((ArgumentError, NoGPUError)) as info:
        run_fn(np.zeros(4, dtype=np.float32))  # a host array (or no GPU here): refused before anything runs
    files = _frames(info.value)
    assert files[0] == __file__  # the call in this test
    assert _kdsl_internal(files) == []


def test_full_tracebacks_keep_kdsl_frames_when_asked(run_fn, monkeypatch):
    monkeypatch.setenv("KDSL_FULL_TRACEBACK", "1")
    with pytest.raises((ArgumentError, NoGPUError)) as info:
        run_fn(np.zeros(4, dtype=np.float32))
    assert _kdsl_internal(_frames(info.value)) != []


def test_user_frames_keeps_only_frames_outside_kdsl():
    def user_level():
        from dsl.targets import get_target

        get_target("sm_1")  # raises inside kdsl

    try:
        user_level()
    except ValueError as err:
        kept = traceback.extract_tb(user_frames(err.__traceback__))
    assert [f.name for f in kept] == ["test_user_frames_keeps_only_frames_outside_kdsl", "user_level"]
