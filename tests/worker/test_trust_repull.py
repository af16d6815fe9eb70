"""`workspace/didChangeConfiguration` with `settings: null` makes the server pull its section
again; that pull, like the first, may withdraw trust and never grant it."""

from __future__ import annotations

import asyncio

from lsprotocol import types
from server_session import MARKER_MODULE, Session

UNTRUSTED = "compiling runs your code, which is off in an untrusted workspace"


async def until(condition, what: str, timeout: float = 30.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def compile_message(session: Session, uri: str) -> str:
    params = types.ExecuteCommandParams(command="kdsl.compile", arguments=[uri, "missing"])
    result = await session.client.workspace_execute_command_async(params)
    return result["message"] if isinstance(result, dict) else result.message


def changed_without_settings(session: Session) -> None:
    session.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))


async def test_null_settings_pull_again_and_the_pull_withdraws_trust(session: Session) -> None:
    session.pulled = [{}]
    await session.start({"debounceMs": 0}, can_pull=True)
    uri = session.open("marks.py", MARKER_MODULE)
    await session.publications(uri, 2)  # the static tier, then the compiler's: the module ran
    assert await compile_message(session, uri) != UNTRUSTED
    published = len(session.published)
    session.pulled = [{"executeUserCode": False}]
    changed_without_settings(session)
    await until(lambda: len(session.pulls) == 2, "the second pull")
    assert await compile_message(session, uri) == UNTRUSTED
    await until(lambda: len(session.published) > published, "the documents re-checked")
    assert [item.section for p in session.pulls for item in p.items] == ["kdsl", "kdsl"]


async def test_a_second_pull_cannot_grant_trust(session: Session) -> None:
    session.pulled = [{}]
    await session.start({"debounceMs": 0, "trusted": False}, can_pull=True)
    uri = session.open("marks.py", MARKER_MODULE)
    await session.publications(uri, 1)
    session.pulled = [{"executeUserCode": True, "trusted": True}]
    changed_without_settings(session)
    await until(lambda: len(session.pulls) == 2, "the second pull")
    assert await compile_message(session, uri) == UNTRUSTED
    assert not (session.workspace / "executed.marker").exists()


async def test_without_the_capability_null_settings_change_nothing(session: Session) -> None:
    await session.start({"debounceMs": 0, "trusted": False})
    uri = session.open("marks.py", MARKER_MODULE)
    await session.publications(uri, 1)
    changed_without_settings(session)
    assert await compile_message(session, uri) == UNTRUSTED
    assert session.pulls == []
