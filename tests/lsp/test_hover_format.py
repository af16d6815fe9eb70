"""Hover answers in the format the client takes (`textDocument.hover.contentFormat`): plain
text for a client that lists only plain text, markdown for every other (fixture:
data/saxpy.py; the expected text is the server's own markdown, made from the compiler's
report of the fixture, turned into plain text by `markdown_to_plaintext`).
"""

from __future__ import annotations

import pytest
from lsprotocol import types
from pygls import uris

from lsp.features.hover import function_hover, markdown_to_plaintext
from tests.lsp.conftest import ROOT, TEST_OPTIONS, open_file, pos, report_of, tdi

PLAIN, MARKDOWN = types.MarkupKind.PlainText, types.MarkupKind.Markdown


async def start(client, content_format: list[types.MarkupKind] | None) -> None:
    hover = None if content_format is None else types.HoverClientCapabilities(content_format=content_format)
    await client.initialize_session(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(text_document=types.TextDocumentClientCapabilities(hover=hover)),
            root_uri=uris.from_fs_path(str(ROOT)),
            initialization_options=TEST_OPTIONS,
        )
    )


async def hover_on_kernel(client) -> types.MarkupContent:
    uri = open_file(client, "saxpy.py")
    result = await client.text_document_hover_async(types.HoverParams(text_document=tdi(uri), position=pos(5, 6)))
    assert result is not None and isinstance(result.contents, types.MarkupContent)
    return result.contents


async def test_a_plain_text_client_gets_plain_text(client):
    await start(client, [PLAIN])
    contents = await hover_on_kernel(client)
    markdown = function_hover(report_of("saxpy.py").function("saxpy"))  # type: ignore[arg-type]
    assert contents.kind == PLAIN
    assert contents.value == markdown_to_plaintext(markdown)
    lines = contents.value.splitlines()
    assert lines[0].startswith("@kernel saxpy · sm_")  # no emphasis, no backticks
    assert lines[2] == "kernel  registers  spills (st/ld)  smem (static + dynamic)  occupancy  tensor cores (SASS)"
    assert "```" not in contents.value and "|---" not in contents.value
    assert any(line.lstrip().startswith("gpu.module") for line in lines)  # the MLIR, as it is


@pytest.mark.parametrize(
    "content_format",
    [None, [MARKDOWN], [MARKDOWN, PLAIN], [PLAIN, MARKDOWN], []],
    ids=["not said", "markdown", "markdown first", "plain text first", "empty list"],
)
async def test_every_other_client_gets_markdown(client, content_format):
    await start(client, content_format)
    contents = await hover_on_kernel(client)
    assert contents.kind == MARKDOWN
    assert contents.value == function_hover(report_of("saxpy.py").function("saxpy"))  # type: ignore[arg-type]


def test_markdown_to_plaintext_keeps_code_and_drops_markup():
    markdown = (
        "**launch of `k`**\n\n| | |\n|---|---|\n| grid | `dsl.cdiv(n, 256)` |\n| block | `256` → (256, 1, 1) |\n\n"
        "lowered:\n```mlir\n%0 = `quoted` **kept**\n```\n- `DSL202` block differs"
    )
    assert markdown_to_plaintext(markdown).splitlines() == [
        "launch of k",
        "",
        "grid  dsl.cdiv(n, 256)",
        "block  256 → (256, 1, 1)",
        "",
        "lowered:",
        "%0 = `quoted` **kept**",
        "- DSL202 block differs",
    ]


def test_a_kernel_hover_shows_its_body_before_its_constants():
    """The Hopper GEMM's lowered MLIR opens with over a hundred constants: they are folded
    into one line, so the visible part of the hover is the kernel's work."""
    from pathlib import Path

    import dsl
    from lsp.features.hover import MAX_IR_LINES

    path = Path(ROOT) / "examples" / "gemm_hopper.py"
    fn = dsl.analyze_source(path.read_text(), str(path)).function("gemm_kernel")
    lowered = fn.compiled.stages["lowered"].splitlines()
    constants = [line for line in lowered if ".constant" in line and " = " in line]
    assert len(constants) > 50
    shown = function_hover(fn).split("```mlir\n", 1)[1].split("\n```", 1)[0].splitlines()
    assert not any(".constant" in line for line in shown)
    folded = [line.strip() for line in shown if "constants not shown" in line]
    assert folded == [f"// {len(constants)} constants not shown (Show IR for the full text)"]
    assert shown.index(next(line for line in shown if "constants not shown" in line)) < 10  # where they began
    assert len(shown) <= MAX_IR_LINES + 1
    assert any("mbarrier.init" in line for line in shown[:30])  # the kernel's own work is in view
