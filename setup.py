"""Only the optional native launch path lives here; everything else is in pyproject.toml.

`optional=True`: without a C compiler the install still succeeds and kdsl launches
through its pure-Python path (same checks, more host time per launch).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "dsl.runtime._fastpath",
            ["dsl/runtime/_fastpath.c"],
            optional=True,
            py_limited_api=True,
            define_macros=[("Py_LIMITED_API", "0x030A0000")],
            libraries=["dl"],
        )
    ]
)
