"""Signature help for intrinsics, kernel calls and `.launch(...)`.

Fixture: data/typed_values.py (kernel `row_sum(x, out, n, WIDTH)`, jit `run_row_sum`),
opened with one line replaced by the call being written.
"""

from __future__ import annotations

import inspect

from lsprotocol import types

import dsl
from tests.lsp.conftest import initialize, open_file, pos, read, tdi

KERNEL_LINE, JIT_LINE = 8, 27  # 0-based: `row = dsl.block_idx.x`, the launch line


async def help_at(client, line: int, typed: str, text: str | None = None) -> types.SignatureHelp | None:
    lines = (text or read("typed_values.py")).split("\n")
    lines[line] = typed
    uri = open_file(client, "typed_values.py", "\n".join(lines))
    return await client.text_document_signature_help_async(
        types.SignatureHelpParams(text_document=tdi(uri), position=pos(line, len(typed))))


def shown(found: types.SignatureHelp | None) -> list[tuple[str, list[str], int | None]]:
    """(label, parameter labels, active parameter) per signature."""
    assert found is not None
    return [(s.label, [str(p.label) for p in s.parameters or []], s.active_parameter) for s in found.signatures]


async def test_intrinsic_parameters_follow_the_argument_being_written(client):
    await initialize(client, trusted=False)
    first = await help_at(client, KERNEL_LINE, "    row = dsl.shfl_xor(")
    assert shown(first) == [("shfl_xor(value, mask, width=32)", ["value", "mask", "width=32"], 0)]
    assert first is not None and first.signatures[0].documentation == inspect.cleandoc(dsl.shfl_xor.__doc__ or "")
    third = await help_at(client, KERNEL_LINE, "    row = dsl.shfl_xor(acc, 1, ")
    assert shown(third)[0][2] == 2
    by_name = await help_at(client, KERNEL_LINE, "    row = dsl.atomic_add(out, 0, 1.0, scope=")
    assert shown(by_name) == [('atomic_add(ref, index, value, order="relaxed", scope="device")',
                               ["ref", "index", "value", 'order="relaxed"', 'scope="device"'], 4)]


async def test_aliases_and_casts_resolve(client):
    await initialize(client, trusted=False)
    text = read("typed_values.py").replace("import dsl\n", "import dsl\nfrom dsl import shfl_down as down\n", 1)
    alias = await help_at(client, KERNEL_LINE + 1, "    row = down(acc, ", text)
    assert shown(alias) == [("down(value, delta, width=32)", ["value", "delta", "width=32"], 1)]
    cast = await help_at(client, KERNEL_LINE, "    row = f32(")
    assert shown(cast) == [("f32(value)", ["value"], 0)]
    math = await help_at(client, KERNEL_LINE, "    row = dsl.exp(")
    assert shown(math) == [("exp(x)", ["x"], 0)]  # `*args` at run time; the stub names it


async def test_kernel_call_shows_parameter_dsl_types(client):
    await initialize(client, trusted=False)
    found = await help_at(client, JIT_LINE, "    row_sum(x, out, ")
    assert shown(found) == [(
        "row_sum(x: Tensor[f32, 2], out: Tensor[f32, 1], n: i32, WIDTH: Constexpr[int])",
        ["x: Tensor[f32, 2]", "out: Tensor[f32, 1]", "n: i32", "WIDTH: Constexpr[int]"], 2)]
    jit = await help_at(client, 29, "run_row_sum(", read("typed_values.py") + "\n")  # at module level
    assert shown(jit) == [("run_row_sum(x: Tensor[f32, 2], out: Tensor[f32, 1], BLOCK: Constexpr[int] = 32)",
                           ["x: Tensor[f32, 2]", "out: Tensor[f32, 1]", "BLOCK: Constexpr[int] = 32"], 0)]


async def test_launch_parameters(client):
    await initialize(client, trusted=False)
    label = "launch(grid, block, smem=None, stream=None, cluster=None)"
    params = ["grid", "block", "smem=None", "stream=None", "cluster=None"]
    start = await help_at(client, JIT_LINE, "    row_sum(x, out, x.shape[1], 128).launch(")
    assert shown(start) == [(label, params, 0)]
    assert start is not None
    docs = [p.documentation for p in start.signatures[0].parameters or []]
    assert docs[1] == "Threads per block: an int or up to three ints; kept against the kernel's `known_block_size`."
    keyword = await help_at(client, JIT_LINE, "    row_sum(x, out, x.shape[1], 128).launch(rows, cluster=")
    assert shown(keyword) == [(label, params, 4)]
    multi_line = read("typed_values.py").replace(
        "    row_sum(x, out, x.shape[1], 128).launch(grid=rows, block=BLOCK)",
        "    row_sum(x, out, x.shape[1], 128).launch(\n        grid=rows,\n        block=BLOCK)")
    second = await help_at(client, JIT_LINE + 2, "        block=", multi_line)
    assert shown(second) == [(label, params, 1)]


async def test_no_help_outside_a_known_call(client):
    await initialize(client, trusted=False)
    assert await help_at(client, KERNEL_LINE, "    row = (") is None
    assert await help_at(client, KERNEL_LINE, "    row = print(") is None
    assert await help_at(client, KERNEL_LINE, '    row = ")(" + "') is None
