"""JSON for the report's records, written once.

Reports cross process boundaries (the analysis worker sends a `ModuleReport` to the server
and to `kdsl lint`) and sit in the disk cache, so each record class must turn into JSON and
back. Rather than a hand-written `to_dict` / `from_dict` pair per class, a `Record` dataclass
is converted field by field from its type hints: nested records, lists, tuples, dicts,
optional values, enums (by value) and bytes (base64).
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import functools
import sys
import types
import typing
from typing import Any


def to_json(value: Any) -> Any:
    """`value` as JSON-ready data: records become objects of their fields."""
    if isinstance(value, Record) and type(value).to_dict is not Record.to_dict:
        return value.to_dict()  # a record that writes one of its fields its own way
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_json_fields(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    return value


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    module = sys.modules[cls.__module__]
    return typing.get_type_hints(cls, vars(module))


def from_json(tp: Any, data: Any) -> Any:
    """The value of type `tp` that `to_json` turned into `data`."""
    if data is None:
        return None
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        return from_json(options[0], data) if len(options) == 1 else data
    if isinstance(tp, type) and issubclass(tp, Record) and tp.from_dict.__func__ is not _RECORD_FROM_DICT:
        return tp.from_dict(data)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return from_json_fields(tp, data)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(data)
    if tp is bytes:
        return base64.b64decode(data)
    args = typing.get_args(tp)
    if origin is list:
        return [from_json(args[0], v) for v in data]
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_json(args[0], v) for v in data)
        return tuple(from_json(a, v) for a, v in zip(args, data))
    if origin is dict:
        return {k: from_json(args[1], v) for k, v in data.items()}
    return data


def to_json_fields(value: Any) -> dict[str, Any]:
    return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}


def from_json_fields(tp: type, data: dict[str, Any]) -> Any:
    hints = _hints(tp)
    return tp(**{f.name: from_json(hints[f.name], data[f.name])
                 for f in dataclasses.fields(tp) if f.init and f.name in data})


class Record:
    """A dataclass that converts to JSON and back by its fields (see the module docstring).
    A subclass may override `to_dict` / `from_dict` for a field kept its own way; nested
    records use the override too."""

    def to_dict(self) -> dict[str, Any]:
        return to_json_fields(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Any:
        return from_json_fields(cls, data)


_RECORD_FROM_DICT = Record.from_dict.__func__  # type: ignore[attr-defined]
