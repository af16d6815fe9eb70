"""Server settings, parsed once from `initializationOptions`, `workspace/didChangeConfiguration`
and the `workspace/configuration` pull.

Every setting has one client name, in `CLIENT_KEYS`, the one place where camelCase names map
to fields: the name below the `kdsl` section, dotted for nested objects, as VS Code writes it
(`{"kdsl": {"worker": {"timeoutSeconds": 2}}}`). `ALIASES` adds the short flat names other
editors' `initializationOptions` use (`{"timeoutSeconds": 2, "trusted": true}`). A bad value
never stops the server: it keeps the previous value and the problem is returned as a message
for the client to show.

`CLIENT_KEYS` is what a client must send for every setting to take effect; two tests keep the
VS Code extension to it: tests/lsp/test_capabilities_manifest.py (every key, and no other, is
declared in vscode-extension/package.json, with the server's default) and
vscode-extension/src/test/settings.test.ts (every setting package.json declares reaches the
server, at start-up, in the `workspace/configuration` answer and in `didChangeConfiguration`).

Trust fails closed. Only a real boolean `true` trusts the workspace; any other value of
`trusted` or `executeUserCode` (`"false"`, `0`, `"yes"`, `null`) means untrusted, with a
warning, and when both keys are given both must be `true`. What the client pushes
(`initializationOptions`, `didChangeConfiguration`) may grant or withdraw trust; what the
server pulls with `workspace/configuration` may only withdraw it, because that answer
includes the workspace folder's own settings file, which an untrusted workspace controls.

The pull: after `initialized`, if the client can answer it, the server asks for the `kdsl`
section (`ConfigurationPull`), and asks again whenever `didChangeConfiguration` arrives with
`settings: null` (LSP's way of saying "changed: pull them"). Whatever runs user code waits
while a pull is in flight (at most `PULL_TIMEOUT_S`), so a workspace that turns execution
off is never run first.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsl.targets import TARGETS
from lsp.sandbox import SANDBOXES
from lsp.worker import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S

if TYPE_CHECKING:
    from lsp.server import KdslLanguageServer
    from lsp.worker import AnalysisWorker

log = logging.getLogger(__name__)
PULL_TIMEOUT_S = 5.0
SECTION = "kdsl"


@dataclass(frozen=True, kw_only=True)
class Settings:
    target: str | None = None  # e.g. "sm_90"; None lets the compiler choose
    timeout_seconds: float = DEFAULT_TIMEOUT_S  # per compile or run in the worker
    memory_limit_mb: int = DEFAULT_MEMORY_MB  # each run process's address space; a GPU run's data segment
    debounce_ms: int = 300  # quiet time after the last edit before the compiler tier runs
    trusted: bool = True  # False: static checks only, user code is never executed
    sandbox: str = SANDBOXES[0]  # "strict": runs also get no network (see lsp.sandbox)
    line_cost: bool = False  # inlay hints also show each kernel line's SASS instructions (runs nvdisasm)
    device: int = 0  # the GPU ordinal "Run on GPU" runs on (cuda:N, after CUDA_VISIBLE_DEVICES)


def _target(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError("expected a string such as 'sm_90'")
    if value not in TARGETS:
        raise ValueError(f"unknown target {value!r}; known targets: {', '.join(TARGETS)}")
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


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("expected true or false")
    return value


def _device(value: Any) -> int:
    """A GPU ordinal: an integer >= 0 (a float like 1.0 is taken, 1.5 is not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != int(value):
        raise ValueError("expected a GPU ordinal: 0, 1, ...")
    return int(value)


def _sandbox(value: Any) -> str:
    if value not in SANDBOXES:
        raise ValueError("expected " + " or ".join(map(repr, SANDBOXES)))
    return str(value)


_TRUST = "trusted"  # the field the trust keys share; parsed by `_trust_of`, never by `_KEYS`

# client name (below `kdsl`, dotted for nested objects) -> `Settings` field: one per field
CLIENT_KEYS: dict[str, str] = {
    "target": "target",
    "worker.timeoutSeconds": "timeout_seconds",
    "worker.memoryLimitMb": "memory_limit_mb",
    "worker.sandbox": "sandbox",
    "debounceMs": "debounce_ms",
    "executeUserCode": _TRUST,
    "inlayHints.lineCost": "line_cost",
    "device": "device",
}
# short name -> the client name it stands for. `trusted` is the workspace's trust as a client
# sees it, `executeUserCode` the user's setting: when both are given, both must be true.
ALIASES: dict[str, str] = {
    "timeoutSeconds": "worker.timeoutSeconds",
    "memoryLimitMb": "worker.memoryLimitMb",
    "sandbox": "worker.sandbox",
    "lineCost": "inlayHints.lineCost",
    "trusted": "executeUserCode",
}
_PARSERS: dict[str, Callable[[Any], Any] | None] = {
    "target": _target,
    "timeout_seconds": _positive_number,
    "memory_limit_mb": _positive_int,
    "sandbox": _sandbox,
    "debounce_ms": _non_negative_int,
    _TRUST: None,
    "line_cost": _boolean,
    "device": _device,
}


def _field_of(key: str) -> str:
    return CLIENT_KEYS[ALIASES.get(key, key)]


# every name the server reads -> (field, parser)
_KEYS: dict[str, tuple[str, Any]] = {
    key: (_field_of(key), _PARSERS[_field_of(key)]) for key in [*CLIENT_KEYS, *ALIASES]
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


def _trust_of(flat: dict[str, Any], problems: list[str]) -> bool | None:
    """None when no trust key is given; else True only if every given one is boolean `true`."""
    given = {key: value for key, value in flat.items() if key in _KEYS and _KEYS[key][0] == _TRUST}
    if not given:
        return None
    for key, value in given.items():
        if not isinstance(value, bool):
            problems.append(
                f"kdsl setting {key!r}: expected true or false; got {value!r}, treating the workspace as untrusted"
            )
    return all(value is True for value in given.values())


def parse_settings(raw: Any, base: Settings | None = None) -> tuple[Settings, list[str]]:
    """Applies the client's `raw` settings over `base`; returns the result and any problems.

    `raw` may be the settings object itself, or wrapped as `{"kdsl": {...}}` (as
    `didChangeConfiguration` sends it). Unknown keys are ignored so newer clients work.
    """
    base = base or Settings()
    if not isinstance(raw, dict):
        return base, [] if raw is None else [f"kdsl settings: expected an object, got {raw!r}"]
    if isinstance(raw.get(SECTION), dict):
        raw = raw[SECTION]
    flat = _flatten(raw)
    changes: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in flat.items():
        if key not in _KEYS or _KEYS[key][0] == _TRUST:
            continue
        field, parse = _KEYS[key]
        try:
            changes[field] = parse(value)
        except (TypeError, ValueError) as exc:
            default = getattr(base, field)
            problems.append(f"kdsl setting {key!r}: {exc}; got {value!r}, keeping {default!r}")
    trusted = _trust_of(flat, problems)
    if trusted is not None:
        changes[_TRUST] = trusted
    return dataclasses.replace(base, **changes), problems


# -- what the worker is started with (a change of any of these restarts it)


def worker_options(settings: Settings) -> tuple[float, int, str]:
    return (settings.timeout_seconds, settings.memory_limit_mb, settings.sandbox)


def make_worker(settings: Settings) -> AnalysisWorker:
    """The editor's worker: two runs at a time, a warm run process for each of four documents."""
    from lsp.worker import AnalysisWorker

    return AnalysisWorker(
        timeout=settings.timeout_seconds,
        memory_mb=settings.memory_limit_mb,
        sandbox=settings.sandbox,
        parallel=2,
        keep_warm=4,
    )


# -- the workspace/configuration pull


class ConfigurationPull:
    """Asks the client for the `kdsl` section; `ready()` returns when no pull is in flight."""

    def __init__(self) -> None:
        self._done = asyncio.Event()
        self._done.set()  # nothing asked yet
        self._in_flight = 0

    def start(self, ls: KdslLanguageServer, on_change: Callable[[], None] | None = None) -> None:
        """Pulls in the background, if the client can answer; `on_change` runs if settings changed.

        The pull counts as in flight from this call on, so `ready()` already waits for it."""
        workspace = ls.client_capabilities.workspace
        if workspace is None or not workspace.configuration:
            return
        self._in_flight += 1
        self._done.clear()
        ls.spawn(self._pull(ls, on_change))

    async def ready(self) -> None:
        if not self._done.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._done.wait(), PULL_TIMEOUT_S)

    async def _pull(self, ls: KdslLanguageServer, on_change: Callable[[], None] | None) -> None:
        from lsprotocol import types

        changed = False
        try:
            params = types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
            answer = await asyncio.wait_for(ls.workspace_configuration_async(params), PULL_TIMEOUT_S)
            if answer:
                changed = apply_pulled(ls, answer[0])
        except Exception as exc:  # no answer is no change
            log.warning("workspace/configuration failed: %s", exc)
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._done.set()
        if changed and on_change is not None:
            on_change()


def pulled(raw: Any, base: Settings) -> Any:
    """`raw` as pulled settings may apply over `base`: without trust keys if `base` is untrusted."""
    if base.trusted or not isinstance(raw, dict):
        return raw
    if isinstance(raw.get(SECTION), dict):
        raw = raw[SECTION]
    return {k: v for k, v in _flatten(raw).items() if not (k in _KEYS and _KEYS[k][0] == _TRUST)}


def apply_pulled(ls: KdslLanguageServer, raw: Any) -> bool:
    """Applies pulled settings; returns whether anything changed."""
    return ls.apply_settings(pulled(raw, ls.settings))
