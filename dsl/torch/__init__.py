"""kdsl jit functions as PyTorch operators: `fn.torch_op`, `dsl.torch.op(fn, outputs=...)`.

An integration layer over jit functions that the rest of `dsl` never imports (it is reached
through `fn.torch_op` or `import dsl.torch`, so `import dsl` never imports torch). It reads,
in the order a registration uses them:

- `signature`: the jit signature as a torch schema (tensors, scalars, Constexpr attributes);
- `facts`: which tensors the kernels write and the launcher's checks, from the compiler;
- `fake`: fake kernels that run those checks on fake tensors at trace time;
- `kernels`: the real kernels, the interpreter on CPU tensors and the GPU on CUDA ones;
- `registry`: `torch.ops.kdsl.<function>`, registered lazily, and naming;
- `functional`: `op`, the form that allocates and returns its outputs (autograd-ready);
- `dynamo`: a plain call of a jit function inside `torch.compile` becomes its operator;
- `cpp_library` (with `cpp_support`): the same operators in C++ over a `kdsl export`, for
  AOTInductor packages run without Python (`python -m dsl.torch.cpp_library`; not imported here);
- `package`: `aoti_compile_and_package`, torch's with a C++ compiler whose packages load.

Where torch is installed, importing this module imports it and installs the `dynamo` stand-in
(which imports `torch._dynamo`: about a second, once). Without torch it still imports, so a
module defining operators imports and lints anywhere; registering one then says what to
install.
"""

from __future__ import annotations

import importlib.util

from dsl.torch.functional import FunctionalOp, op
from dsl.torch.kernels import CaptureError
from dsl.torch.package import aoti_compile_and_package
from dsl.torch.registry import torch_op
from dsl.torch.signature import UnsupportedSignature

if importlib.util.find_spec("torch") is not None:
    from dsl.torch import dynamo

    dynamo.install()

__all__ = ["CaptureError", "FunctionalOp", "UnsupportedSignature", "aoti_compile_and_package", "op", "torch_op"]
