"""A module's report on its way from the run process to the parent: only what changed travels.

A warm run process analyses its document again after every edit, and a report holds every
stage of every function (2 MB of JSON for a file of a hundred kernels): encoding it,
forwarding it through the zygote and decoding it again was most of an edit's time, for a
report in which one function changed. So the parent names, in its request, the digests of
the function reports it holds for that path (`known`), and the run process sends those as
`{"same": digest}`; a function that an edit above it only moved (`dsl.compiler.relocation`)
as `{"moved": digest, ...}`, which the parent shifts itself; only the others travel in full:

    {"path": "...", "diagnostics": [...], "imported": [...] | null,
     "functions": [{"same": "<digest>"}
                   | {"moved": "<digest>", "lines": N, "digest": "<digest>"}
                   | {"digest": "<digest>", "report": FunctionReport.to_dict()}]}

A moved report's digest is made from the one it moved from and the lines it moved by, so
it names the shifted report without its JSON being made.

A digest is a SHA-256 of the function report's JSON, computed the same way in every process,
so a fresh run process (after a retired one) still matches what the parent holds. The run
process can claim anything about its own module (see `lsp.run_module`), but it can only name
reports the parent offered for this path, so a reference never brings in another file's.
`imported` is what running the module imported (`dsl.module_analysis.ModuleRun`), for the
lint cache; null when an import failed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Collection, Mapping
from typing import Any

from dsl.compiler.artifacts import FunctionReport, ModuleReport
from dsl.compiler.relocation import relocate_report
from dsl.records import to_json


class ReportEncoder:
    """Lives in a run process: encodes reports, remembering each compiled function's JSON.

    A compile-cache hit returns the same `CompiledFunction` object, so its JSON (the bulk of
    a report) is made once per process and found again by identity; entries are dropped
    when a report no longer holds their object, which also keeps an identity from being
    reused while it is remembered."""

    def __init__(self) -> None:
        # id -> (object, its JSON or None until it must travel, its digest)
        self._compiled: dict[int, tuple[Any, str | None, str]] = {}
        self._rest: dict[Any, str] = {}  # the other fields of a function report -> their JSON
        self._reports: dict[int, str] = {}  # id of a compiled object -> the digest of its function report

    def encode(
        self, report: ModuleReport, known: Collection[str] = (), imported: list[str] | None = None
    ) -> bytes:
        """The wire form of `report` (one line of JSON, without the newline)."""
        entries: list[str] = []
        kept: dict[int, tuple[Any, str | None, str]] = {}
        kept_rest: dict[Any, str] = {}
        reports: dict[int, str] = {}
        for function in report.functions:
            moved = self._moved_from(function, report.path, known)
            compiled_digest = self._compiled_digest(function, kept, moved)
            rest_json = self._rest_json(function, kept_rest)
            digest = hashlib.sha256(f"{rest_json}\n{compiled_digest}".encode()).hexdigest()
            if function.compiled is not None:
                reports[id(function.compiled)] = digest
            if digest in known:
                entries.append(json.dumps({"same": digest}))
            elif moved is not None:
                entries.append(json.dumps({"moved": moved[0], "lines": moved[1], "digest": digest}))
            else:
                body = rest_json[:-1] + ', "compiled": ' + self._compiled_json(function, kept) + "}"
                entries.append('{"digest": "' + digest + '", "report": ' + body + "}")
        self._compiled, self._rest, self._reports = kept, kept_rest, reports
        head = {"path": report.path, "diagnostics": to_json(report.diagnostics), "imported": imported}
        return (json.dumps(head)[:-1] + ', "functions": [' + ", ".join(entries) + "]}").encode()

    def _rest_json(self, function: FunctionReport, kept: dict[Any, str]) -> str:
        """The JSON of every field but `compiled`; remembered by the fields' values (frozen
        records, so comparing them is cheaper than converting them again)."""
        fields = {f.name: getattr(function, f.name) for f in dataclasses.fields(function) if f.name != "compiled"}
        try:
            key: Any = tuple((name, tuple(v) if isinstance(v, list) else v) for name, v in fields.items())
            hash(key)
        except TypeError:  # something unhashable: convert it every time
            key = None
        text = self._rest.get(key) if key is not None else None
        if text is None:
            text = json.dumps({name: to_json(v) for name, v in fields.items()}, sort_keys=True)
        if key is not None:
            kept[key] = text
        return text

    def _moved_from(self, function: FunctionReport, path: str, known: Collection[str]) -> tuple[str, int] | None:
        """(digest, lines) when this function's result is the last report's result of a function
        the parent holds, moved within this file (and nothing else about it changed)."""
        moved = getattr(function.compiled, "moved_from", None)
        if moved is None:
            return None
        source, file, lines = moved[0](), moved[1], moved[2]
        digest = self._reports.get(id(source)) if source is not None else None
        if file != path or digest not in known or self._compiled.get(id(source), (None,))[0] is not source:
            return None
        return digest, lines

    def _compiled_digest(self, function: FunctionReport, kept: dict[int, tuple[Any, str | None, str]],
                         moved: tuple[str, int] | None) -> str:
        compiled = function.compiled
        if compiled is None:
            return "none"
        known = self._compiled.get(id(compiled))
        if known is None or known[0] is not compiled:
            if moved is not None:  # named by where it came from: its JSON is made only if it must travel
                digest = hashlib.sha256(f"moved {moved[0]} {moved[1]}".encode()).hexdigest()
                known = (compiled, None, digest)
            else:
                text = json.dumps(compiled.to_dict(), sort_keys=True)
                known = (compiled, text, hashlib.sha256(text.encode()).hexdigest())
        kept[id(compiled)] = known
        return known[2]

    def _compiled_json(self, function: FunctionReport, kept: dict[int, tuple[Any, str | None, str]]) -> str:
        compiled = function.compiled
        if compiled is None:
            return "null"
        obj, text, digest = kept[id(compiled)]
        if text is None:
            text = json.dumps(compiled.to_dict(), sort_keys=True)
            kept[id(compiled)] = (obj, text, digest)
        return text


class Decoded:
    """A decoded report, the function reports by digest (what the next request may name), and
    what the run imported (None when unknown or an import failed)."""

    def __init__(self, report: ModuleReport, by_digest: dict[str, FunctionReport], imported: list[str] | None):
        self.report = report
        self.by_digest = by_digest
        self.imported = imported


def decode(line: bytes, known: Mapping[str, FunctionReport]) -> Decoded:
    """The report in `line`, its references resolved against `known`; raises ValueError (or
    KeyError, TypeError) on anything malformed, a reference to a report not in `known` included."""
    data = json.loads(line)
    if not isinstance(data, dict) or not isinstance(data.get("functions"), list):
        raise ValueError("not a report")
    report = ModuleReport.from_dict({"path": data["path"], "diagnostics": data.get("diagnostics") or []})
    by_digest: dict[str, FunctionReport] = {}
    for entry in data["functions"]:
        if "same" in entry:
            digest = str(entry["same"])
            if digest not in known:
                raise ValueError("names a function report that was not offered")
            function = known[digest]
        elif "moved" in entry:
            source = str(entry["moved"])
            if source not in known:
                raise ValueError("moves a function report that was not offered")
            digest = str(entry["digest"])
            moved = relocate_report(known[source], report.path, int(entry["lines"]))
            if moved is None:
                raise ValueError("a function report that cannot be moved")
            function = moved
        else:
            digest = str(entry["digest"])
            function = FunctionReport.from_dict(entry["report"])
        by_digest[digest] = function
        report.functions.append(function)
    imported = data.get("imported")
    if not (isinstance(imported, list) and all(isinstance(p, str) for p in imported)):
        imported = None
    return Decoded(report, by_digest, imported)
