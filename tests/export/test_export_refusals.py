"""What cannot be exported exactly is refused, naming the construct and where it is, never
exported as something else: a float the launcher would pass to an integer kernel parameter
(Python's struct refuses it on every call), `**` on run-time floats (Python may answer a
complex number), scalars of types the launcher cannot pack, tensor-map parameters. The
editor's `c` stage shows the same refusal instead of C."""

from __future__ import annotations

import pytest

from dsl.compiler.api import compile_function
from dsl.export import emit_c
from dsl.export.emit_c import c_stage
from dsl.export.exporter import ExportFailed, export_function
from dsl.export.launcher_plan import ExportRefused
from dsl.export.model import Export

SOURCE = """
import dsl
from dsl import Float8E4M3, Float32, Int32, Tensor, f32

@dsl.kernel
def k(x: Tensor[f32], n: Int32):
    x[0] = dsl.cast(n, f32)

@dsl.kernel
def kf(x: Tensor[f32], v: Float32):
    x[0] = v

@dsl.jit
def float_to_int(x: Tensor[f32], s: Float32):
    k(x, s * 2.0).launch(grid=1, block=32)

@dsl.jit
def power(x: Tensor[f32], s: Float32):
    kf(x, s ** 0.5).launch(grid=1, block=32)

@dsl.kernel
def k8(x: Tensor[f32], v: Float8E4M3):
    x[0] = dsl.cast(v, f32)

@dsl.jit
def fp8(x: Tensor[f32], v: Float8E4M3):
    k8(x, v).launch(grid=1, block=32)

@dsl.jit
def fine(x: Tensor[f32], s: Float32):
    kf(x, s * 2.0).launch(grid=1, block=32)
"""


def emitted(namespace: dict, name: str) -> str:
    fn = export_function(namespace[name], name, "kern.py:1", ["sm_90"], [], set())
    return emit_c.source(Export(name, [fn]))


@pytest.mark.parametrize("name, message", [
    ("float_to_int", "float_to_int, the launch at kern.py:14: kernel 'k' gets `s * 2.0`, a float, for an i32 "
                     "parameter: the Python launcher's struct refuses it on every call"),
    ("power", "power, the launch at kern.py:18: `**` on run-time values in the launcher (Python may answer a complex "
              "number)"),
])
def test_a_launch_the_c_cannot_do_exactly_is_refused_with_its_line(jit_module, name, message):
    with pytest.raises(ExportRefused) as info:
        emitted(jit_module(SOURCE), name)
    assert str(info.value) == message


def test_a_scalar_type_the_launcher_cannot_pack_is_refused(jit_module):
    with pytest.raises(ExportFailed, match="fp8: parameter 'v' is a f8e4m3 scalar, which the launcher cannot pass"):
        export_function(jit_module(SOURCE)["fp8"], "fp8", "kern.py:1", ["sm_90"], [], set())


def test_the_editor_stage_shows_the_refusal_or_the_c(jit_module):
    namespace = jit_module(SOURCE)
    refused, _ = compile_function(namespace["power"], (), {}, "sm_90", until="ptx")
    assert c_stage(refused) == ("// power cannot be exported to C: power, the launch at kern.py:18: `**` on "
                                "run-time values in the launcher (Python may answer a complex number)\n")
    fine, _ = compile_function(namespace["fine"], (), {}, "sm_90", until="ptx")
    text = c_stage(fine)
    assert text.startswith("/* fine: the C entry point `kdsl export` writes for this specialization (sm_90) */")
    assert "CUresult fine(CUstream stream, const kdsl_tensor *x, float s);" in text
    assert "const double a2 = ((double)A->s * 2.0);" in text
    kernel, _ = compile_function(namespace["kf"], (), {}, "sm_90", until="ptx")
    assert c_stage(kernel) == "// kf: only jit functions have a C entry point\n"
