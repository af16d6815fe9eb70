"""Only the optional native launch path lives here; everything else is in pyproject.toml.

`dsl.language._jitcall` calls a jit function's launcher without a Python frame;
`dsl.runtime._fastpath` reads the arguments and calls `cuLaunchKernel`. Both are
`optional=True`: without a C compiler the install still succeeds and kdsl launches
through its pure-Python path (same checks, more host time per launch).
"""

from setuptools import Extension, setup


def optional_extension(name: str, source: str, **options: object) -> Extension:
    """A stable-ABI C module whose build may fail without failing the install."""
    return Extension(name, [source], optional=True, py_limited_api=True,
                     define_macros=[("Py_LIMITED_API", "0x030A0000")], **options)


setup(
    ext_modules=[
        optional_extension("dsl.language._jitcall", "dsl/language/_jitcall.c"),
        optional_extension("dsl.runtime._fastpath", "dsl/runtime/_fastpath.c", libraries=["dl"],
                           depends=["dsl/runtime/tensor_reader.h"]),
    ]
)
