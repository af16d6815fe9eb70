"""`--format sarif`: a SARIF 2.1.0 log that code scanning accepts.

The structure is checked against the required properties, types and enumerations of the
SARIF 2.1.0 schema that this output uses, written out below as a small JSON-schema subset
(`type`, `required`, `properties`, `additionalItems`-free `items`, `enum`, `minimum`,
`values` for maps) so the test needs no network and no schema library.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lint_helpers import copy_data, lint

from dsl.diagnostics import CATALOGUE, Diagnostic, Related, SourceRange
from lsp.lint.runner import FileResult
from lsp.lint.sarif import FINGERPRINT_KEY, render_sarif

MESSAGE = {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}
REGION = {
    "type": "object",
    "required": ["startLine"],
    "properties": {
        key: {"type": "integer", "minimum": 1} for key in ("startLine", "startColumn", "endLine", "endColumn")
    },
}
LOCATION = {
    "type": "object",
    "properties": {
        "id": {"type": "integer", "minimum": -1},
        "message": MESSAGE,
        "physicalLocation": {
            "type": "object",
            "required": ["artifactLocation"],
            "properties": {
                "artifactLocation": {
                    "type": "object",
                    "required": ["uri"],
                    "properties": {"uri": {"type": "string"}, "uriBaseId": {"type": "string"}},
                },
                "region": REGION,
            },
        },
    },
}
LEVEL = {"enum": ["none", "note", "warning", "error"]}
RULE = {
    "type": "object",
    "required": ["id"],
    "properties": {
        "id": {"type": "string"},
        "name": {"type": "string"},
        "shortDescription": MESSAGE,
        "fullDescription": MESSAGE,
        "helpUri": {"type": "string"},
        "defaultConfiguration": {"type": "object", "properties": {"level": LEVEL}},
    },
}
RESULT = {
    "type": "object",
    "required": ["message"],
    "properties": {
        "ruleId": {"type": "string"},
        "ruleIndex": {"type": "integer", "minimum": -1},
        "level": LEVEL,
        "message": MESSAGE,
        "locations": {"type": "array", "items": LOCATION},
        "relatedLocations": {"type": "array", "items": LOCATION},
        "partialFingerprints": {"type": "object", "values": {"type": "string"}},
    },
}
SARIF_2_1_0 = {
    "type": "object",
    "required": ["version", "runs"],
    "properties": {
        "$schema": {"type": "string"},
        "version": {"enum": ["2.1.0"]},
        "runs": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["tool"],
                "properties": {
                    "tool": {
                        "type": "object",
                        "required": ["driver"],
                        "properties": {
                            "driver": {
                                "type": "object",
                                "required": ["name"],
                                "properties": {
                                    "name": {"type": "string"},
                                    "informationUri": {"type": "string"},
                                    "version": {"type": "string"},
                                    "rules": {"type": "array", "items": RULE},
                                },
                            }
                        },
                    },
                    "columnKind": {"enum": ["utf16CodeUnits", "unicodeCodePoints"]},
                    "originalUriBaseIds": {
                        "type": "object",
                        "values": {"type": "object", "required": ["uri"]},
                    },
                    "results": {"type": "array", "items": RESULT},
                },
            },
        },
    },
}
TYPES = {"object": dict, "array": list, "string": str, "integer": int}


def schema_errors(value: Any, schema: dict[str, Any], where: str = "$") -> list[str]:
    errors: list[str] = []
    if "type" in schema and not isinstance(value, TYPES[schema["type"]]):
        return [f"{where}: expected {schema['type']}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} not in {schema['enum']}")
    if "minimum" in schema and value < schema["minimum"]:
        errors.append(f"{where}: {value} < {schema['minimum']}")
    for key in schema.get("required", ()):
        if key not in value:
            errors.append(f"{where}: missing required {key!r}")
    for key, sub in schema.get("properties", {}).items():
        if isinstance(value, dict) and key in value:
            errors += schema_errors(value[key], sub, f"{where}.{key}")
    if "items" in schema:
        for i, item in enumerate(value):
            errors += schema_errors(item, schema["items"], f"{where}[{i}]")
    if "values" in schema:
        for key, item in value.items():
            errors += schema_errors(item, schema["values"], f"{where}.{key}")
    return errors


def test_validator_catches_mistakes() -> None:
    bad = {"version": "2.0", "runs": [{"tool": {"driver": {}}, "results": [{"level": "fatal"}]}]}
    assert schema_errors(bad, SARIF_2_1_0) == [
        "$.version: '2.0' not in ['2.1.0']",
        "$.runs[0].tool.driver: missing required 'name'",
        "$.runs[0].results[0]: missing required 'message'",
        "$.runs[0].results[0].level: 'fatal' not in ['none', 'note', 'warning', 'error']",
    ]


def _log(tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "src" / "k.py"
    source = "import dsl\n\n@dsl.kernel(known_block_size=[64, 1, 1])\ndef k():\n    pass\nk2 = 1\n"
    decorator = SourceRange(str(path), 3, 12, 3, 39)
    diagnostics = [
        Diagnostic.make(
            "DSL202", "block differs", SourceRange(str(path), 6, 0, 6, 6), [Related(decorator, "here")]
        ),
        Diagnostic.make("DSL501", "spills", SourceRange(str(path), 4, 4, 4, 5)),
    ]
    return json.loads(render_sarif([FileResult(str(path), source, diagnostics)], tmp_path))


def test_structure_rules_and_results(tmp_path: Path) -> None:
    log = _log(tmp_path)
    assert schema_errors(log, SARIF_2_1_0) == []
    run = log["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "kdsl"
    assert [r["id"] for r in driver["rules"]] == list(CATALOGUE)
    spills = driver["rules"][list(CATALOGUE).index("DSL501")]
    assert spills == {
        "id": "DSL501",
        "name": "RegisterSpills",
        "shortDescription": {"text": "register spills"},
        "fullDescription": {"text": CATALOGUE["DSL501"].description},
        "helpUri": CATALOGUE["DSL501"].url,
        "defaultConfiguration": {"level": "warning"},
    }
    first, second = run["results"]
    assert driver["rules"][first["ruleIndex"]]["id"] == first["ruleId"] == "DSL501"
    assert first["level"] == "warning"
    assert first["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "src/k.py", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": 4, "startColumn": 5, "endLine": 4, "endColumn": 6},
    }
    assert second["ruleId"] == "DSL202" and second["level"] == "error"
    assert second["relatedLocations"][0]["physicalLocation"]["region"]["startLine"] == 3
    assert second["relatedLocations"][0]["message"] == {"text": "here"}
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.as_uri() + "/"


def test_fingerprints_are_stable_when_lines_move(tmp_path: Path) -> None:
    path = tmp_path / "k.py"

    def fingerprints(source: str, lines: list[int]) -> list[str]:
        diags = [Diagnostic.make("DSL501", "spills", SourceRange(str(path), n, 0, n, 1)) for n in lines]
        log = json.loads(render_sarif([FileResult(str(path), source, diags)], tmp_path))
        return [r["partialFingerprints"][FINGERPRINT_KEY] for r in log["runs"][0]["results"]]

    before = fingerprints("def a():\n    pass\ndef a():\n    pass\n", [1, 3])
    after = fingerprints("\n\n# moved\ndef a():\n    pass\ndef a():\n    pass\n", [4, 6])
    assert before == after
    assert len(set(before)) == 2  # identical lines are told apart by their occurrence index


def test_end_to_end_to_a_file(project: Path) -> None:
    copy_data(project, "bad_block.py", "clean.py")
    run = lint(project, "--no-exec", "--format", "sarif", "--output", "kdsl.sarif", ".")
    assert run.returncode == 1
    assert run.stdout == ""
    log = json.loads((project / "kdsl.sarif").read_text())
    assert schema_errors(log, SARIF_2_1_0) == []
    (result,) = log["runs"][0]["results"]
    assert result["ruleId"] == "DSL201"
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "bad_block.py"
