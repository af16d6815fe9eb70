"""Server settings, parsed once from `initializationOptions` and `workspace/didChangeConfiguration`.

Every key the client may send is listed in `_KEYS`, the one place where camelCase names map
to fields. Both the flat form (`{"timeoutSeconds": 2}`) and the VS Code extension's form
(`{"kdsl": {"worker": {"timeoutSeconds": 2}}}`, `executeUserCode`) are accepted. A bad
value never stops the server: it keeps the previous value and the problem is returned as
a message for the client to show.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Settings:
    target: str | None = None  # e.g. "sm_90"; None lets the compiler choose
    timeout_seconds: float = 10.0  # per compile or run in the worker
    memory_limit_mb: int = 4096  # address-space limit of the worker
    debounce_ms: int = 300  # quiet time after the last edit before the compiler tier runs
    trusted: bool = True  # False: static checks only, user code is never executed


# client key (dotted for nested objects) -> (field, parser)
def _target(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError("expected a string such as 'sm_90'")
    return value


def _positive_number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError("expected a positive number")
    return float(value)


def _positive_int(value: Any) -> int:
    return int(_positive_number(value))


def _non_negative_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError("expected a number >= 0")
    return int(value)


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("expected true or false")
    return value


_KEYS: dict[str, tuple[str, Any]] = {
    "target": ("target", _target),
    "timeoutSeconds": ("timeout_seconds", _positive_number),
    "worker.timeoutSeconds": ("timeout_seconds", _positive_number),
    "memoryLimitMb": ("memory_limit_mb", _positive_int),
    "worker.memoryLimitMb": ("memory_limit_mb", _positive_int),
    "debounceMs": ("debounce_ms", _non_negative_int),
    "trusted": ("trusted", _bool),
    "executeUserCode": ("trusted", _bool),
}


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and name not in _KEYS:
            out.update(_flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def parse_settings(raw: Any, base: Settings | None = None) -> tuple[Settings, list[str]]:
    """Applies the client's `raw` settings over `base`; returns the result and any problems.

    `raw` may be the settings object itself, or wrapped as `{"kdsl": {...}}` (as
    `didChangeConfiguration` sends it). Unknown keys are ignored so newer clients work.
    """
    base = base or Settings()
    if not isinstance(raw, dict):
        return base, [] if raw is None else [f"kdsl settings: expected an object, got {raw!r}"]
    if isinstance(raw.get("kdsl"), dict):
        raw = raw["kdsl"]
    changes: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in _flatten(raw).items():
        if key not in _KEYS:
            continue
        field, parse = _KEYS[key]
        try:
            changes[field] = parse(value)
        except (TypeError, ValueError) as exc:
            default = getattr(base, field)
            problems.append(f"kdsl setting {key!r}: {exc}; got {value!r}, keeping {default!r}")
    return dataclasses.replace(base, **changes), problems
