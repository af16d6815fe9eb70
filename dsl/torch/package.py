"""AOTInductor packages of models that call kdsl operators, built so that they load.

`aoti_compile_and_package(exported, package_path)` is `torch._inductor.aoti_compile_and_package`
with the C++ compiler of `dsl.runtime.torch_cxx.package_cxx`: Inductor compiles the model's
library with `$CXX`, and a compiler that links its own copy of libstdc++ into it (a separate
GCC under `$CXX` did so on one machine) made a package that crashed `aoti_load_package` with a
segmentation fault and no message. Where `$CXX` links the shared runtime nothing changes. The
package is then checked (`check_package_runtime`) before it is returned, so a package that
would still crash is refused here, naming its library, rather than when it is loaded.
"""

from __future__ import annotations

import os
from typing import Any


def aoti_compile_and_package(exported: Any, package_path: str | os.PathLike | None = None, **kwargs: Any) -> str:
    """`torch._inductor.aoti_compile_and_package(exported, package_path=..., **kwargs)`, its
    libraries built by a C++ compiler that links the shared libstdc++ (see the module docstring)."""
    import torch._inductor
    from torch._inductor import config

    from dsl.export.torch_build import check_package_runtime
    from dsl.runtime.torch_cxx import package_cxx

    with config.patch({"cpp.cxx": (package_cxx(),)}):
        package = torch._inductor.aoti_compile_and_package(
            exported, package_path=None if package_path is None else os.fspath(package_path), **kwargs)
    check_package_runtime(package)
    return package
