"""Per-line SASS cost: counted from nvdisasm's line info, shown as inlay hints when
`inlayHints.lineCost` is on, and printed by `kdsl ir --stage sass --line-cost`.

Fixture: data/typed_values.py (kernel `row_sum`: global loads in a loop, a shared array).
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from lsprotocol import types

from dsl.compiler import toolchain
from dsl.compiler.source_maps import LineCost, sass_line_costs
from tests.lsp.conftest import DATA, ROOT, initialize, open_file, pos, read, report_of, tdi, wait_until

needs_nvdisasm = pytest.mark.skipif(toolchain.nvdisasm_path() is None, reason="nvdisasm is not installed")

SASS = """
//--------------------- .text.k                   --------------------------
k:
.text.k:
\t//## File "/src/k.py", line 7
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   S2R R7, SR_TID.X ;
\t//## File "/src/k.py", line 8
        /*0020*/                   LDG.E R2, desc[UR4][R2.64] ;
        /*0030*/               @P0 STS [R7], R2 ;
        /*0040*/                   LDSM.16.M88.4 R8, [R7] ;
        /*0050*/                   HMMA.16816.F32.BF16 R12, R8, R4, R12 ;
        /*0060*/                   HFMA2.MMA R9, -RZ, RZ, 2, 0 ;
\t//## File "/src/helper.py", line 3
        /*0070*/              @!P1 RED.E.ADD.F32.FTZ.RN.STRONG.GPU desc[UR4][R2.64], R5 ;
\t//## File "/src/k.py", line 8
        /*0080*/                   STG.E desc[UR4][R4.64], R7 ;
\t//## File "/src/k.py", line 6
        /*0090*/                   EXIT ;
.L_x_0:
        /*00a0*/                   BRA `(.L_x_0);
        /*00b0*/                   NOP;
"""


def test_each_line_counts_its_instructions_by_kind():
    """HFMA2.MMA is a half-precision FMA, not a tensor-core op; the padding after EXIT (the
    branch to itself and the NOPs) is no line's cost; a predicate does not hide an opcode."""
    assert sass_line_costs(SASS) == [
        LineCost("/src/helper.py", 3, instructions=1, global_memory=1),
        LineCost("/src/k.py", 6, instructions=1),
        LineCost("/src/k.py", 7, instructions=2),
        LineCost("/src/k.py", 8, instructions=6, global_memory=2, shared_memory=2, tensor_core=1),
    ]
    assert [c.summary() for c in sass_line_costs(SASS)] == [
        "1 SASS: 1 global", "1 SASS", "2 SASS", "6 SASS: 2 global, 2 shared, 1 tensor-core"]


def _kernel_costs() -> dict[int, LineCost]:
    compiled = report_of("typed_values.py").function("row_sum").compiled
    assert compiled is not None and compiled.sass is not None
    path = str(DATA / "typed_values.py")
    return {c.line: c for c in sass_line_costs(compiled.sass) if c.file == path}


@needs_nvdisasm
async def test_line_cost_hints_end_each_kernel_line_when_switched_on(client):
    await initialize(client, inlayHints={"lineCost": True})
    uri = open_file(client, "typed_values.py")
    found = await client.text_document_inlay_hint_async(types.InlayHintParams(
        text_document=tdi(uri), range=types.Range(start=pos(0, 0), end=pos(40, 0))))
    assert found is not None
    lines = read("typed_values.py").split("\n")
    costs = _kernel_costs()
    assert costs and set(costs) <= set(range(8, 23))  # the kernel's lines, nothing of the jit function
    at_line_ends = [(h.position.line, h.position.character, h.label) for h in found
                    if h.position.character == len(lines[h.position.line])]
    headers = {"for": " (loop control, carried values)", "if": " (condition, branch, merged values)"}
    said = {line: headers.get(lines[line - 1].split()[0], "") for line in costs}
    assert any(said.values())  # the fixture's `for` and `if` lines say what their count is
    assert at_line_ends == [(line - 1, len(lines[line - 1]), costs[line].summary() + said[line])
                            for line in sorted(costs)]
    assert any(c.global_memory for c in costs.values()) and any(c.shared_memory for c in costs.values())


@needs_nvdisasm
async def test_line_cost_hints_move_with_the_kernel(client):
    """A line added above: the kernel's result is moved, not compiled again, and its cubin is
    made from the moved PTX, so every figure stands one line lower (not where it was)."""
    await initialize(client, inlayHints={"lineCost": True})
    uri = open_file(client, "typed_values.py")
    whole = types.Range(start=pos(0, 0), end=pos(41, 0))

    async def cost_labels() -> list[tuple[int, str]]:
        found = await client.text_document_inlay_hint_async(types.InlayHintParams(text_document=tdi(uri), range=whole))
        return [(h.position.line, str(h.label)) for h in found or [] if "SASS" in str(h.label)]

    before = await cost_labels()
    assert before
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text="# moved\n" + read("typed_values.py"))],
    ))
    published = client.published  # type: ignore[attr-defined]
    await wait_until(lambda: len([p for p in published if p.uri == uri and p.version == 2]) >= 2,
                     what="the compiler tier's diagnostics of version 2")
    assert await cost_labels() == [(line + 1, label) for line, label in before]


async def test_line_cost_is_off_by_default(client):
    await initialize(client)
    uri = open_file(client, "typed_values.py")
    found = await client.text_document_inlay_hint_async(types.InlayHintParams(
        text_document=tdi(uri), range=types.Range(start=pos(0, 0), end=pos(40, 0))))
    assert found is not None and not any("SASS" in str(h.label) for h in found)


def _kdsl_ir(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lsp.cli", "ir", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


@needs_nvdisasm
def test_kdsl_ir_prints_the_same_per_line_summary():
    path = str(DATA / "typed_values.py")
    done = _kdsl_ir(f"{path}::row_sum", "--stage", "sass", "--line-cost")
    assert done.returncode == 0, done.stderr
    lines = read("typed_values.py").split("\n")
    table = done.stdout.rstrip("\n").split("\n")
    costs = _kernel_costs()
    expected = ["// SASS per source line (all instructions: global memory, shared memory, tensor-core)"] + [
        f"// {line:>5}  {costs[line].summary():<32}  {lines[line - 1].strip()}" for line in sorted(costs)]
    assert table[-len(expected):] == expected


def test_line_cost_needs_the_sass_stage():
    done = _kdsl_ir(str(DATA / "typed_values.py"), "--stage", "ptx", "--line-cost")
    assert done.returncode == 2
    assert "--line-cost needs --stage sass" in done.stderr
