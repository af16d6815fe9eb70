"""A device-debug build's variable records, pointed at their kernel's `DISubprogram`.

The tracer describes a kernel's variables before the lowering has made the kernel's
subprogram (`dsl.frontend.debug_info`), so each record names a stand-in subprogram,
`kdsl.tmp.<kernel>`. Here, after the lowering, every record is pointed at the subprogram
the lowering gave the kernel's `llvm.func`. The bindings cannot build debug attributes, and a
parsed `distinct` attribute is new on every parse, so this is done on the module's text: the
lowered module is printed with its aliases, the records' scopes are rewritten, and the text
is parsed again (a debug build's extra cost; nothing else changes).
"""

from __future__ import annotations

import re
from typing import Any

from mlir import ir

from dsl.frontend.debug_info import STAND_IN_PREFIX

_ALIAS = re.compile(r"^(#[\w$.-]+) = #llvm\.di_subprogram<(.*)>$", re.M)
_NAME = re.compile(r'(?:^|[<,] ?)name = "([^"]*)"')
_LINKAGE = re.compile(r'linkageName = "([^"]*)"')


def bind(module: Any, context: Any) -> Any:
    """`module` with every stand-in scope replaced (the same module when there are none)."""
    text = module.operation.get_asm(enable_debug_info=True)
    if STAND_IN_PREFIX not in text:
        return module
    real: dict[str, str] = {}
    stand_ins: dict[str, str] = {}
    for alias, body in _ALIAS.findall(text):
        name = _NAME.search(body)
        if name is None:
            continue
        if name.group(1).startswith(STAND_IN_PREFIX):
            stand_ins[alias] = name.group(1)[len(STAND_IN_PREFIX):]
        else:
            linkage = _LINKAGE.search(body)
            real[linkage.group(1) if linkage else name.group(1)] = alias
    pattern = {alias: real[kernel] for alias, kernel in stand_ins.items() if kernel in real}
    if not pattern:
        return module
    scope = re.compile("scope = (" + "|".join(re.escape(a) for a in pattern) + r")(?![\w$.-])")
    lines = text.split("\n")
    top = next(i for i, line in enumerate(lines) if not line.startswith("#"))  # the aliases before the module
    # Attributes only locations use (the subprograms among them) are printed after the module,
    # with the location aliases; the records now need them first.
    late = [i for i in range(top, len(lines)) if lines[i].startswith("#") and not lines[i].startswith("#loc")]
    hoisted = [lines[i] for i in late]
    for i in late:
        lines[i] = ""
    moved = []
    for i in range(top):
        if "#llvm.di_local_variable<" in lines[i] and scope.search(lines[i]):
            moved.append(scope.sub(lambda m: f"scope = {pattern[m.group(1)]}", lines[i]))
            lines[i] = ""
    return ir.Module.parse("\n".join([*lines[:top], *hoisted, *moved, *lines[top:]]), context)
