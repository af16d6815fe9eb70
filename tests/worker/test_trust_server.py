"""Trust in the running server: bad trust values, the `workspace/configuration` pull, and a
workspace's own `dsl/` package, which starting the server must never import.

The `session` fixture (tests/worker/server_session.py) is a real server in `tmp_path`."""

from __future__ import annotations

import asyncio

import pytest
from server_session import MARKER_MODULE, Session


@pytest.mark.parametrize("value", ["false", 0])
async def test_a_trust_value_that_is_not_true_runs_nothing(session: Session, value: object) -> None:
    await session.start({"trusted": value, "debounceMs": 0})
    uri = session.open("marks.py", MARKER_MODULE)
    await session.publications(uri, 1)
    await asyncio.sleep(2.0)
    assert not (session.workspace / "executed.marker").exists()
    assert any("untrusted" in m for m in session.messages), session.messages


async def test_the_server_pulls_its_section_and_the_pull_can_withdraw_trust(session: Session) -> None:
    session.pulled = [{"executeUserCode": False}]
    await session.start({"debounceMs": 0}, can_pull=True)
    uri = session.open("marks.py", MARKER_MODULE)
    await session.publications(uri, 1)
    await asyncio.sleep(2.0)
    assert [item.section for p in session.pulls for item in p.items] == ["kdsl"]
    assert not (session.workspace / "executed.marker").exists()


async def test_a_pull_cannot_grant_trust(session: Session) -> None:
    session.pulled = [{"executeUserCode": True, "trusted": True}]
    await session.start({"debounceMs": 0, "trusted": False}, can_pull=True)
    uri = session.open("marks.py", MARKER_MODULE)
    await session.publications(uri, 1)
    await asyncio.sleep(2.0)
    assert session.pulls and not (session.workspace / "executed.marker").exists()


async def test_the_control_a_trusted_pull_runs_the_module(session: Session) -> None:
    session.pulled = [{}]
    await session.start({"debounceMs": 0}, can_pull=True)
    uri = session.open("marks.py", MARKER_MODULE)
    await session.publications(uri, 2)  # the static tier, then the compiler's
    assert (session.workspace / "executed.marker").exists()


async def test_starting_in_a_workspace_with_a_dsl_package_does_not_import_it(session: Session) -> None:
    package = session.workspace / "dsl"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from pathlib import Path\nPath(__file__).parent.with_name('imported.marker').write_text('x')\n"
    )
    await session.start({"debounceMs": 0})
    uri = session.open("kernel.py", "import dsl\n\n@dsl.kernel(known_block_size=(0,))\ndef k():\n    pass\n")
    await session.publications(uri, 2)
    assert any(d.code == "DSL201" for p in session.published for d in p.diagnostics)  # the real compiler
    assert not (session.workspace / "imported.marker").exists()
