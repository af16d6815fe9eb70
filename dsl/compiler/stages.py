"""The stage table: every view of a compiled function, in pipeline order.

One record per stage says what the pipeline, the `kdsl ir` command, the cache, the language
server (`kdsl/stages`, `kdsl/capabilities`) and the VS Code extension need to know of it:
its editor language, the file extension of its text, whether it is binary, whether it is only
made when a build keeps its views, and who makes it. The module imports no MLIR, so the
server and the CLI read it without loading the compiler.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Stage:
    name: str
    language: str  # the editor's language id of its text ("" for a binary stage)
    extension: str  # for a dumped text (or binary)
    binary: bool = False
    needs_views: bool = True  # made only when the build keeps its views (editor, `kdsl ir`, lint)
    made_by: str = "pipeline"  # "pipeline"; "on request" (SASS: the disassembler takes ~1 s); "launcher" (from
    # the jit function's launch facts: the Python launcher, and the C entry point `kdsl export` writes)

    def to_dict(self) -> dict[str, object]:
        return {("needsViews" if k == "needs_views" else "madeBy" if k == "made_by" else k): v
                for k, v in asdict(self).items()}


STAGES: tuple[Stage, ...] = (
    Stage("traced", "mlir", ".mlir"),
    Stage("lowered", "mlir", ".mlir"),
    Stage("llvm", "llvm", ".ll"),
    Stage("ptx", "ptx", ".ptx", needs_views=False),
    Stage("cubin", "", ".cubin", binary=True, needs_views=False),
    Stage("sass", "sass", ".sass", made_by="on request"),
    Stage("launcher", "python", ".py", made_by="launcher"),
    Stage("c", "c", ".c", made_by="launcher"),  # the launcher translated to C (`dsl.export.emit_c.c_stage`)
)
BY_NAME = {stage.name: stage for stage in STAGES}
TEXT_STAGES = tuple(stage.name for stage in STAGES if not stage.binary)  # what can be shown or printed


def language_of(name: str) -> str:
    stage = BY_NAME.get(name)
    return stage.language if stage is not None and stage.language else "plaintext"


def ordered(names: list[str]) -> list[str]:
    """`names` in pipeline order (unknown names last, as given)."""
    order = {stage.name: i for i, stage in enumerate(STAGES)}
    return sorted(names, key=lambda n: order.get(n, len(order)))
