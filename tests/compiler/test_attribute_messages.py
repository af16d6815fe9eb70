"""A misspelt attribute names what the code wrote (`dsl`, or the alias it imported) and the
names it may have meant, at the attribute's range."""

from __future__ import annotations


def test_a_missing_dsl_function_names_the_module_and_what_is_close(analyse):
    a = analyse("""
import dsl
from dsl import Tensor, f32

@dsl.kernel
def k(x: Tensor[f32]):
    x[0] = dsl.shfl(x[0], 1)
""")
    (d,) = a.diagnostics
    assert d.code == "DSL301"
    assert d.message == ("module 'dsl' has no attribute 'shfl'; did you mean "
                         "'dsl.shfl_up', 'dsl.shfl_xor', 'dsl.shfl_idx', 'dsl.shfl_down'?")
    assert (d.range.line, d.range.column) == (a.line_of("dsl.shfl("), 11)


def test_an_alias_is_named_as_written_and_nothing_close_is_offered(analyse):
    a = analyse("""
import dsl as kd
from dsl import Tensor, f32

@kd.kernel
def k(x: Tensor[f32]):
    x[0] = kd.zzzz
""")
    (d,) = a.diagnostics
    assert (d.code, d.message) == ("DSL301", "module 'kd' has no attribute 'zzzz'")
