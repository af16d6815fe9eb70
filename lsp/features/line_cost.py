"""What each kernel line costs in SASS, for the line-cost inlay hints (`inlayHints.lineCost`).

The figures are the compiler's (`dsl.compiler.source_maps.sass_line_costs` over the SASS of
each kernel's cubin, which `kdsl ir --stage sass --line-cost` prints too). The SASS comes from
nvdisasm (after ptxas, for a kernel whose cubin the analysis left to be made on request),
about half a second per kernel, so it is made only when the setting is on, only for the
kernels in the range the client asks about, off the event loop, a few kernels per request
(the rest follow in the background, then the client is asked to refresh), and once per
compiled text: an edit that leaves a kernel's PTX as it was costs nothing here.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable

from dsl.compiler.artifacts import CompiledFunction, ModuleReport
from dsl.compiler.source_maps import LineCost, sass_line_costs
from dsl.compiler.toolchain import ToolError

DISASSEMBLED_PER_REQUEST = 4  # a screen shows a few kernels; more would keep the answer waiting seconds
_CACHE_SIZE = 256
_BY_CODE: OrderedDict[str, list[LineCost]] = OrderedDict()  # `_code_key` -> its line costs
_LOCK = threading.Lock()  # requests fill the cache from the executor's threads
log = logging.getLogger(__name__)


def _code_key(compiled: CompiledFunction) -> str | None:
    """What a kernel's SASS lines follow from: its PTX (a moved result's PTX names the moved
    lines) for its target, or else its cubin and the shift its line table gets; None: neither."""
    if "ptx" in compiled.stages:
        what = f"{compiled.target}\n{compiled.stages['ptx']}".encode()
    elif compiled.cubin is not None:
        what = compiled.cubin + repr(sorted(compiled.cubin_line_shift.items())).encode()
    else:
        return None
    return hashlib.sha256(what).hexdigest()


def _cached(key: str) -> list[LineCost] | None:
    with _LOCK:
        known = _BY_CODE.get(key)
        if known is not None:
            _BY_CODE.move_to_end(key)
        return known


def _disassembled(key: str, compiled: CompiledFunction) -> list[LineCost]:
    try:
        text = compiled.sass  # assembled first, if the analysis left the cubin to be made on request
    except ToolError as err:
        log.warning("no SASS line costs for %s: %s", compiled.name, err)
        text = None
    costs = sass_line_costs(text) if text is not None else []
    with _LOCK:
        _BY_CODE[key] = costs
        while len(_BY_CODE) > _CACHE_SIZE:
            _BY_CODE.popitem(last=False)
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
        key = _code_key(compiled) if fn.kind == "kernel" and compiled is not None else None
        if key is None or (wanted is not None and fn.name not in wanted):
            continue
        costs = _cached(key)
        if costs is None:
            if budget is not None and budget <= 0:
                left_out = True
                continue
            costs = _disassembled(key, compiled)
            budget = None if budget is None else budget - 1
        for cost in costs:
            if cost.file == path:
                out.setdefault(cost.line, cost)
    return out, left_out
