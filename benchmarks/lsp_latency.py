"""Language server latency at the size of real files, measured as an editor sees it (not run in CI).

For each file size (`--kernels 10 50 100`: a file of that many kernels) it starts a fresh
`python -m lsp` over stdio with pygls's client, with an empty kernel cache of its own
(`KDSL_CACHE_DIR` in a temporary folder), and reports:
- open -> first diagnostics (instant tier), -> first compiler diagnostics (what tracing found,
  which the run sends before lowering and assembling) and -> the complete compiler report,
  counted from `didOpen` (sent right after `initialized`, as an editor does; the worker's
  start-up is in it) and from the server process's start;
- edit -> diagnostics: one kernel (`k3`) edited per round; the time from `didChange` to the
  compiler tier's publication for that version, minus the debounce (reported separately);
- a line added above every kernel (five rounds, one more comment line at the top each): the
  same time, for an edit that moves every function of the file;
- hover on a kernel name (resources + lowered MLIR), the first one right after an edit;
- whether any publication carried DSL002 (the worker failed: it never should here);
- the server's resident memory after `--rss-edits` more edits (VmRSS from /proc);
- reopen: the document is closed (the server keeps its report), a second server is started
  with the same cache and opens the same text: didOpen -> first compiler diagnostics.

    python benchmarks/lsp_latency.py [--kernels 10 50 100] [--rounds 30] [--debounce-ms 300]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pygls import uris
from pygls.lsp.client import LanguageClient

KERNEL = """
@dsl.kernel
def k{i}(x: Tensor[f32, 1], y: Tensor[f32, 1], n: Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    if i < n:
        y[i] = x[i] * {scale:.1f} + y[i]
"""
EDITED = 3  # the kernel each round edits


def source(kernels: int, scale: float) -> str:
    head = "import dsl\nfrom dsl import Int32, Tensor, f32\n"
    return head + "".join(KERNEL.format(i=i, scale=scale if i == EDITED else 2.0) for i in range(kernels))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Recorder:
    """Publications per (uri, version), with their arrival times, and whether any had DSL002."""

    def __init__(self) -> None:
        self.arrivals: dict[tuple[str, int | None], list[float]] = {}
        self.event = asyncio.Event()
        self.worker_failures = 0

    def record(self, params: types.PublishDiagnosticsParams) -> None:
        self.arrivals.setdefault((params.uri, params.version), []).append(time.perf_counter())
        self.worker_failures += sum(d.code == "DSL002" for d in params.diagnostics)
        self.event.set()

    async def wait(self, uri: str, version: int, count: int, timeout: float = 120.0) -> float:
        """Arrival time of the `count`-th publication for `version` (1: instant tier, 2: compiler)."""
        deadline = time.perf_counter() + timeout
        while len(self.arrivals.get((uri, version), [])) < count:
            self.event.clear()
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                raise TimeoutError(f"no publication #{count} for version {version}")
            await asyncio.wait_for(self.event.wait(), remaining)
        return self.arrivals[(uri, version)][count - 1]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def change(uri: str, version: int, text: str) -> types.DidChangeTextDocumentParams:
    return types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(version=version, uri=uri),
        [types.TextDocumentContentChangeWholeDocument(text)],
    )


async def measure(kernels: int, rounds: int, debounce_ms: int, rss_edits: int) -> dict[str, str]:
    folder = Path(tempfile.mkdtemp(prefix="kdsl-bench-"))
    path = folder / f"kernels_{kernels}.py"
    path.write_text(source(kernels, 1.0))
    uri = uris.from_fs_path(str(path))
    assert uri is not None
    recorder = Recorder()
    os.environ["KDSL_CACHE_DIR"] = str(folder / "cache")  # an empty cache, for the servers
    t0 = time.perf_counter()
    client = await start_server(recorder, debounce_ms)
    opened = time.perf_counter()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, source(kernels, 1.0)))
    )
    first = await recorder.wait(uri, 1, 1)
    compiled = await recorder.wait(uri, 1, 2)  # what tracing found (the run sends it first)
    complete = await recorder.wait(uri, 1, 3)  # the full report, with ptxas's findings

    edited_def = f"def k{EDITED}(x: Tensor[f32, 1], y: Tensor[f32, 1], n: Int32):"
    name_line = source(kernels, 1.0).splitlines().index(edited_def)
    hover_params = types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(name_line, 5))
    latencies, hovers = [], []
    for version in range(2, rounds + 2):
        sent = time.perf_counter()
        client.text_document_did_change(change(uri, version, source(kernels, 1.0 + version)))
        latencies.append(await recorder.wait(uri, version, 2) - sent - debounce_ms / 1000)
        start = time.perf_counter()  # the first hover after an edit parses the new text
        await client.text_document_hover_async(hover_params)
        hovers.append(time.perf_counter() - start)
    for _ in range(max(rounds, 50)):
        start = time.perf_counter()
        await client.text_document_hover_async(hover_params)
        hovers.append(time.perf_counter() - start)

    # a line typed above every kernel moves them all: shifted, not compiled again
    version = rounds + 1
    moved = []
    for extra in range(1, 6):
        version += 1
        sent = time.perf_counter()
        client.text_document_did_change(change(uri, version, "# moved\n" * extra + source(kernels, 1.0 + rounds + 1)))
        moved.append(await recorder.wait(uri, version, 2) - sent - debounce_ms / 1000)

    for _ in range(rss_edits):
        version += 1
        client.text_document_did_change(change(uri, version, source(kernels, float(version))))
    # a hover waits for the compiler's full report of the current version: after edits this
    # fast the run process may be a fresh one, which publishes what tracing found first
    await client.text_document_hover_async(hover_params)
    rss = rss_mb(client._server.pid)  # type: ignore[union-attr]  # the server process pygls started

    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    kept = folder / "cache" / "editor"
    while not any(kept.rglob("*.bin")):  # the report is written in the background
        await asyncio.sleep(0.05)
    await stop_server(client)
    reopened = await reopen(uri, source(kernels, float(version)), debounce_ms)

    ms = 1000.0
    return {
        "open -> first diagnostics (instant tier)": f"{(first - opened) * ms:.0f} ms",
        "open -> first compiler diagnostics (traced)": f"{(compiled - opened) * ms:.0f} ms",
        "open -> complete compiler report (ptxas too)": f"{(complete - opened) * ms:.0f} ms",
        "process start -> first compiler diagnostics": f"{(compiled - t0) * ms:.0f} ms",
        "edit -> diagnostics after debounce, p50": f"{statistics.median(latencies) * ms:.0f} ms",
        "edit -> diagnostics after debounce, p95": f"{percentile(latencies, 0.95) * ms:.0f} ms",
        "edit -> diagnostics after debounce, max": f"{max(latencies) * ms:.0f} ms",
        "hover with lowered MLIR, p50": f"{statistics.median(hovers) * ms:.1f} ms",
        "hover with lowered MLIR, p95": f"{percentile(hovers, 0.95) * ms:.1f} ms",
        "hover right after an edit, max": f"{max(hovers[:rounds]) * ms:.1f} ms",
        "DSL002 (worker failed) publications": str(recorder.worker_failures),
        "line added above every kernel -> diagnostics, median of 5": f"{statistics.median(moved) * ms:.0f} ms",
        "reopen (kept report) -> first compiler diagnostics": f"{reopened * ms:.0f} ms",
        f"server RSS after {rss_edits} more edits": f"{rss:.0f} MiB",
    }


async def start_server(recorder: Recorder, debounce_ms: int) -> LanguageClient:
    client = LanguageClient("kdsl-bench", "1")

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def publish_diagnostics(params: types.PublishDiagnosticsParams) -> None:
        recorder.record(params)

    await client.start_io(sys.executable, "-m", "lsp")
    await client.initialize_async(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(), initialization_options={"debounceMs": debounce_ms}
        )
    )
    client.initialized(types.InitializedParams())
    return client


async def stop_server(client: LanguageClient) -> None:
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()


async def reopen(uri: str, text: str, debounce_ms: int) -> float:
    """didOpen -> first compiler diagnostics in a fresh server that finds the kept report."""
    recorder = Recorder()
    client = await start_server(recorder, debounce_ms)
    opened = time.perf_counter()
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, text)))
    compiled = await recorder.wait(uri, 1, 2)
    await recorder.wait(uri, 1, 3)  # the worker's own analysis, before shutting down
    await stop_server(client)
    return compiled - opened


async def main(sizes: list[int], rounds: int, debounce_ms: int, rss_edits: int) -> None:
    columns = [await measure(n, rounds, debounce_ms, rss_edits) for n in sizes]
    labels = list(columns[0])
    width = max(len(label) for label in labels)
    heads = [f"{n} kernels" for n in sizes]
    print(f"debounce: {debounce_ms} ms (setting, added to every edit); {rounds} edits")
    print(f"{'measure':<{width}}  " + "  ".join(f"{h:>10}" for h in heads))
    print(f"{'-' * width}  " + "  ".join("-" * 10 for _ in heads))
    for label in labels:
        print(f"{label:<{width}}  " + "  ".join(f"{c[label]:>10}" for c in columns))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--kernels", type=int, nargs="+", default=[10, 50, 100], help="file sizes to measure")
    parser.add_argument("--rounds", type=int, default=30, help="edits to time")
    parser.add_argument("--debounce-ms", type=int, default=300)
    parser.add_argument("--rss-edits", type=int, default=200, help="edits before reading the server's memory")
    args = parser.parse_args()
    asyncio.run(main(args.kernels, args.rounds, args.debounce_ms, args.rss_edits))
