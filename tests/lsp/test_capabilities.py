"""`kdsl/capabilities` over stdio: the stages, targets and setting defaults a client builds on.

The answer depends on no document; its expected value is written out in full, so a change
to the stage table, the targets or a default shows up here as a diff. The last test uses
data/saxpy.py (compiles) to check that `kdsl/ir` and `kdsl/stages` follow the same table.
"""

from __future__ import annotations

from dsl.compiler.stages import TEXT_STAGES
from lsp.features.ir import ir_response, stages_response
from tests.lsp.conftest import DATA, initialize, read, report_of

EXPECTED = {
    "stages": [
        {"name": "traced", "language": "mlir", "extension": ".mlir", "binary": False, "needsViews": True,
         "madeBy": "pipeline"},
        {"name": "lowered", "language": "mlir", "extension": ".mlir", "binary": False, "needsViews": True,
         "madeBy": "pipeline"},
        {"name": "llvm", "language": "llvm", "extension": ".ll", "binary": False, "needsViews": True,
         "madeBy": "pipeline"},
        {"name": "ptx", "language": "ptx", "extension": ".ptx", "binary": False, "needsViews": False,
         "madeBy": "pipeline"},
        {"name": "sass", "language": "sass", "extension": ".sass", "binary": False, "needsViews": True,
         "madeBy": "on request"},
        {"name": "launcher", "language": "python", "extension": ".py", "binary": False, "needsViews": True,
         "madeBy": "launcher"},
        {"name": "c", "language": "c", "extension": ".c", "binary": False, "needsViews": True, "madeBy": "launcher"},
    ],
    "targets": ["sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"],
    "defaultTarget": "sm_90",
    "settings": {
        "target": "",
        "worker.timeoutSeconds": 10.0,
        "worker.memoryLimitMb": 4096,
        "worker.sandbox": "standard",
        "debounceMs": 300,
        "executeUserCode": True,
        "inlayHints.lineCost": False,
        "device": 0,
    },
    "choices": {
        "target": ["", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"],
        "worker.sandbox": ["standard", "strict"],
    },
}


async def capabilities(client) -> dict:
    """The answer as it came over the wire (pygls would turn dotted keys into `_1`, `_2`)."""
    await client.protocol.send_request_async("kdsl/capabilities", None)
    return client.raw_results[-1]


async def test_capabilities_lists_stages_targets_and_defaults(client):
    await initialize(client)
    assert await capabilities(client) == EXPECTED


async def test_capabilities_are_the_defaults_whatever_the_client_set(client):
    """Settings the client sent change the server's settings, not the defaults it serves."""
    await initialize(client, target="sm_80", sandbox="strict", trusted=False)
    assert await capabilities(client) == EXPECTED


def test_ir_and_stages_offer_only_the_text_stages_in_table_order():
    report, text = report_of("saxpy.py"), read("saxpy.py")
    functions = stages_response(report, text, str(DATA / "saxpy.py"))["functions"]
    assert [f["name"] for f in functions] == ["saxpy", "run_saxpy"]
    for fn in functions:
        assert fn["stages"] and fn["stages"] == [name for name in TEXT_STAGES if name in fn["stages"]], fn
    cubin = ir_response(report, text, "saxpy", "cubin")
    assert (cubin["language"], cubin["text"].splitlines()[0]) == (
        "plaintext",
        f"// saxpy: no 'cubin' stage (available: {', '.join(report.function('saxpy').compiled.available_stages)})",
    )
