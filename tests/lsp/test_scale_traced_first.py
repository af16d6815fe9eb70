"""Opening a file of many kernels shows what the tracer found before ptxas is done.

The run process traces every function before it lowers any, and, with several functions
still to lower and assemble, sends the report as tracing left it (`lsp.run_module.serve`);
the server publishes it for that version, and the full report replaces it. Here one kernel
has a type error (DSL301, found by tracing) and one spills registers (DSL501, found by ptxas):
the first compiler publication has the first and not the second, the last has both.
"""

from __future__ import annotations

from lsprotocol import types

from tests.kernel_sources import spilling_kernel
from tests.lsp.conftest import initialize, open_file, wait_until

SMALL = """
@dsl.kernel
def k{i}(x: Tensor[f32], n: Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    if i < n:
        x[i] = x[i] * {i}.0
"""

SOURCE = "import dsl\nfrom dsl import Int32, Tensor, f32\n" + "".join(SMALL.format(i=i) for i in range(6)) + """
@dsl.kernel
def mistyped(x: Tensor[f32], n: Int32):
    x[0] = n + "one"

""" + spilling_kernel("spills")


def _codes(params: types.PublishDiagnosticsParams) -> set[str]:
    return {str(d.code) for d in params.diagnostics}


async def test_the_tracers_findings_come_first_and_the_full_report_replaces_them(client):
    await initialize(client)
    uri = open_file(client, "many_kernels.py", SOURCE)

    def ours() -> list[types.PublishDiagnosticsParams]:
        return [p for p in client.published if p.uri == uri and p.version == 1]  # type: ignore[attr-defined]

    await wait_until(lambda: any("DSL501" in _codes(p) for p in ours()), timeout=60, what="the full report")
    published = ours()
    assert "DSL301" not in _codes(published[0])  # the instant tier does not trace
    compiler = [p for p in published if _codes(p) & {"DSL301", "DSL501"}]
    assert "DSL301" in _codes(compiler[0]) and "DSL501" not in _codes(compiler[0])  # traced: no ptxas yet
    assert _codes(compiler[-1]) >= {"DSL301", "DSL501"}
    (mistyped,) = [d for d in compiler[0].diagnostics if d.code == "DSL301"]
    assert [d.range for d in compiler[-1].diagnostics if d.code == "DSL301"] == [mistyped.range]
    assert mistyped.range.start.line == SOURCE.splitlines().index('    x[0] = n + "one"')


SLOW = """
@dsl.kernel
def slow(x: Tensor[f32], n: Int32):
    t = dsl.thread_idx.x
    vals = [x[t * 64 + j] for j in dsl.static_range(64)]
    for r in dsl.static_range(80):
        vals = [vals[j] * vals[(j + r + 1) % 64] + 1.0 for j in dsl.static_range(64)]
    x[t] = sum(vals)
"""


async def test_inlay_hints_on_open_come_from_what_tracing_found(client):
    """The tracer's facts are complete before anything is lowered: a request made once the
    traced report is in is answered from it, before the slow kernel's lowering and ptxas end."""
    await initialize(client)
    text = SOURCE + SLOW
    uri = open_file(client, "many_kernels_slow.py", text)

    def ours() -> list[types.PublishDiagnosticsParams]:
        return [p for p in client.published if p.uri == uri and p.version == 1]  # type: ignore[attr-defined]

    await wait_until(lambda: any("DSL301" in _codes(p) for p in ours()), timeout=60, what="the traced report")
    line = text.splitlines().index("    t = dsl.thread_idx.x")
    found = await client.text_document_inlay_hint_async(types.InlayHintParams(
        text_document=types.TextDocumentIdentifier(uri), range=types.Range(start=types.Position(line, 0),
                                                                            end=types.Position(line + 1, 0))))
    complete = any("DSL501" in _codes(p) for p in ours())
    assert not complete  # answered before the full report
    assert found is not None
    assert [(h.position.line, h.label) for h in found] == [(line, ": i32"), (line + 1, ": list[64 x f32]"),
                                                          (line + 1, ": int")]
    await wait_until(lambda: any("DSL501" in _codes(p) for p in ours()), timeout=60, what="the full report")
