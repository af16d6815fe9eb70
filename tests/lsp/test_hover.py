"""Hover on kernels, launches, kernel body lines and DSL API names.

Fixtures: data/saxpy.py (a kernel with `known_block_size=[256, 1, 1]` and the jit function
that launches it with `block=BLOCK`, BLOCK = 256), data/api_names.py (`dsl.barrier` under
its own name and as the alias `sync`). Expected figures come from the compiler's own report.
"""

from __future__ import annotations

from lsprotocol import types

import dsl
from tests.lsp.conftest import initialize, open_file, pos, report_of, tdi


async def hover(client, uri: str, line: int, character: int) -> str | None:
    result = await client.text_document_hover_async(
        types.HoverParams(text_document=tdi(uri), position=pos(line, character))
    )
    if result is None:
        return None
    assert isinstance(result.contents, types.MarkupContent)
    assert result.contents.kind == types.MarkupKind.Markdown
    return result.contents.value


def _fenced_lines(markdown: str, language: str) -> list[str]:
    start = markdown.index(f"```{language}\n") + len(language) + 4
    return markdown[start : markdown.index("\n```", start)].splitlines()


async def test_hover_on_kernel_def_and_reference(client):
    await initialize(client)
    uri = open_file(client, "saxpy.py")
    report = report_of("saxpy.py").function("saxpy")
    compiled = report.compiled
    kernel = compiled.kernels[0]
    r = kernel.resources
    on_def = await hover(client, uri, 5, 6)  # `saxpy` in `def saxpy(`
    assert on_def is not None
    lines = on_def.splitlines()
    assert lines[0] == f"**@kernel `saxpy`** · {compiled.target}"
    assert f"| `{kernel.symbol}` | {r.registers} | {r.spill_stores} B / {r.spill_loads} B " in on_def
    assert _fenced_lines(on_def, "mlir") == compiled.stages["lowered"].splitlines()[:200] + (
        []
        if len(compiled.stages["lowered"].splitlines()) <= 200
        else [on_def.split("// ... ")[1].join(["// ... ", ""])]
    )
    on_reference = await hover(client, uri, 14, 5)  # `saxpy` in `saxpy(x, y, a, n).launch(`
    assert on_reference == on_def


async def test_hover_on_launch_shows_configuration_and_contract(client):
    await initialize(client)
    uri = open_file(client, "saxpy.py")
    text = await hover(client, uri, 14, 24)  # `launch`
    assert text is not None
    rows = text.splitlines()
    assert rows[0] == "**launch of `saxpy`**"
    assert "| grid | `dsl.cdiv(n, BLOCK)` |" in rows
    assert "| block | `BLOCK` → (256, 1, 1) |" in rows
    assert "| contract | ✓ block [256, 1, 1] keeps `known_block_size=[256, 1, 1]` |" in rows


async def test_hover_on_body_line_shows_its_ir(client):
    await initialize(client)
    uri = open_file(client, "saxpy.py")
    compiled = report_of("saxpy.py").function("saxpy").compiled
    path = str(report_of("saxpy.py").path)
    text = await hover(client, uri, 8, 8)  # `y[i] = a * x[i] + y[i]` (line 9)
    assert text is not None
    lowered = compiled.stages["lowered"].splitlines()
    expected_mlir = [lowered[i] for i in sorted(set(compiled.source_maps["lowered"].ir_lines_for(path, 9)))]
    assert expected_mlir, "the compiler maps line 9 to lowered MLIR"
    assert _fenced_lines(text, "mlir")[: len(expected_mlir)] == expected_mlir[:40]
    ptx = compiled.stages["ptx"].splitlines()
    expected_ptx = [ptx[i] for i in sorted(set(compiled.source_maps["ptx"].ir_lines_for(path, 9)))]
    assert _fenced_lines(text, "ptx")[: len(expected_ptx)] == expected_ptx[:40]


async def test_hover_on_dsl_api_names_shows_their_documentation(client):
    await initialize(client, trusted=False)  # documentation needs no compiler
    uri = open_file(client, "api_names.py")
    doc = (dsl.barrier.__doc__ or "").strip()
    direct = await hover(client, uri, 7, 9)  # `barrier` in `dsl.barrier()`
    alias = await hover(client, uri, 8, 5)  # `sync()`
    assert direct is not None and alias is not None
    assert doc and doc in direct
    assert direct == alias
    tensor = await hover(client, uri, 1, 17)  # `Tensor` in the import
    assert tensor is not None and (dsl.Tensor.__doc__ or "").strip().splitlines()[0] in tensor


async def test_hover_on_each_launch_shows_its_own_specialization(client):
    """data/two_launches.py launches one kernel with block=128 and block=512: each hover reads
    the compiler's record of that launch (its symbol, block and resources), not the first one."""
    await initialize(client)
    uri = open_file(client, "two_launches.py")
    compiled = report_of("two_launches.py").function("run").compiled
    by_block = {k.block: k for k in compiled.kernels}
    for line, block in ((14, (128, 1, 1)), (15, (512, 1, 1))):
        text = await hover(client, uri, line, 16)  # `launch`
        assert text is not None
        rows = text.splitlines()
        assert f"| block | `{block[0]}` → {block} |" in rows
        assert f"| resources | {by_block[block].resources.summary()} |" in rows


async def test_hover_on_a_tensor_core_kernel_gives_its_sass_instruction_mix(client):
    """Beside registers and occupancy: HGMMA counted in the SASS (one per wgmma.mma_async)."""
    await initialize(client)
    uri = open_file(client, "wgmma_tile.py")
    compiled = report_of("wgmma_tile.py").function("tile").compiled
    r = compiled.kernels[0].resources
    assert r.tensor_cores == {"HGMMA": 4}
    on_launch = await hover(client, uri, 24, 5)  # `tile` in `tile(dsl.tensor_map(...`
    assert on_launch is not None
    assert on_launch.splitlines()[0] == "**@kernel `tile`** · sm_90a"
    assert (f"| `tile` | {r.registers} | 0 B / 0 B | 0 + {r.dynamic_smem} B | {r.occupancy:.0%} @ 128 threads "
            "| 4 HGMMA |") in on_launch
