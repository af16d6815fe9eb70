"""Language server latency, measured as an editor sees it (not run in CI).

Starts `python -m lsp` over stdio with pygls's client and reports:
- cold start: process start -> first diagnostics (instant tier) and -> first compiler results;
- edit -> diagnostics: a 10-kernel file, one kernel edited per round; the time from
  `didChange` to the compiler tier's publication for that version, minus the debounce
  (reported separately);
- hover on a kernel name (resources + lowered MLIR), warm;
- the server's resident memory after 200 edits (VmRSS from /proc).

    python benchmarks/lsp_latency.py [--rounds 30] [--debounce-ms 300]
"""

from __future__ import annotations

import argparse
import asyncio
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


def source(scale: float) -> str:
    head = "import dsl\nfrom dsl import Int32, Tensor, f32\n"
    return head + "".join(KERNEL.format(i=i, scale=scale if i == 3 else 2.0) for i in range(10))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Recorder:
    """Publications per (uri, version), with their arrival times."""

    def __init__(self) -> None:
        self.arrivals: dict[tuple[str, int | None], list[float]] = {}
        self.event = asyncio.Event()

    def record(self, params: types.PublishDiagnosticsParams) -> None:
        self.arrivals.setdefault((params.uri, params.version), []).append(time.perf_counter())
        self.event.set()

    async def wait(self, uri: str, version: int, count: int, timeout: float = 60.0) -> float:
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


async def main(rounds: int, debounce_ms: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="kdsl-bench-"))
    path = folder / "ten_kernels.py"
    path.write_text(source(1.0))
    uri = uris.from_fs_path(str(path))
    recorder = Recorder()
    client = LanguageClient("kdsl-bench", "1")

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def publish_diagnostics(params: types.PublishDiagnosticsParams) -> None:
        recorder.record(params)

    t0 = time.perf_counter()
    await client.start_io(sys.executable, "-m", "lsp")
    await client.initialize_async(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(),
            initialization_options={"debounceMs": debounce_ms},
        )
    )
    client.initialized(types.InitializedParams())
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, source(1.0)))
    )
    first = await recorder.wait(uri, 1, 1) - t0
    compiled = await recorder.wait(uri, 1, 2) - t0

    latencies = []
    for version in range(2, rounds + 2):
        sent = time.perf_counter()
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(version=version, uri=uri),
                [types.TextDocumentContentChangeWholeDocument(source(1.0 + version))],
            )
        )
        latencies.append(await recorder.wait(uri, version, 2) - sent - debounce_ms / 1000)

    hovers = []
    name_line = source(1.0).splitlines().index("def k3(x: Tensor[f32, 1], y: Tensor[f32, 1], n: Int32):")
    for _ in range(max(rounds, 50)):
        start = time.perf_counter()
        await client.text_document_hover_async(
            types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(name_line, 5))
        )
        hovers.append(time.perf_counter() - start)

    version = rounds + 1
    for _ in range(200):
        version += 1
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(version=version, uri=uri),
                [types.TextDocumentContentChangeWholeDocument(source(float(version)))],
            )
        )
    await recorder.wait(uri, version, 2)
    pid = client._server.pid  # the server process pygls started
    rss = rss_mb(pid)

    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()

    ms = 1000.0
    rows = [
        ("cold start -> first diagnostics (instant tier)", f"{first * ms:.0f} ms"),
        ("cold start -> first compiler diagnostics", f"{compiled * ms:.0f} ms"),
        ("debounce (setting, added to every edit)", f"{debounce_ms} ms"),
        ("edit -> diagnostics after debounce, p50", f"{statistics.median(latencies) * ms:.0f} ms"),
        ("edit -> diagnostics after debounce, p95", f"{percentile(latencies, 0.95) * ms:.0f} ms"),
        ("hover with lowered MLIR, p50", f"{statistics.median(hovers) * ms:.1f} ms"),
        ("hover with lowered MLIR, p95", f"{percentile(hovers, 0.95) * ms:.1f} ms"),
        ("server RSS after 200 edits", f"{rss:.0f} MiB"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  value\n{'-' * width}  -----")
    for label, value in rows:
        print(f"{label:<{width}}  {value}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30, help="edits and hovers to time")
    parser.add_argument("--debounce-ms", type=int, default=300)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.debounce_ms))
