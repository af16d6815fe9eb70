"""`BuildOptions`: what a compile produces besides the cubin, and how it assembles it.

Kept apart from the pipeline so the runtime can name them without importing MLIR (a
program whose kernels come from the disk cache never loads the compiler).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dsl.compiler.artifacts import Resources


@dataclass(frozen=True)
class BuildOptions:
    """What a build produces besides the cubin, and how it assembles it.

    The editor views want every stage's text and source map; a program's first call wants
    only the PTX and cubin, soonest (`views=False`: the stages then transform one module in
    place and print nothing).
    """

    views: bool = True
    # PTX -> (cubin, resources per kernel, log) for a target; None: the toolkit's ptxas.
    assembler: Callable[[str, str], tuple[bytes, dict[str, Resources], str]] | None = None
    # Called while the toolkit's ptxas runs in its own process, so the caller's own set-up
    # (loading the CUDA driver bindings) overlaps the assembly instead of following it.
    while_assembling: Callable[[], None] | None = None
    # PTX, target -> a wait for what `assembler` gives: starts the assembly and returns at once,
    # so a caller compiling many functions (`dsl.compiler.api.start_compile`) traces the next
    # one while ptxas runs in its own process; a cubin of None: the figures only, the cubin
    # is made on request (`CompiledFunction.assembled_cubin`)
    start_assembly: Callable[[str, str], Callable[[], tuple[bytes | None, dict[str, Resources], str]]] | None = None
    # a marker before each kernel statement for the debugger (`dsl.frontend.debug_steps`): the
    # interpreter's builds in a debug session
    debug_steps: bool = False

    def cache_tag(self) -> str:
        """What distinguishes this build's result in the in-memory cache."""
        tag = "" if self.views else " without views"
        if self.debug_steps:
            tag += " with debug steps"
        if self.assembler is not None:
            tag += f" assembled by {self.assembler.__module__}.{self.assembler.__qualname__}"
        if self.start_assembly is not None:
            tag += f" started by {self.start_assembly.__module__}.{self.start_assembly.__qualname__}"
        return tag
