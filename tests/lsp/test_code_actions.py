"""Code actions: the compiler's quick fixes as workspace edits, and compile/run source actions.

Fixture: data/crash.py (`known_block_size=[128, 1]` on line 5 is DSL201, which carries a fix).
"""

from __future__ import annotations

import ast

from lsprotocol import types

from tests.lsp.conftest import diagnostics_for, initialize, open_file, pos, tdi


def params(uri: str, start: types.Position, end: types.Position, only=None) -> types.CodeActionParams:
    return types.CodeActionParams(
        text_document=tdi(uri),
        range=types.Range(start=start, end=end),
        context=types.CodeActionContext(diagnostics=[], only=only),
    )


async def test_quick_fix_for_malformed_known_block_size(client):
    await initialize(client, trusted=False)
    uri = open_file(client, "crash.py")
    (diag,) = await diagnostics_for(client, uri, 1)
    actions = await client.text_document_code_action_async(
        params(uri, pos(4, 30), pos(4, 30), only=[types.CodeActionKind.QuickFix])
    )
    assert len(actions) >= 1
    for action in actions:
        assert action.kind == types.CodeActionKind.QuickFix
        assert list(action.diagnostics) == [diag]
        (edit,) = list(action.edit.changes[uri])
        assert edit.range == diag.range
        fixed = ast.literal_eval(edit.new_text)
        assert len(fixed) == 3 and fixed[:2] == [128, 1]  # the fix keeps what was written and completes it


async def test_source_actions_compile_and_run_the_function_at_the_cursor(client):
    await initialize(client)
    uri = open_file(client, "crash.py")
    actions = await client.text_document_code_action_async(
        params(uri, pos(6, 4), pos(6, 4), only=[types.CodeActionKind.Source])
    )
    assert len(actions) == 2
    raw = client.raw_results[-1]  # the wire form (see conftest.make_client)
    assert raw == [
        {
            "title": "Compile scale",
            "kind": "source",
            "command": {"title": "Compile scale", "command": "kdsl.compile", "arguments": [uri, "scale"]},
        },
        {
            "title": "Run scale on GPU",
            "kind": "source",
            "command": {"title": "Run scale on GPU", "command": "kdsl.run", "arguments": [uri, "scale"]},
        },
    ]
    outside = await client.text_document_code_action_async(
        params(uri, pos(10, 0), pos(10, 0), only=[types.CodeActionKind.Source])
    )
    assert list(outside) == []
