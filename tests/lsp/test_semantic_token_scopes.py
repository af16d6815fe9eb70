"""The VS Code extension colours every semantic token the server can send, and the kinds of
value apart, in the default themes.

A theme colours a semantic token by a rule of its own for the token's type and modifiers, or
else by the TextMate scope an extension maps them to (`semanticTokenScopes` in
vscode-extension/package.json). The default themes have rules for none of kdsl's modifiers, so
without the mapping a run-time value, a shared array and a compile-time value all take the
colour of a variable. These tests resolve each token the server can send
(`lsp.features.semantic_tokens.TOKEN_CLASSES`, with and without `declaration`) the way VS Code
does, and read the colour the resolved scope gets in Dark+ and Light+.
"""

from __future__ import annotations

import json

import pytest
from lsprotocol import types

from lsp.features.semantic_tokens import LEGEND, TOKEN_CLASSES
from tests.lsp.conftest import ROOT

CONTRIBUTES = json.loads((ROOT / "vscode-extension" / "package.json").read_text())["contributes"]
(PYTHON,) = [entry for entry in CONTRIBUTES["semanticTokenScopes"] if entry["language"] == "python"]
SCOPES: dict[str, list[str]] = PYTHON["scopes"]
STANDARD_TYPES = {t.value for t in types.SemanticTokenTypes}
STANDARD_MODIFIERS = {m.value for m in types.SemanticTokenModifiers}

# The foreground of the TextMate rules that decide these scopes' colours, from VS Code's
# extensions/theme-defaults/themes (dark_plus.json over dark_vs.json, light_plus.json over
# light_vs.json; Dark Modern and Light Modern include them).
THEMES: dict[str, dict[str, str]] = {
    "Dark+": {"variable": "#9CDCFE", "variable.other.constant": "#4FC1FF", "variable.language": "#569CD6",
              "entity.name.type": "#4EC9B0", "support.function": "#DCDCAA", "constant.language": "#569CD6"},
    "Light+": {"variable": "#001080", "variable.other.constant": "#0070C1", "variable.language": "#0000FF",
               "entity.name.type": "#267F99", "support.function": "#795E26", "constant.language": "#0000FF"},
}


def resolve(kind: str, modifiers: set[str]) -> list[str]:
    """The scopes of the selector VS Code picks for a token: of its type (or `*`), all of whose
    modifiers the token has, the one with the most modifiers; two such are ambiguous."""
    best: list[tuple[int, str]] = []
    for selector in SCOPES:
        selected_type, *selected_modifiers = selector.split(".")
        if selected_type in (kind, "*") and set(selected_modifiers) <= modifiers:
            best.append((len(selected_modifiers) + (selected_type == kind), selector))
    assert best, f"no scope for {kind} {sorted(modifiers)}"
    best.sort(reverse=True)
    assert len(best) == 1 or best[0][0] > best[1][0], f"ambiguous scopes for {kind} {sorted(modifiers)}: {best}"
    return SCOPES[best[0][1]]


def colour(theme: str, scope: str) -> str:
    """The foreground of the theme's rule with the longest prefix of `scope` (TextMate matching)."""
    rules = THEMES[theme]
    parts = scope.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in rules:
            return rules[".".join(parts[:end])]
    raise AssertionError(f"{theme} has no rule for {scope}")


def test_every_kdsl_modifier_is_contributed_and_no_other():
    contributed = {m["id"] for m in CONTRIBUTES["semanticTokenModifiers"]}
    assert contributed == set(LEGEND.token_modifiers) - STANDARD_MODIFIERS
    assert all(m["description"] for m in CONTRIBUTES["semanticTokenModifiers"])


def test_every_token_type_is_a_standard_one():
    """A type of the server's own would need a `semanticTokenTypes` contribution too."""
    assert set(LEGEND.token_types) <= STANDARD_TYPES
    assert "semanticTokenTypes" not in CONTRIBUTES


def test_the_mapping_names_only_what_the_legend_announces():
    for selector in SCOPES:
        kind, *modifiers = selector.split(".")
        assert kind in LEGEND.token_types, selector
        assert set(modifiers) <= set(LEGEND.token_modifiers), selector


@pytest.mark.parametrize("declared", [False, True], ids=["read", "bound"])
@pytest.mark.parametrize(("kind", "holds"), TOKEN_CLASSES, ids=[f"{k}.{'.'.join(m)}" for k, m in TOKEN_CLASSES])
def test_every_token_the_server_sends_has_a_kdsl_scope(kind, holds, declared):
    modifiers = set(holds) | ({"declaration"} if declared else set())
    scopes = resolve(kind, modifiers)
    assert scopes and all(".kdsl." in scope for scope in scopes)
    assert scopes[0].endswith(f".kdsl.{holds[-1]}"), "the scope names what the name holds"


@pytest.mark.parametrize("theme", sorted(THEMES))
def test_the_default_themes_colour_the_kinds_of_value_apart(theme):
    """Run-time, thread-dependent, shared-memory and compile-time values, and intrinsics, each
    in a colour of their own (intrinsic values share the thread-dependent blue: `thread_idx` is
    where thread dependence comes from)."""
    of = {holds: colour(theme, resolve("variable", set(holds))[0]) for _, holds in TOKEN_CLASSES}
    intrinsic_function = colour(theme, resolve("function", {"defaultLibrary", "intrinsic"})[0])
    distinct = [of[("runtime",)], of[("runtime", "threadDependent")], of[("sharedMemory",)],
                of[("readonly", "compileTime")], intrinsic_function]
    assert len(set(distinct)) == len(distinct), distinct
    assert of[("runtime",)] == THEMES[theme]["variable"], "a run-time value keeps the colour of a variable"
    for kind, holds in TOKEN_CLASSES:  # a parameter is coloured by what it holds, as a variable is
        assert colour(theme, resolve(kind, set(holds))[0]) == of[holds] or kind == "function"
