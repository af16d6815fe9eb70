"""Every published diagnostic links to its entry in README's diagnostic catalogue.

Fixture: data/broken.py (a kernel that adds a string to a number: DSL301 from the compiler)
and the same file with a syntax error (DSL003 from the instant tier).
"""

from __future__ import annotations

import re

from lsprotocol import types

from dsl.diagnostics import CATALOGUE, DOCS_URL
from tests.lsp.conftest import ROOT, diagnostics_for, has_code, initialize, open_file, read

README = (ROOT / "README.md").read_text()
ANCHORS = set(re.findall(r'<a id="([^"]+)"></a>', README))


def test_every_code_has_an_anchor_in_the_readme_catalogue():
    assert DOCS_URL.endswith("/README.md")
    for code, rule in CATALOGUE.items():
        assert rule.url == f"{DOCS_URL}#{code.lower()}"
        assert code.lower() in ANCHORS, f"README has no <a id=\"{code.lower()}\"></a> for {code}"
        assert re.search(rf'<a id="{code.lower()}"></a>{code} \|', README), f"{code} is not in the catalogue table"


def _link(diagnostic: types.Diagnostic) -> str | None:
    return diagnostic.code_description.href if diagnostic.code_description else None


async def test_compiler_diagnostics_link_to_their_code(client):
    await initialize(client)
    uri = open_file(client, "broken.py")
    diags = await diagnostics_for(client, uri, 1, has_code("DSL301"))
    assert diags
    for d in diags:
        assert _link(d) == f"{DOCS_URL}#{str(d.code).lower()}"
        assert str(d.code).lower() in ANCHORS


async def test_instant_tier_diagnostics_link_too(client):
    await initialize(client, trusted=False)
    uri = open_file(client, "broken.py", text=read("broken.py") + "\ndef oops(:\n")
    (syntax,) = await diagnostics_for(client, uri, 1, has_code("DSL003"))
    assert syntax.code == "DSL003"
    assert _link(syntax) == f"{DOCS_URL}#dsl003"
