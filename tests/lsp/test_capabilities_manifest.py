"""The VS Code extension's static declarations equal what `kdsl/capabilities` serves, and it
sends every setting the server reads.

VS Code reads setting defaults and enums from vscode-extension/package.json before any
server runs, so they cannot come from the server; these tests keep them from drifting. The
extension reads its own fallbacks from the same package.json (`settings.ts`), so the three
agree: `lsp.settings.Settings`, the served answer and the manifest.

What the extension sends (at start-up, in the `workspace/configuration` answer and in
`didChangeConfiguration`, one object for all three) is written down in
vscode-extension/src/test/data/server-settings.json, which the extension's own test
(settings.test.ts) checks it sends. Here every key of `lsp.settings.CLIENT_KEYS` must be in
it: a setting added to the server and not to the extension fails here.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from lsp.capabilities import SETTING_FIELDS, capabilities_response
from lsp.settings import CLIENT_KEYS, Settings, parse_settings
from tests.lsp.conftest import ROOT

MANIFEST = json.loads((ROOT / "vscode-extension" / "package.json").read_text())
SENT = json.loads((ROOT / "vscode-extension" / "src" / "test" / "data" / "server-settings.json").read_text())
DECLARED = MANIFEST["contributes"]["configuration"]["properties"]
SERVED = capabilities_response()
CLIENT_ONLY = {"kdsl.interpreterPath", "kdsl.trace.server"}  # read by the extension, never sent


def same(a: object, b: object) -> bool:
    """Equal as JSON values: 10 and 10.0 are the same number, but True is not 1."""
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def nested(key: str, value: object) -> dict:
    """`{"kdsl": {"worker": {"sandbox": value}}}` for `worker.sandbox`, as VS Code sends it."""
    for part in reversed(key.split(".")):
        value = {part: value}
    return {"kdsl": value}


_ABSENT = object()


def at(section: dict, key: str) -> object:
    """The value at dotted `key` of a nested section (`worker.sandbox`), or `_ABSENT`."""
    value: object = section
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return _ABSENT
        value = value[part]
    return value


@pytest.mark.parametrize("key", sorted(CLIENT_KEYS))
def test_the_extension_sends_every_setting_the_server_reads(key):
    field, sent = CLIENT_KEYS[key], SENT["changed"]["sent"]
    value = at(sent, key)
    assert value is not _ABSENT, f"the VS Code extension does not send kdsl.{key}"
    settings, problems = parse_settings(nested(key, value))
    assert problems == []
    assert getattr(settings, field) != getattr(Settings(), field), f"server-settings.json leaves kdsl.{key} unchanged"
    assert getattr(parse_settings(sent)[0], field) == getattr(settings, field)


def test_the_server_reads_all_the_extension_sends_without_a_problem():
    for case in ("defaults", "changed"):
        assert parse_settings(SENT[case]["sent"])[1] == [], case


def test_the_extension_sends_the_server_defaults_when_nothing_is_set():
    assert parse_settings(SENT["defaults"]["sent"]) == (Settings(), [])


def test_every_settings_field_is_read_from_one_client_key_and_its_aliases_only():
    """`CLIENT_KEYS` is the list the two tests above hold the extension to: a field read from a
    name outside it would escape them."""
    from lsp.settings import _KEYS, ALIASES

    assert set(CLIENT_KEYS.values()) == {f.name for f in dataclasses.fields(Settings)}
    assert set(_KEYS) == set(CLIENT_KEYS) | set(ALIASES) and set(ALIASES.values()) <= set(CLIENT_KEYS)


def test_every_server_setting_is_declared_and_nothing_else():
    assert set(DECLARED) == {f"kdsl.{key}" for key in SERVED["settings"]} | CLIENT_ONLY


@pytest.mark.parametrize("key", sorted(SERVED["settings"]))
def test_declared_default_is_the_served_default(key):
    declared, served = DECLARED[f"kdsl.{key}"]["default"], SERVED["settings"][key]
    assert same(declared, served), f"package.json kdsl.{key} default {declared!r}, server {served!r}"


@pytest.mark.parametrize("key", sorted(SERVED["choices"]))
def test_declared_enum_is_the_served_choices(key):
    declaration = DECLARED[f"kdsl.{key}"]
    assert declaration["enum"] == SERVED["choices"][key]
    assert len(declaration.get("enumDescriptions", declaration["enum"])) == len(declaration["enum"])


def test_only_the_served_settings_have_an_enum():
    with_enum = {name for name, d in DECLARED.items() if "enum" in d} - CLIENT_ONLY
    assert with_enum == {f"kdsl.{key}" for key in SERVED["choices"]}


def test_target_choices_are_no_target_and_every_served_target():
    assert SERVED["choices"]["target"] == ["", *SERVED["targets"]]
    assert SERVED["defaultTarget"] in SERVED["targets"]


def test_every_settings_field_has_one_client_key():
    assert sorted(SETTING_FIELDS.values()) == sorted(f.name for f in dataclasses.fields(Settings))


@pytest.mark.parametrize("key", sorted(SETTING_FIELDS))
def test_the_server_reads_each_key_into_its_field(key):
    field = SETTING_FIELDS[key]
    default = getattr(Settings(), field)
    value = (
        SERVED["choices"][key][-1] if key in SERVED["choices"]
        else (not default) if isinstance(default, bool)
        else default + 1
    )
    settings, problems = parse_settings(nested(key, value))
    assert problems == []
    assert getattr(settings, field) == value != default


@pytest.mark.parametrize("key", sorted(SERVED["choices"]))
def test_the_server_accepts_every_choice(key):
    for choice in SERVED["choices"][key]:
        assert parse_settings(nested(key, choice))[1] == [], choice


def test_the_empty_target_is_no_target():
    """The served default `""` reads back as the `Settings` default (None: the compiler chooses)."""
    assert parse_settings(nested("target", SERVED["settings"]["target"])) == (Settings(), [])


def test_the_server_refuses_a_sandbox_that_is_no_choice():
    settings, problems = parse_settings(nested("worker.sandbox", "off"))
    assert settings.sandbox == Settings().sandbox and len(problems) == 1


def test_the_worker_defaults_are_the_settings_defaults():
    """`AnalysisWorker` (used by `kdsl lint` too) has its own keyword defaults; they must agree."""
    import inspect

    from lsp.worker import AnalysisWorker

    parameters = inspect.signature(AnalysisWorker).parameters
    defaults = Settings()
    assert (parameters["timeout"].default, parameters["memory_mb"].default, parameters["sandbox"].default) == (
        defaults.timeout_seconds,
        defaults.memory_limit_mb,
        defaults.sandbox,
    )
