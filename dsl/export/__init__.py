"""`kdsl export`: jit functions as a C library that needs nothing but the CUDA driver.

The flow, module by module: `exporter` compiles a jit function's specializations for each
target; `launcher_plan` reads each one's generated Python launcher back into a plan;
`c_expr` and `variant_c` translate the plan into C that does what the launcher does;
`emit_c` writes the header, the launch-configuration header and the source around it
(with `c_support`, the C every export carries); `build` compiles the source with gcc and
loads it into Python (`dsl.load_export`). `c_types` holds the type tables they share.
"""

from dsl.export.build import ExportCallError, load_export
from dsl.export.launcher_plan import ExportRefused

__all__ = ["ExportCallError", "ExportRefused", "load_export"]
