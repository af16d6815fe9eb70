"""`kdsl/capabilities`: what a client needs to know of this server before it can offer its views.

The answer is read from the tables that own each fact and copies none of them: the stage
table (`dsl.compiler.stages`), the target table (`dsl.targets`), the `Settings`
dataclass (`lsp.settings`) and the worker's sandbox modes (`lsp.worker.SANDBOXES`). The VS
Code extension asks once per server start and keeps no list of its own. Its package.json
must still declare the settings (VS Code reads it before any server runs);
tests/lsp/test_capabilities_manifest.py keeps those declarations equal to this answer.

    kdsl/capabilities (no params) -> {
      stages: [{name, language, extension, binary, needsViews, madeBy}],  # text stages, in order
      targets: ["sm_80", ...], defaultTarget: "sm_90",
      settings: {"target": "", "worker.timeoutSeconds": 10.0, ...},  # the defaults
      choices: {"target": ["", "sm_80", ...], "worker.sandbox": ["standard", "strict"]},
    }

Setting keys are the client's names below the `kdsl` section, dotted for nested objects, as
the VS Code extension writes them (`kdsl.worker.timeoutSeconds`); the settings only the
client reads (its interpreter, its trace level) are not the server's to serve.
"""

from __future__ import annotations

from typing import Any

from dsl.compiler.stages import BY_NAME, TEXT_STAGES
from dsl.targets import DEFAULT_TARGET, TARGETS
from lsp.settings import CLIENT_KEYS, Settings

CAPABILITIES_REQUEST = "kdsl/capabilities"

# client setting key -> `Settings` field, one key per field (`lsp.settings.CLIENT_KEYS`, which
# `parse_settings` reads); tests/lsp/test_capabilities_manifest.py checks that no field is left out.
SETTING_FIELDS: dict[str, str] = CLIENT_KEYS


def _client_value(value: Any) -> Any:
    """A default as a client writes it: no target (None) is the empty string, as `target` reads it."""
    return "" if value is None else value


def setting_defaults() -> dict[str, Any]:
    defaults = Settings()
    return {key: _client_value(getattr(defaults, field)) for key, field in SETTING_FIELDS.items()}


def setting_choices() -> dict[str, list[str]]:
    """The settings that take one of a closed list of values, and the list."""
    from lsp.worker import SANDBOXES

    return {"target": ["", *TARGETS], "worker.sandbox": list(SANDBOXES)}


def capabilities_response() -> dict[str, Any]:
    return {
        "stages": [BY_NAME[name].to_dict() for name in TEXT_STAGES],
        "targets": list(TARGETS),
        "defaultTarget": DEFAULT_TARGET,
        "settings": setting_defaults(),
        "choices": setting_choices(),
    }
