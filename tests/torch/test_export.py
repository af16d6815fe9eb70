"""`torch.export` of a module that calls kdsl operators (in place and functional), on CPU
tensors: the exported graph holds the operators, and running it gives what eager gives.
(AOTInductor packages of such modules, served from C++: `test_aoti.py`.)"""

from __future__ import annotations

import numpy as np

import dsl
from tests.torch import programs


def test_an_exported_module_keeps_the_kdsl_operators_and_runs_as_eager(torch):
    saxpy = dsl.torch.op(programs.run_saxpy, outputs={"y": lambda x: torch.ones_like(x)}, name="saxpy_exported")

    class Model(torch.nn.Module):
        def forward(self, x, y):
            programs.run_saxpy.torch_op(x, y, 2.0)  # in place: y = 2 x + y
            return saxpy(y, 0.5) * 3.0  # functional: 3 (0.5 y + 1)

    x = torch.arange(40, dtype=torch.float32)
    exported = torch.export.export(Model(), (x, torch.ones(40)))
    targets = [str(n.target) for n in exported.graph.nodes if n.op == "call_function"]
    assert "kdsl.run_saxpy.default" in targets and any("saxpy_exported" in t for t in targets)
    y = torch.ones(40)
    got = exported.module()(x, y)
    y_model = 2.0 * np.arange(40, dtype=np.float32) + 1.0
    np.testing.assert_array_equal(y.numpy(), y_model)  # the in-place write reaches the caller
    np.testing.assert_array_equal(got.numpy(), 3.0 * (0.5 * y_model + 1.0))
