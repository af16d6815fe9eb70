"""Trust fails closed: only a real boolean `true` trusts a workspace, and a pull never grants it."""

from __future__ import annotations

import pytest

from lsp.settings import Settings, parse_settings, pulled


@pytest.mark.parametrize("value", ["false", "true", 0, 1, "", None, [], {"x": 1}])
@pytest.mark.parametrize("key", ["trusted", "executeUserCode"])
def test_any_value_but_true_means_untrusted_with_a_warning(key: str, value: object) -> None:
    settings, problems = parse_settings({key: value})
    assert settings.trusted is False
    (problem,) = problems
    assert key in problem and "untrusted" in problem


def test_false_is_untrusted_without_a_warning() -> None:
    assert parse_settings({"trusted": False}) == (Settings(trusted=False), [])


def test_true_is_trusted() -> None:
    assert parse_settings({"trusted": True}, Settings(trusted=False)) == (Settings(trusted=True), [])


def test_both_keys_must_say_true() -> None:
    raw = {"trusted": False, "kdsl": None, "executeUserCode": True}
    assert parse_settings(raw)[0].trusted is False
    assert parse_settings({"kdsl": {"executeUserCode": True, "trusted": "yes"}})[0].trusted is False


def test_no_trust_key_keeps_the_current_trust() -> None:
    assert parse_settings({"debounceMs": 5}, Settings(trusted=False))[0].trusted is False


def test_pulled_settings_withdraw_trust_but_never_grant_it() -> None:
    untrusted, trusted = Settings(trusted=False), Settings()
    assert parse_settings(pulled({"executeUserCode": True, "debounceMs": 5}, untrusted), untrusted)[0] == Settings(
        trusted=False, debounce_ms=5
    )
    assert parse_settings(pulled({"kdsl": {"executeUserCode": False}}, trusted), trusted)[0].trusted is False


def test_sandbox_setting() -> None:
    assert parse_settings({"kdsl": {"worker": {"sandbox": "strict"}}})[0].sandbox == "strict"
    settings, problems = parse_settings({"sandbox": "none"})
    assert settings.sandbox == "standard" and "sandbox" in problems[0]


def test_an_unknown_target_is_refused_with_the_known_ones():
    """A bad target used to reach the compiler and come back as an internal DSL002."""
    from lsp.settings import Settings, parse_settings

    settings, problems = parse_settings({"target": "sm_1"})
    assert settings == Settings()
    assert problems == ["kdsl setting 'target': unknown target 'sm_1'; known targets: sm_80, sm_86, sm_89, sm_90, "
                        "sm_90a; got 'sm_1', keeping None"]
    assert parse_settings({"target": "sm_80"}) == (Settings(target="sm_80"), [])
