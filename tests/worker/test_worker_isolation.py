"""Each module is isolated from the next: no patch, forged report or lifted limit carries over."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lsp.sandbox import strict_available
from lsp.worker import AnalysisWorker

POISON = (
    "import dsl\n"
    "from dsl.compiler.artifacts import ModuleReport\n"
    "dsl.analyze_source = lambda s, p, **k: ModuleReport(p)\n"
)
BAD = "x = 1\nraise RuntimeError('really bad')\n"


@pytest.mark.parametrize("keep_warm", [4, 0], ids=["editor", "lint"])
async def test_a_patched_compiler_does_not_reach_the_next_file(keep_warm: int) -> None:
    worker = AnalysisWorker(timeout=10.0, memory_mb=2048, keep_warm=keep_warm, parallel=1)
    try:
        assert (await worker.analyze(POISON, "/project/a_poison.py")).all_diagnostics() == []
        report = await worker.analyze(BAD, "/project/b_bad.py")
        assert [(d.code, d.range.line) for d in report.all_diagnostics()] == [("DSL001", 2)]
    finally:
        await worker.close()


async def test_a_patched_compiler_does_not_reach_the_next_version_of_the_same_file() -> None:
    """A warm run process that saw its compiler patched is retired: the next version forks afresh."""
    worker = AnalysisWorker(timeout=10.0, memory_mb=2048, keep_warm=4)
    try:
        await worker.analyze(POISON, "/project/a.py")
        poisoned = worker.run_pids["/project/a.py"]
        report = await worker.analyze(BAD, "/project/a.py")
        assert [d.code for d in report.all_diagnostics()] == ["DSL001"]
        assert worker.run_pids["/project/a.py"] != poisoned
    finally:
        await worker.close()


async def test_a_clean_version_reuses_the_warm_run_process() -> None:
    worker = AnalysisWorker(timeout=10.0, memory_mb=2048, keep_warm=4)
    try:
        await worker.analyze("x = 1\n", "/project/a.py")
        first = worker.run_pids["/project/a.py"]
        await worker.analyze("x = 2\n", "/project/a.py")
        assert worker.run_pids["/project/a.py"] == first
    finally:
        await worker.close()


FORGER = """
import json, os
forged = {"path": "/project/victim.py", "functions": [], "diagnostics": [{
    "code": "DSL201", "severity": "error", "message": "FORGED",
    "range": {"file": "/project/victim.py", "line": 1, "column": 0, "end_line": 1, "end_column": 1},
    "related": [], "fixes": []}]}
lines = b"".join(
    json.dumps({"id": i, "seq": i, "report": forged}).encode() + b"\\n" for i in range(1, 40))
for name in os.listdir("/proc/self/fd"):
    try:
        os.write(int(name), lines)
    except OSError:
        pass
"""


@pytest.mark.parametrize("keep_warm", [4, 0], ids=["editor", "lint"])
async def test_a_forged_report_reaches_neither_the_protocol_nor_another_file(keep_warm: int) -> None:
    worker = AnalysisWorker(timeout=10.0, memory_mb=2048, keep_warm=keep_warm)
    try:
        own = await worker.analyze(FORGER, "/project/forger.py")
        # It may have forged its own report, but that report speaks only about itself.
        assert all(d.range.file == "/project/forger.py" for d in own.all_diagnostics())
        for _ in range(3):
            victim = await worker.analyze("x = 1\n", "/project/victim.py")
            assert victim.all_diagnostics() == []
    finally:
        await worker.close()


async def test_the_run_holds_none_of_the_workers_pipes(tmp_path: Path) -> None:
    worker = AnalysisWorker(timeout=10.0, memory_mb=2048)
    out = tmp_path / "fds"
    module = (
        "import contextlib, os\n"
        "inodes = []\n"
        "for name in os.listdir('/proc/self/fd'):\n"
        "    with contextlib.suppress(OSError):\n"
        "        inodes.append(os.stat(f'/proc/self/fd/{name}').st_ino)\n"
        f"open({str(out)!r}, 'w').write(' '.join(map(str, inodes)))\n"
    )
    try:
        await worker.start()
        transport = worker._proc._transport  # type: ignore[union-attr]
        pipes = [transport.get_pipe_transport(fd).get_extra_info("pipe") for fd in (0, 1, 2)]
        ours = {os.fstat(pipe.fileno()).st_ino for pipe in pipes}  # stdin, stdout, stderr of the worker
        assert (await worker.analyze(module, str(tmp_path / "m.py"))).all_diagnostics() == []
        held = {int(x) for x in out.read_text().split()}
        assert ours and not ours & held
    finally:
        await worker.close()


LIFT = """
import resource
soft, hard = resource.getrlimit(resource.RLIMIT_AS)
assert soft == hard != resource.RLIM_INFINITY, (soft, hard)
try:
    resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
except (ValueError, OSError):
    pass
else:
    raise SystemExit("lifted")
buffer = bytearray(3 * 1024**3)
"""


async def test_the_memory_limit_cannot_be_lifted_from_inside(worker: AnalysisWorker) -> None:
    (diagnostic,) = (await worker.analyze(LIFT, "/project/lift.py")).all_diagnostics()
    assert diagnostic.code == "DSL002"
    assert "ran out of memory (limit 2048 MB)" in diagnostic.message


NETWORK = """
import socket
client = socket.create_connection(("127.0.0.1", {port}), timeout=2)
client.close()
"""


@pytest.mark.skipif(strict_available() is not None, reason=f"no user namespaces here: {strict_available()}")
async def test_strict_sandbox_has_no_network() -> None:
    import socket

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    module = NETWORK.format(port=port)
    try:
        for sandbox, connects in (("standard", True), ("strict", False)):
            worker = AnalysisWorker(timeout=10.0, memory_mb=2048, sandbox=sandbox)
            try:
                report = await worker.analyze(module, "/project/net.py")
            finally:
                await worker.close()
            failed = [(d.code, d.range.line) for d in report.all_diagnostics()][:1]
            assert failed == ([] if connects else [("DSL001", 3)]), (sandbox, report.all_diagnostics())
    finally:
        listener.close()
