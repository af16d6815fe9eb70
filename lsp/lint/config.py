"""Lint settings: the `[tool.kdsl]` table of the nearest pyproject.toml, overridden by the CLI.

Settings are parsed once into a fully defaulted dataclass; everything after this module
reads `LintConfig` and never looks at argv or TOML again. Bad values are reported as
`ConfigError` (the CLI turns it into exit code 2 with a message), never silently dropped.

The nearest pyproject.toml is the first one with a `[tool.kdsl]` table found walking up
from the current directory, as ruff does for `[tool.ruff]`. Its `exclude` patterns are
relative to the folder holding it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dsl.diagnostics import Severity
from lsp.analysis import parse_severity, split_codes, unknown_selectors
from lsp.worker import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S, SANDBOXES

FORMATS = ("text", "json", "sarif", "github")


class ConfigError(ValueError):
    """A setting has a value lint cannot use."""


@dataclass(frozen=True)
class LintConfig:
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()  # fnmatch patterns, matched relative to `root`
    extend_exclude: tuple[str, ...] = ()  # from the CLI, matched relative to the current directory
    target: str | None = None
    fail_on: Severity = Severity.ERROR
    timeout: float = DEFAULT_TIMEOUT_S
    memory_limit_mb: int = DEFAULT_MEMORY_MB
    execute: bool = True  # False: static checks only, user code never runs
    cache: bool = True  # reuse kept results of unchanged files (lsp.lint.cache)
    sandbox: str = "standard"  # or "strict": also user + network namespaces (lsp.sandbox)
    jobs: int = field(default_factory=lambda: os.cpu_count() or 1)
    output_format: str = "text"
    root: Path = field(default_factory=Path.cwd)  # where `exclude` patterns are anchored
    source: Path | None = None  # the pyproject.toml the settings came from


def find_pyproject(start: Path) -> tuple[Path, dict[str, Any]] | None:
    """The first pyproject.toml with a `[tool.kdsl]` table at or above `start`."""
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            table = _load_tool_table(candidate)
            if table is not None:
                return candidate, table
    return None


def _load_tool_table(path: Path) -> dict[str, Any] | None:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError:
            return None
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    table = data.get("tool", {}).get("kdsl")
    return table if isinstance(table, dict) else None


def _codes(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, (str, list)):
        raise ConfigError(f"`{key}` must be a list of codes or a comma-separated string")
    codes = split_codes(value)
    bad = unknown_selectors(codes)
    if bad:
        raise ConfigError(f"`{key}`: unknown code or prefix {', '.join(bad)}")
    return tuple(codes)


def _positive(value: Any, key: str, kind: type) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ConfigError(f"`{key}` must be a positive number, not {value!r}")
    if kind is int and int(value) != value:
        raise ConfigError(f"`{key}` must be a whole number, not {value!r}")
    return kind(value)


def _severity(value: Any, key: str) -> Severity:
    try:
        return parse_severity(str(value))
    except ValueError:
        raise ConfigError(f"`{key}` must be one of error, warning, info, not {value!r}") from None


def _patterns(value: Any, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"`{key}` must be a list of glob patterns")
    return tuple(value)


def target_name(value: Any, key: str) -> str:
    """A known target's name; anything else is a configuration error, not a DSL002 per file."""
    from dsl.targets import TARGETS

    if value not in TARGETS:
        raise ConfigError(f"`{key}` must be one of {', '.join(TARGETS)}, not {value!r}")
    return str(value)


def _sandbox(value: Any, key: str) -> str:
    if value not in SANDBOXES:
        raise ConfigError(f"`{key}` must be one of {', '.join(SANDBOXES)}, not {value!r}")
    return str(value)


_TABLE_KEYS = {
    "select": lambda v: {"select": _codes(v, "select")},
    "ignore": lambda v: {"ignore": _codes(v, "ignore")},
    "exclude": lambda v: {"exclude": _patterns(v, "exclude")},
    "target": lambda v: {"target": target_name(v, "target")},
    "fail-on": lambda v: {"fail_on": _severity(v, "fail-on")},
    "timeout": lambda v: {"timeout": _positive(v, "timeout", float)},
    "memory-limit-mb": lambda v: {"memory_limit_mb": _positive(v, "memory-limit-mb", int)},
    "sandbox": lambda v: {"sandbox": _sandbox(v, "sandbox")},
}


def from_table(table: dict[str, Any], root: Path, source: Path | None = None) -> LintConfig:
    """A `LintConfig` from a `[tool.kdsl]` table; unknown keys are an error (typos)."""
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in _TABLE_KEYS:
            raise ConfigError(f"unknown key `{key}` in [tool.kdsl] (known: {', '.join(_TABLE_KEYS)})")
        values.update(_TABLE_KEYS[key](value))
    return LintConfig(root=root, source=source, **values)


def load(cwd: Path | None = None) -> LintConfig:
    """Defaults overridden by the nearest `[tool.kdsl]` table."""
    cwd = cwd or Path.cwd()
    found = find_pyproject(cwd)
    if found is None:
        return LintConfig(root=cwd)
    path, table = found
    try:
        return from_table(table, path.parent, path)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def with_cli(config: LintConfig, **overrides: Any) -> LintConfig:
    """`config` with every CLI value that was given (not None) taking precedence."""
    return replace(config, **{k: v for k, v in overrides.items() if v is not None})
