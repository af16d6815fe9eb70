"""What each kernel line costs in SASS, for the line-cost inlay hints (`inlayHints.lineCost`).

The figures are the compiler's (`dsl.compiler.source_maps.sass_line_costs` over the SASS of
each kernel's cubin, which `kdsl ir --stage sass --line-cost` prints too). The SASS comes from
nvdisasm, about half a second per kernel, so it is made only when the setting is on, only
for the kernels in the range the client asks about, off the event loop, a few kernels per
request (the rest follow in the background, then the client is asked to refresh), and once
per cubin: an edit that leaves a kernel's cubin as it was costs nothing here.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterable

from dsl.compiler.artifacts import CompiledFunction, ModuleReport
from dsl.compiler.source_maps import LineCost, sass_line_costs, sass_view

DISASSEMBLED_PER_REQUEST = 4  # a screen shows a few kernels; more would keep the answer waiting seconds
_CACHE_SIZE = 256
_BY_CUBIN: OrderedDict[str, list[LineCost]] = OrderedDict()  # sha256 of a cubin -> its line costs
_LOCK = threading.Lock()  # requests fill the cache from the executor's threads


def _cached(key: str) -> list[LineCost] | None:
    with _LOCK:
        known = _BY_CUBIN.get(key)
        if known is not None:
            _BY_CUBIN.move_to_end(key)
        return known


def _disassembled(key: str, cubin: bytes, text: str | None) -> list[LineCost]:
    if text is None:
        view = sass_view(cubin)
        text = view[0] if view is not None else None
    costs = sass_line_costs(text) if text is not None else []
    with _LOCK:
        _BY_CUBIN[key] = costs
        while len(_BY_CUBIN) > _CACHE_SIZE:
            _BY_CUBIN.popitem(last=False)
    return costs


def line_costs(report: ModuleReport, path: str, kernels: Iterable[str] | None = None,
               budget: int | None = None) -> tuple[dict[int, LineCost], bool]:
    """(1-based line of `path` -> its SASS cost, whether some kernel was left out), from each
    kernel's own compile (those named in `kernels`, default all), disassembling at most
    `budget` kernels not seen before (default: all of them). A helper line that several
    kernels inline shows the first kernel's figures, in source order. Blocking: call it
    from a thread."""
    wanted = set(kernels) if kernels is not None else None
    out: dict[int, LineCost] = {}
    left_out = False
    for fn in report.functions:
        compiled: CompiledFunction | None = fn.compiled
        if fn.kind != "kernel" or compiled is None or compiled.cubin is None:
            continue
        if wanted is not None and fn.name not in wanted:
            continue
        key = hashlib.sha256(compiled.cubin).hexdigest()
        costs = _cached(key)
        if costs is None:
            if budget is not None and budget <= 0:
                left_out = True
                continue
            costs = _disassembled(key, compiled.cubin, compiled.stages.get("sass"))
            budget = None if budget is None else budget - 1
        for cost in costs:
            if cost.file == path:
                out.setdefault(cost.line, cost)
    return out, left_out
