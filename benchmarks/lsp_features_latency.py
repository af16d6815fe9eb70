"""Completion, signature help and inlay hint latency on a file of 100 kernels, as an editor
sees it (not run in CI). Target (DESIGN.md §8): completion and inlay hints p95 <= 50 ms.

Starts `python -m lsp` over stdio with pygls's client, opens a file of N kernel + jit pairs,
waits for the compiler's first report, then per round, in a different kernel each time:
types `dsl.` on a line of a kernel body (an incremental `didChange`, so the document does
not parse) and times the completion right after it; does the same for `x.` (a tensor's
members) and for `dsl.shfl_xor(v, ` (signature help); puts the line back and times the inlay
hints of a screen (60 lines around the kernel) and of the whole document. Every edit starts
a (debounced) compile in the worker, so requests meet the compiler running beside them, as
while typing. The first request of each kind (jedi and the stubs loading) is reported apart; the file's
first screen of inlay hints is asked for on open, as an editor does.

    python benchmarks/lsp_features_latency.py [--kernels 100] [--rounds 60] [--line-cost]

`--line-cost` also times the line-cost hints (`inlayHints.lineCost`): the first request for
a screen runs nvdisasm for its kernels, the next ones read the figures kept per cubin.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls import uris
from pygls.lsp.client import LanguageClient

KERNEL = """
@dsl.kernel
def k{i}(x: Tensor[f32, 1], y: Tensor[f32, 1], n: Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    acc = 0.0
    for j in range(i, n, 4096):
        acc += x[j]
    v = dsl.shfl_xor(acc, 1)
    if i < n:
        y[i] = x[i] * {scale:.1f} + v


@dsl.jit
def run{i}(x: Tensor[f32, 1], y: Tensor[f32, 1], BLOCK: Constexpr[int] = 256):
    n = x.shape[0]
    k{i}(x, y, n).launch(grid=dsl.cdiv(n, BLOCK), block=BLOCK)
"""
HEAD = "import dsl\nfrom dsl import Constexpr, Int32, Tensor, f32\n"


def source(kernels: int) -> str:
    return HEAD + "".join(KERNEL.format(i=i, scale=2.0 + i) for i in range(kernels))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Published:
    """Counts publications per version, to know when the compiler tier has answered."""

    def __init__(self) -> None:
        self.count: dict[int | None, int] = {}
        self.codes: list[str] = []  # of the latest publication
        self.event = asyncio.Event()

    def record(self, params: types.PublishDiagnosticsParams) -> None:
        self.count[params.version] = self.count.get(params.version, 0) + 1
        self.codes = sorted({str(d.code) for d in params.diagnostics})
        self.event.set()

    async def wait(self, version: int, count: int, timeout: float = 120.0) -> None:
        deadline = time.perf_counter() + timeout
        while self.count.get(version, 0) < count:
            self.event.clear()
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError(f"no publication #{count} for version {version}")
            await asyncio.wait_for(self.event.wait(), left)


def replace_line(uri: str, version: int, line: int, old: str, new: str) -> types.DidChangeTextDocumentParams:
    rng = types.Range(start=types.Position(line, 0), end=types.Position(line, len(old)))
    return types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(version=version, uri=uri),
        [types.TextDocumentContentChangePartial(range=rng, text=new)],
    )


async def timed(request: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = await request
    return time.perf_counter() - start, result


async def measure(kernels: int, rounds: int, line_cost: bool) -> dict[str, list[float]]:
    folder = Path(tempfile.mkdtemp(prefix="kdsl-bench-"))
    path = folder / f"kernels_{kernels}.py"
    text = source(kernels)
    path.write_text(text)
    uri = uris.from_fs_path(str(path))
    assert uri is not None
    lines = text.split("\n")
    published = Published()
    client = LanguageClient("kdsl-bench", "1")

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def publish_diagnostics(params: types.PublishDiagnosticsParams) -> None:
        published.record(params)

    await client.start_io(sys.executable, "-m", "lsp")
    markdown = [types.MarkupKind.Markdown]
    capabilities = types.ClientCapabilities(text_document=types.TextDocumentClientCapabilities(
        completion=types.CompletionClientCapabilities(
            completion_item=types.ClientCompletionItemOptions(documentation_format=markdown)),
        signature_help=types.SignatureHelpClientCapabilities(
            signature_information=types.ClientSignatureInformationOptions(documentation_format=markdown))))
    # a cold compile of a hundred kernels can take longer than the default 10 s on a loaded machine
    options: dict[str, Any] = {"inlayHints": {"lineCost": line_cost}, "worker": {"timeoutSeconds": 120}}
    await client.initialize_async(types.InitializeParams(capabilities=capabilities, initialization_options=options))
    client.initialized(types.InitializedParams())
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, text)))
    await published.wait(1, 2)  # the compiler's first publication: what tracing found
    assert not published.codes, f"the file should compile cleanly, got {published.codes}"

    doc = types.TextDocumentIdentifier(uri)
    whole = types.Range(start=types.Position(0, 0), end=types.Position(len(lines), 0))
    results: dict[str, list[float]] = {}

    def add(name: str, seconds: float) -> None:
        results.setdefault(name, []).append(seconds)

    # an editor asks for the first screen's hints as it opens the file
    first_screen = types.Range(start=types.Position(0, 0), end=types.Position(60, 0))
    seconds, _ = await timed(client.text_document_inlay_hint_async(types.InlayHintParams(doc, first_screen)))
    add("first inlay hints, on open", seconds)
    # the rounds below measure edits of a compiled file: the complete report comes third
    await published.wait(1, 3)

    version = 1

    def edit(line: int, old: str, new: str) -> None:
        nonlocal version
        version += 1
        client.text_document_did_change(replace_line(uri, version, line, old, new))

    async def taken() -> None:
        """Returns once the server has handled every edit sent (it answers in order)."""
        await client.protocol.send_request_async("kdsl/text", {"uri": uri})

    async def typed_request(kernel: int, typed: str, flush: bool, name: str) -> None:
        """Types `typed` over a line of kernel `kernel`, times the request `name`, puts it back."""
        top = lines.index(f"def k{kernel}(x: Tensor[f32, 1], y: Tensor[f32, 1], n: Int32):")
        target, original = top + 1, lines[top + 1]  # `    i = dsl.block_idx.x * ...`
        edit(target, original, typed)
        if flush:
            await taken()
        at = types.Position(target, len(typed))
        if "(" in typed:
            seconds, result = await timed(client.text_document_signature_help_async(
                types.SignatureHelpParams(text_document=doc, position=at)))
            assert result is not None and result.signatures, (typed, result)
        else:
            seconds, result = await timed(client.text_document_completion_async(
                types.CompletionParams(text_document=doc, position=at)))
            assert result is not None and result.items, (typed, result)
        add(name, seconds)
        edit(target, typed, original)

    async def screen_hints(kernel: int, flush: bool, name: str) -> None:
        top = lines.index(f"def k{kernel}(x: Tensor[f32, 1], y: Tensor[f32, 1], n: Int32):")
        edit(top + 1, lines[top + 1], lines[top + 1])  # an edit that changes nothing, as a keystroke undone
        if flush:
            await taken()
        screen = types.Range(start=types.Position(max(top - 20, 0), 0), end=types.Position(top + 40, 0))
        seconds, hints = await timed(client.text_document_inlay_hint_async(types.InlayHintParams(doc, screen)))
        assert hints, f"no inlay hints on the screen of k{kernel}: {hints!r}"
        add(name, seconds)

    requests = (("    i = dsl.", "completion after `dsl.`"), ("    i = x.", "completion after `x.`"),
                ("    i = dsl.shfl_xor(acc, ", "signature help in `dsl.shfl_xor(`"))
    for r in range(rounds + 1):
        first = r == 0
        for k, (typed, what) in enumerate(requests):
            kernel = (r * 37 + 11 * k) % kernels
            await typed_request(kernel, typed, False, ("first " if first else "") + what + ", right after the edit")
            if not first:
                await typed_request((kernel + 1) % kernels, typed, True, what + ", once the edit is taken")
        kernel = (r * 37 + 5) % kernels
        await screen_hints(kernel, False, ("first " if first else "") + "inlay hints, a screen, right after an edit")
        if not first:
            await screen_hints((kernel + 1) % kernels, True, "inlay hints, a screen, once the edit is taken")
            await taken()
            seconds, _ = await timed(client.text_document_inlay_hint_async(types.InlayHintParams(doc, whole)))
            add(f"inlay hints, the whole document ({len(lines)} lines)", seconds)
        if line_cost and r < 5:
            await screen_hints(kernel, True, "line-cost inlay hints, a screen seen before")

    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return results


async def main(kernels: int, rounds: int, line_cost: bool) -> None:
    results = await measure(kernels, rounds, line_cost)
    ms = 1000.0
    width = max(len(name) for name in results)
    print(f"{kernels} kernel + jit pairs ({len(source(kernels).splitlines())} lines), {rounds} rounds; "
          "'right after the edit' includes the server's handling of that edit (its instant checks)")
    print(f"{'request':<{width}}  {'n':>4}  {'p50':>8}  {'p95':>8}  {'max':>8}")
    for name, values in results.items():
        print(f"{name:<{width}}  {len(values):>4}  {statistics.median(values) * ms:>6.1f}ms  "
              f"{percentile(values, 0.95) * ms:>6.1f}ms  {max(values) * ms:>6.1f}ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--line-cost", action="store_true", help="switch inlayHints.lineCost on and time it")
    args = parser.parse_args()
    asyncio.run(main(args.kernels, args.rounds, args.line_cost))
