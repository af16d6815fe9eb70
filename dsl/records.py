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
from collections.abc import Callable
from typing import Any

_PLAIN = frozenset({str, int, float, bool, type(None)})  # exactly these types: an enum of ints is not plain


def to_json(value: Any) -> Any:
    """`value` as JSON-ready data: records become objects of their fields. (A report holds tens
    of thousands of values, nearly all plain: they are answered first.)"""
    if type(value) in _PLAIN:
        return value
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, Record) and type(value).to_dict is not Record.to_dict:
        return value.to_dict()  # a record that writes one of its fields its own way
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_json_fields(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return value


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    module = sys.modules[cls.__module__]
    return typing.get_type_hints(cls, vars(module))


def from_json(tp: Any, data: Any) -> Any:
    """The value of type `tp` that `to_json` turned into `data`."""
    return _reader(tp)(data)


def _plain(data: Any) -> Any:
    return data


@functools.cache
def _reader(tp: Any) -> Callable[[Any], Any]:
    """`from_json` for one type, worked out once per type (a report holds tens of thousands
    of values: asking `typing` about each one's type was most of reading it)."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Union or origin is types.UnionType:
        options = [a for a in args if a is not type(None)]
        return _reader(options[0]) if len(options) == 1 else _plain
    if isinstance(tp, type) and issubclass(tp, Record) and tp.from_dict.__func__ is not _RECORD_FROM_DICT:
        read = tp.from_dict
    elif isinstance(tp, type) and dataclasses.is_dataclass(tp):
        read = _fields_reader(tp)
    elif isinstance(tp, type) and issubclass(tp, enum.Enum):
        read = tp
    elif tp is bytes:
        read = base64.b64decode
    elif origin is list:
        item = _reader(args[0])
        read = lambda data: [item(v) for v in data]  # noqa: E731
    elif origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        item = _reader(args[0])
        read = lambda data: tuple(item(v) for v in data)  # noqa: E731
    elif origin is tuple:
        items = [_reader(a) for a in args]
        read = lambda data: tuple(r(v) for r, v in zip(items, data))  # noqa: E731
    elif origin is dict:
        value = _reader(args[1])
        read = lambda data: {k: value(v) for k, v in data.items()}  # noqa: E731
    else:
        return _plain
    return lambda data: None if data is None else read(data)


@functools.cache
def _fields_reader(tp: type) -> Callable[[dict[str, Any]], Any]:
    """Reads a dataclass from its fields; the fields' readers are found on first use, so a
    record may hold records of its own type."""
    readers: list[tuple[str, Callable[[Any], Any]]] | None = None

    def read(data: dict[str, Any]) -> Any:
        nonlocal readers
        if readers is None:
            hints = _hints(tp)
            readers = [(f.name, _reader(hints[f.name])) for f in dataclasses.fields(tp) if f.init]
        return tp(**{name: reader(data[name]) for name, reader in readers if name in data})

    return read


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def to_json_fields(value: Any) -> dict[str, Any]:
    return {name: to_json(getattr(value, name)) for name in _field_names(type(value))}


def from_json_fields(tp: type, data: dict[str, Any]) -> Any:
    return _fields_reader(tp)(data)


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
