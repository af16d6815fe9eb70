"""How a launch reads in source: `kernel(args).launch(grid, block, smem=None, stream=None,
cluster=None)`. The one parser of that shape, for the static checks, the ranges of the
tracer's launch diagnostics, the module analysis and the editor's hover."""

from __future__ import annotations

import ast
from dataclasses import dataclass

LAUNCH_PARAMETERS = ("grid", "block", "smem", "stream", "cluster")


@dataclass(frozen=True)
class LaunchSyntax:
    call: ast.Call  # the `.launch(...)` call
    kernel: ast.expr  # what is launched: `k` in `k(...).launch(...)`
    kernel_call: ast.Call | None  # `k(...)`, when the kernel is called in place
    arguments: dict[str, ast.expr]  # the launch's argument nodes by parameter name

    @property
    def kernel_name(self) -> str | None:
        """`k` or `module.k` for a plain or dotted name; None for anything else."""
        parts = []
        node = self.kernel
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        return ".".join([node.id, *reversed(parts)])


def launch_syntax(node: ast.AST) -> LaunchSyntax | None:
    """The launch `node` is, or None when it is not a `.launch(...)` call."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "launch"):
        return None
    target = node.func.value
    arguments = dict(zip(LAUNCH_PARAMETERS, node.args))
    arguments.update({kw.arg: kw.value for kw in node.keywords if kw.arg in LAUNCH_PARAMETERS})
    if isinstance(target, ast.Call):
        return LaunchSyntax(node, target.func, target, arguments)
    return LaunchSyntax(node, target, None, arguments)
