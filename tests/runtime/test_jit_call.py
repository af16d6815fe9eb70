"""How calling a @dsl.jit function reaches its launcher (no GPU): the C `_jitcall` base and
its pure-Python twin must behave alike."""

from __future__ import annotations

import os

import pytest

from dsl.diagnostics import ArgumentError
from dsl.language import decorators


def _bases():
    bases = [decorators._PythonJitCall]
    try:
        from dsl.language._jitcall import JitCall

        bases.append(JitCall)
    except ImportError:
        pass
    return bases


@pytest.fixture(params=_bases(), ids=lambda b: b.__module__.rsplit(".", 1)[-1])
def jit_class(request):
    """JitFunction's behaviour over one base; `_call_slow` records what reaches it."""

    class Jit(request.param):
        _fast = (-1, None)

        def __init__(self):
            self.slow_calls = []

        def _call_slow(self, *args, **kwargs):
            self.slow_calls.append((args, kwargs))
            return "slow"

    return Jit


def test_the_built_module_is_the_one_in_use():
    native = len(_bases()) == 2 and not os.environ.get("KDSL_PURE_PYTHON")
    assert (decorators.JitFunction.__mro__[1].__module__ == "dsl.language._jitcall") == native


def test_matching_positional_call_goes_to_the_launcher(jit_class):
    jit = jit_class()
    jit._fast = (2, lambda a, b, stream=None: ("fast", a, b, stream))
    assert jit(1, 2) == ("fast", 1, 2, None)
    assert jit.slow_calls == []


def test_other_calls_take_the_slow_path(jit_class):
    jit = jit_class()
    assert jit(1, 2) == "slow"  # no specialization yet
    jit._fast = (2, lambda a, b, stream=None: "fast")
    assert jit(1) == "slow" and jit(1, 2, 3) == "slow" and jit(1, 2, stream=5) == "slow"
    assert jit.slow_calls == [((1, 2), {}), ((1,), {}), ((1, 2, 3), {}), ((1, 2), {"stream": 5})]


def test_argument_error_from_the_launcher_means_another_specialization(jit_class):
    def refuses(a, b, stream=None):
        raise ArgumentError("argument 'a' has element type f16")

    jit = jit_class()
    jit._fast = (2, refuses)
    assert jit("x", "y") == "slow"
    assert jit.slow_calls == [(("x", "y"), {})]


def test_other_errors_from_the_launcher_propagate(jit_class):
    def fails(a, stream=None):
        raise RuntimeError("launch failed")

    jit = jit_class()
    jit._fast = (1, fails)
    with pytest.raises(RuntimeError, match="launch failed"):
        jit(1)
    assert jit.slow_calls == []


def test_the_pair_is_swapped_whole_while_other_threads_call(jit_class):
    """A thread switching specializations never lets another pair one launcher with the
    other's arity (which would call a launcher with the wrong number of arguments)."""
    import threading

    jit = jit_class()
    one = (1, lambda a, stream=None: "one")
    two = (2, lambda a, b, stream=None: "two")
    stop = threading.Event()

    def switch():
        while not stop.is_set():
            jit._fast = one
            jit._fast = two

    thread = threading.Thread(target=switch)
    thread.start()
    try:
        results = {jit(1) for _ in range(20000)} | {jit(1, 2) for _ in range(20000)}
    finally:
        stop.set()
        thread.join()
    assert results <= {"one", "two", "slow"}
