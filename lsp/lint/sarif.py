"""SARIF 2.1.0 output, the format GitHub code scanning and most security dashboards read.

Every catalogue rule is listed in `tool.driver.rules` (so viewers can show the rule's
documentation even for rules with no result) and results point at them by id and index.
Locations are URIs relative to the current directory under the `%SRCROOT%` base, with
columns counted in Unicode code points (`columnKind`), which is how the diagnostic model
counts them.

`partialFingerprints` lets code scanning follow a result when lines move: it hashes the
code, the path, the stripped text of the line and the result's index among identical
(code, path, text) triples, not the line number.
"""

from __future__ import annotations

import hashlib
import json
import linecache
import re
from collections import Counter
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import quote

from dsl.diagnostics import CATALOGUE, Diagnostic, Rule, Severity, SourceRange
from lsp.lint.formats import display_path, ordered
from lsp.lint.runner import FileResult

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://github.com/kdsl/kdsl"
FINGERPRINT_KEY = "kdsl/v1"
_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _version() -> str:
    try:
        return metadata.version("kdsl")
    except metadata.PackageNotFoundError:
        return "0.0.0"


def _rule_name(rule: Rule) -> str:
    """`"annotation mismatch"` -> `"AnnotationMismatch"` (SARIF names are identifiers)."""
    return "".join(word[:1].upper() + word[1:] for word in re.split(r"[^0-9A-Za-z]+", rule.title))


def _rule(rule: Rule) -> dict[str, Any]:
    return {
        "id": rule.code,
        "name": _rule_name(rule),
        "shortDescription": {"text": rule.title},
        "fullDescription": {"text": rule.description},
        "helpUri": rule.url,
        "defaultConfiguration": {"level": _LEVEL[rule.severity]},
    }


def _location(rng: SourceRange, cwd: Path) -> dict[str, Any]:
    shown = display_path(rng.file, cwd)
    artifact: dict[str, Any]
    if shown.startswith("/"):
        artifact = {"uri": "file://" + quote(shown)}
    else:
        artifact = {"uri": quote(shown), "uriBaseId": "%SRCROOT%"}
    return {
        "physicalLocation": {
            "artifactLocation": artifact,
            "region": dict(zip(("startLine", "startColumn", "endLine", "endColumn"), rng.one_based)),
        }
    }


class _LineText:
    """The stripped text of a line, from the checked buffer when we have it."""

    def __init__(self, results: Sequence[FileResult]):
        self._sources = {r.path: r.source.splitlines() for r in results if r.source is not None}

    def __call__(self, file: str, line: int) -> str:
        lines = self._sources.get(file)
        if lines is not None:
            return lines[line - 1].strip() if 0 < line <= len(lines) else ""
        return linecache.getline(file, line).strip()


def fingerprint(code: str, path: str, line_text: str, occurrence: int) -> str:
    return hashlib.sha256(f"{code}\0{path}\0{line_text}\0{occurrence}".encode()).hexdigest()


def render_sarif(results: Sequence[FileResult], cwd: Path) -> str:
    rules = [_rule(rule) for rule in CATALOGUE.values()]
    index = {rule["id"]: i for i, rule in enumerate(rules)}
    line_text = _LineText(results)
    seen: Counter[tuple[str, str, str]] = Counter()
    sarif_results = []
    for path, d in ordered(results, cwd):
        if d.code not in index:  # a code newer than the catalogue still gets a rule entry
            index[d.code] = len(rules)
            rules.append({"id": d.code, "defaultConfiguration": {"level": _LEVEL[d.severity]}})
        text = line_text(d.range.file, d.range.line)
        occurrence = seen[(d.code, path, text)]
        seen[(d.code, path, text)] += 1
        sarif_results.append(_result(d, index[d.code], cwd, fingerprint(d.code, path, text, occurrence)))
    log = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "kdsl",
                        "informationUri": INFORMATION_URI,
                        "version": _version(),
                        "rules": rules,
                    }
                },
                "originalUriBaseIds": {"%SRCROOT%": {"uri": cwd.as_uri().rstrip("/") + "/"}},
                "columnKind": "unicodeCodePoints",
                "invocations": [{"executionSuccessful": True}],
                "results": sarif_results,
            }
        ],
    }
    return json.dumps(log, indent=2) + "\n"


def _result(d: Diagnostic, rule_index: int, cwd: Path, print_: str) -> dict[str, Any]:
    result: dict[str, Any] = {
        "ruleId": d.code,
        "ruleIndex": rule_index,
        "level": _LEVEL[d.severity],
        "message": {"text": d.message},
        "locations": [_location(d.range, cwd)],
        "partialFingerprints": {FINGERPRINT_KEY: print_},
    }
    if d.related:
        result["relatedLocations"] = [
            {"id": i, **_location(rel.range, cwd), "message": {"text": rel.message}}
            for i, rel in enumerate(d.related)
        ]
    return result
