"""`kdsl/ir` and `kdsl/stages`: stage texts with source maps, and answers for failed compiles.

Fixtures: data/saxpy.py (compiles), data/broken.py (`good` compiles, `bad` has a type error
on line 12 and does not).
"""

from __future__ import annotations

from dsl.diagnostics import SourceRange
from tests.lsp.conftest import initialize, open_file, report_of


def lsp_range(rng: SourceRange) -> dict:
    """ASCII fixtures: LSP positions are the same columns, lines minus one."""
    return {
        "start": {"line": rng.line - 1, "character": rng.column},
        "end": {"line": rng.end_line - 1, "character": rng.end_column},
    }


async def request(client, method: str, params: dict):
    result = await client.protocol.send_request_async(method, params)
    return result._asdict() if hasattr(result, "_asdict") else result


def as_data(value):
    """pygls hands custom results back as namedtuples; compare them as plain data."""
    if hasattr(value, "_asdict"):
        return {k: as_data(v) for k, v in value._asdict().items()}
    if isinstance(value, (list, tuple)):
        return [as_data(v) for v in value]
    return value


async def test_ir_of_each_stage_with_its_source_map(client):
    await initialize(client)
    uri = open_file(client, "saxpy.py")
    compiled = report_of("saxpy.py").function("saxpy").compiled
    for stage, language in (("traced", "mlir"), ("lowered", "mlir"), ("llvm", "llvm"), ("ptx", "ptx")):
        result = as_data(
            await client.protocol.send_request_async(
                "kdsl/ir", {"uri": uri, "function": "saxpy", "stage": stage}
            )
        )
        smap = compiled.source_maps.get(stage)
        assert result == {
            "text": compiled.stages[stage],
            "language": language,
            "sourceMap": [
                {"irLine": ir, "range": lsp_range(rng)} for ir, rng in (smap.entries if smap else [])
            ],
            "diagnostics": [],
        }, stage


async def test_ir_of_a_function_that_failed_to_compile(client):
    await initialize(client)
    uri = open_file(client, "broken.py")
    bad = report_of("broken.py").function("bad")
    assert bad.compiled is None and bad.diagnostics
    result = as_data(
        await client.protocol.send_request_async("kdsl/ir", {"uri": uri, "function": "bad", "stage": "ptx"})
    )
    assert result["language"] == "ptx"
    assert result["sourceMap"] == []
    assert result["text"].startswith("// bad: compile failed\n")
    assert result["diagnostics"] == [
        {"message": d.message, "code": d.code, "range": lsp_range(d.range)} for d in bad.diagnostics
    ]


async def test_stages_lists_every_function(client):
    await initialize(client)
    uri = open_file(client, "broken.py")
    assert report_of("broken.py").function("good").compiled.cubin  # so SASS can be made on request
    result = as_data(await client.protocol.send_request_async("kdsl/stages", {"uri": uri}))
    assert result == {
        "functions": [
            {
                "name": "good",
                "kind": "kernel",
                "range": {"start": {"line": 5, "character": 4}, "end": {"line": 5, "character": 8}},
                "stages": ["traced", "lowered", "llvm", "ptx", "sass"],
            },
            {
                "name": "bad",
                "kind": "kernel",
                "range": {"start": {"line": 10, "character": 4}, "end": {"line": 10, "character": 7}},
                "stages": [],
            },
        ]
    }


async def test_sass_is_disassembled_on_request_with_its_source_map(client):
    await initialize(client)
    uri = open_file(client, "saxpy.py")
    compiled = report_of("saxpy.py").function("saxpy").compiled
    result = as_data(
        await client.protocol.send_request_async("kdsl/ir", {"uri": uri, "function": "saxpy", "stage": "sass"})
    )
    assert result["language"] == "sass" and result["text"] == compiled.sass
    store_lines = [i for i, line in enumerate(result["text"].splitlines()) if "STG" in line]
    mapped = {m["irLine"]: m["range"]["start"]["line"] for m in result["sourceMap"]}
    y_store = next(i for i, line in enumerate(open_source("saxpy.py").splitlines()) if "y[i] =" in line)
    assert store_lines and all(mapped[i] == y_store for i in store_lines)


def open_source(name: str) -> str:
    from pathlib import Path

    return (Path(__file__).parent / "data" / name).read_text()


async def test_a_jit_functions_c_entry_point_is_a_stage(client):
    """The C that `kdsl export` writes for the jit function, translated from its launcher."""
    from dsl.export.emit_c import c_stage

    await initialize(client)
    uri = open_file(client, "two_launches.py")
    compiled = report_of("two_launches.py").function("run").compiled
    stages = as_data(await client.protocol.send_request_async("kdsl/stages", {"uri": uri}))
    (run,) = [f for f in stages["functions"] if f["name"] == "run"]
    assert run["stages"][-2:] == ["launcher", "c"]
    assert all("c" not in f["stages"] for f in stages["functions"] if f["kind"] == "kernel")
    result = as_data(await client.protocol.send_request_async("kdsl/ir", {"uri": uri, "function": "run", "stage": "c"}))
    assert result["language"] == "c" and result["text"] == c_stage(compiled)
    assert "CUresult run(CUstream stream" in result["text"]
