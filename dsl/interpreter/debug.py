"""`breakpoint()` inside a kernel: pdb, with the kernel's variables as the threads hold them.

The tracer turns `breakpoint()` into a marker carrying the values of the names in scope
(`dsl.frontend.intrinsic_ops.trace_breakpoint`); the GPU compile drops it. When the
interpreter reaches it, pdb opens at the kernel's own source line, with every name bound:

- run-time values as a NumPy array over the threads that reached the breakpoint, in thread
  order (with `threads`, their (x, y, z) thread indices, and `blocks`, their block indices),
  or as a plain NumPy scalar when exactly one thread reached it (`if i == 7: breakpoint()`);
- compile-time values (Constexpr parameters, Python numbers) as they are;
- tensor parameters as the caller's arrays, shared arrays are not shown.

`c` continues the kernel, `q` ends the program (`bdb.BdbQuit`, as Python's own breakpoint does).
A breakpoint is reached once per batch of blocks that reaches it.
`PYTHONBREAKPOINT=0` turns kernel breakpoints off, as it turns off Python's own.
"""

from __future__ import annotations

import bdb
import os
import pdb
import sys
from typing import Any

import numpy as np

from dsl.interpreter.lanes import Lanes
from dsl.interpreter.memory import Pointer


def kernel_namespace(values: dict[str, Any], types: dict[str, Any], constants: dict[str, Any],
                     tensors: dict[str, str], st: Lanes) -> dict[str, Any]:
    """Each name as the user reads it at this point (see the module docstring)."""
    active = np.flatnonzero(st.active())
    one = active.size == 1
    out: dict[str, Any] = dict(constants)
    for name, value in values.items():
        t = types[name]
        data = np.broadcast_to(np.asarray(value), (st.n, t.width) if t.width else (st.n,))[active]
        if t.is_bf16:
            data = data.astype(np.float32)
        out[name] = data[0] if one else data
    for name, param in tensors.items():
        arg = st.args.get(param)
        if isinstance(arg, Pointer) and arg.region.array is not None:
            out[name] = arg.region.array
    coords = [st.coordinates(int(g)) for g in active]
    out["threads"] = coords[0][0] if one else [c[0] for c in coords]
    out["blocks"] = coords[0][1] if one else [c[1] for c in coords]
    return out


def stop_at_breakpoint(info: Any, values: dict[str, Any], types: dict[str, Any], constants: dict[str, Any],
                       tensors: dict[str, str], st: Lanes) -> None:
    """Opens pdb at the kernel's source line with its variables bound."""
    if os.environ.get("PYTHONBREAKPOINT") == "0":
        return
    namespace = kernel_namespace(values, types, constants, tensors, st)
    where = info.where
    count = int(np.count_nonzero(st.active()))
    sys.stdout.write(f"kernel breakpoint: {count} thread{'s' if count != 1 else ''} "
                     f"({', '.join(n for n in namespace if n not in ('threads', 'blocks'))}; threads, blocks)\n")
    filename = where.file if where is not None else "<kernel>"
    line = where.line if where is not None else 1
    code = compile("\n" * (line - 1) + "pass", filename, "exec")  # pdb shows the kernel's own source
    debugger = _KernelPdb(stdin=sys.stdin, stdout=sys.stdout)
    debugger.use_rawinput = sys.stdin is sys.__stdin__
    debugger.run(code, namespace, namespace)
    if debugger.quit_asked:  # the program ends, as it does at Python's own breakpoint()
        raise bdb.BdbQuit


class _KernelPdb(pdb.Pdb):
    """pdb that remembers a `q` (Bdb.run swallows the quit that ends its code)."""

    quit_asked = False

    def do_quit(self, arg: str) -> Any:
        self.quit_asked = True
        return super().do_quit(arg)

    do_q = do_exit = do_quit

    def do_EOF(self, arg: str) -> Any:
        self.quit_asked = True
        return super().do_EOF(arg)
