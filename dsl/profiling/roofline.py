"""A kernel launch on its GPU's roofline: the figures, a line of text, and a small SVG picture.

The roofline model bounds a kernel's FLOP rate by `min(compute roof, intensity x DRAM roof)`,
intensity being FLOPs per DRAM byte. A kernel doing several kinds of work (tensor-core MMAs and
an FP32 epilogue) has the roof of its mix: all its FLOPs over the time each kind would take at
its own peak. The ridge is where that roof meets the DRAM roof (`peak / bandwidth`, FLOP/byte):
left of it the kernel is memory-bound, right of it compute-bound; `pct_of_roof` says how close
the kernel got to the roof above its intensity.

Everything here is pure: the figures come from `flops` and `peaks`, and `roofline_svg` returns
plain SVG text (log-log axes, the DRAM roof, the compute roofs, the kernel's point) that the
editor's hover embeds as an image.
"""

from __future__ import annotations

import base64
import math
from html import escape

from dsl.profiling.peaks import BF16_TENSOR, FP32, DevicePeaks
from dsl.profiling.records import KernelProfile, Roofline


def make_roofline(flops_by_kind: dict[str, float], dram_bytes: float | None, duration_s: float | None,
                  peaks: DevicePeaks | None) -> Roofline | None:
    """The launch's place under `peaks`' roofs, or None where it has none (no FLOPs, no DRAM
    traffic, no duration, or a kind of work whose roof is unknown)."""
    total = sum(flops_by_kind.values())
    if peaks is None or total <= 0 or not dram_bytes or not duration_s:
        return None
    if any(peaks.tflops.get(kind, 0.0) <= 0 for kind, flops in flops_by_kind.items() if flops > 0):
        return None
    seconds_at_peak = {kind: flops / (peaks.tflops[kind] * 1e12) for kind, flops in flops_by_kind.items() if flops > 0}
    peak = total / sum(seconds_at_peak.values()) / 1e12  # TFLOP/s of this mix
    kind = max(seconds_at_peak, key=lambda k: seconds_at_peak[k])
    intensity = total / dram_bytes
    ridge = peak / peaks.dram_tbs
    achieved = total / duration_s / 1e12
    attainable = min(peak, intensity * peaks.dram_tbs)
    roofs = {k: v for k, v in peaks.tflops.items() if k in (FP32, BF16_TENSOR) or k in flops_by_kind}
    return Roofline(peaks=peaks.source, dram_tbs=peaks.dram_tbs, roofs=roofs, kind=kind, peak_tflops=_sig(peak),
                    ridge=_sig(ridge), achieved_tflops=_sig(achieved),
                    bound="memory" if intensity < ridge else "compute", pct_of_roof=_sig(100.0 * achieved / attainable))


def _sig(value: float) -> float:
    """Six significant digits: what the figures mean, without float noise in the JSON."""
    return float(f"{value:.6g}")


def figure(value: float) -> str:
    """Three significant digits, without exponents: 0.0139, 4.09, 41.3, 989, 4,090."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    digits = max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{value:.{digits}f}"


def roofline_note(kernel: KernelProfile) -> str:
    """The roofline in words, for every front end: `AI 0.0139 FLOP/B · 0.0541 TFLOP/s fp32 · 81%
    of the memory roof · memory-bound (ridge 14.0 FLOP/B)`, or why there is none."""
    if kernel.flops is None:
        return ("roofline: this profile has no FLOP counts (an older kdsl made it, or its ncu lacked the counters): "
                "profile again")
    if kernel.flops == 0:
        return "roofline: no floating-point work counted (a data-movement kernel)"
    if kernel.arithmetic_intensity is None:
        return f"roofline: {figure(kernel.flops)} FLOPs but no DRAM bytes counted"
    roof = kernel.roofline
    ai = f"AI {figure(kernel.arithmetic_intensity)} FLOP/B"
    if roof is None:
        kinds = ", ".join(k for k, v in kernel.flops_by_kind.items() if v > 0)
        return f"{ai}; no roof known for this GPU's {kinds} work"
    return (f"{ai} · {figure(roof.achieved_tflops)} TFLOP/s {roof.kind} · {roof.pct_of_roof:.0f}% of the "
            f"{roof.bound} roof · {roof.bound}-bound (ridge {figure(roof.ridge)} FLOP/B)")


# The picture: a plot area inside margins, both axes log10.
WIDTH, HEIGHT = 440, 270
LEFT, RIGHT, TOP, BOTTOM = 50, 14, 26, 36
INK, GRID, MEMORY, ROOF, OWN_ROOF, POINT = "#333333", "#e4e4e4", "#1f77b4", "#8c8c8c", "#2ca02c", "#d62728"


def _decades(low: float, high: float) -> tuple[int, int]:
    return math.floor(math.log10(low)), math.ceil(math.log10(high))


def _tick(exponent: int) -> str:
    value = 10.0 ** exponent
    return f"{value:g}" if -3 <= exponent < 3 else f"1e{exponent}"


def _compute_roofs(roof: Roofline) -> list[tuple[str, float, bool]]:
    """(label, TFLOP/s, the kernel's own) per compute roof drawn: each of `roof.roofs`, and the
    roof of the kernel's mix of work where that is not within 5% of its main kind's."""
    out = [(kind, peak, kind == roof.kind and math.isclose(peak, roof.peak_tflops, rel_tol=0.05))
           for kind, peak in roof.roofs.items()]
    if not any(own for _, _, own in out):
        out.append(("this kernel's mix", roof.peak_tflops, True))
    return out


def roofline_svg(roof: Roofline, intensity: float, title: str) -> str:
    """The roofline picture (SVG text, `WIDTH` x `HEIGHT`): the DRAM roof up to the highest
    ridge, each compute roof flat from its ridge (the kernel's own in green), the kernel's point
    in red with a dotted line up to the roof above it, and `title` on top."""
    peaks = sorted(peak for _, peak, _ in _compute_roofs(roof))
    ridges = [p / roof.dram_tbs for p in peaks]
    x0, x1 = _decades(min(intensity, ridges[0]) / 3, max(intensity, ridges[-1]) * 10)
    x0 = max(x0, x1 - 9)  # at most nine decades each way: what lies beyond sits on the edge
    attainable = min(roof.peak_tflops, intensity * roof.dram_tbs)
    y0, y1 = _decades(min(roof.achieved_tflops, 10.0 ** x0 * roof.dram_tbs) / 2, peaks[-1] * 2)
    y0 = max(y0, y1 - 9)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(value: float) -> float:
        return LEFT + (math.log10(max(value, 10.0 ** x0)) - x0) / (x1 - x0) * plot_w

    def y(value: float) -> float:
        return TOP + plot_h - (math.log10(max(value, 10.0 ** y0)) - y0) / (y1 - y0) * plot_h

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="10" fill="{INK}">',
           f'<rect width="{WIDTH}" height="{HEIGHT}" rx="4" fill="#ffffff"/>',
           f'<text x="{LEFT}" y="16" font-size="11" font-weight="bold">{escape(title, quote=False)}</text>']
    for e in range(x0, x1 + 1):
        out.append(f'<line x1="{x(10.0 ** e):.1f}" y1="{TOP}" x2="{x(10.0 ** e):.1f}" y2="{TOP + plot_h}" '
                   f'stroke="{GRID}"/>')
        out.append(f'<text x="{x(10.0 ** e):.1f}" y="{TOP + plot_h + 12}" text-anchor="middle">{_tick(e)}</text>')
    for e in range(y0, y1 + 1):
        out.append(f'<line x1="{LEFT}" y1="{y(10.0 ** e):.1f}" x2="{LEFT + plot_w}" y2="{y(10.0 ** e):.1f}" '
                   f'stroke="{GRID}"/>')
        out.append(f'<text x="{LEFT - 4}" y="{y(10.0 ** e) + 3:.1f}" text-anchor="end">{_tick(e)}</text>')
    out.append(f'<text x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 6}" text-anchor="middle">'
               'arithmetic intensity (FLOP/byte)</text>')
    out.append(f'<text transform="translate(12 {TOP + plot_h / 2:.1f}) rotate(-90)" text-anchor="middle">'
               'TFLOP/s</text>')
    top_ridge = ridges[-1]
    out.append(f'<line x1="{x(10.0 ** x0):.1f}" y1="{y(10.0 ** x0 * roof.dram_tbs):.1f}" x2="{x(top_ridge):.1f}" '
               f'y2="{y(peaks[-1]):.1f}" stroke="{MEMORY}" stroke-width="2"/>')
    x_start, y_start = x(10.0 ** x0), y(10.0 ** x0 * roof.dram_tbs)
    angle = math.degrees(math.atan2(y(peaks[-1]) - y_start, x(top_ridge) - x_start))
    # the label sits above the roof at its slope, on the part of it away from the kernel's point
    along = 0.55 if (x(intensity) - x_start) < 0.45 * (x(top_ridge) - x_start) else 0.08
    lx, ly = x_start + along * (x(top_ridge) - x_start), y_start + along * (y(peaks[-1]) - y_start)
    out.append(f'<text transform="translate({lx:.1f} {ly - 4:.1f}) rotate({angle:.1f})" fill="{MEMORY}">'
               f'DRAM {figure(roof.dram_tbs)} TB/s</text>')
    labelled: list[float] = []
    for name, peak, own in sorted(_compute_roofs(roof), key=lambda r: r[1]):
        colour, width = (OWN_ROOF, 2) if own else (ROOF, 1)
        out.append(f'<line x1="{x(peak / roof.dram_tbs):.1f}" y1="{y(peak):.1f}" x2="{LEFT + plot_w}" '
                   f'y2="{y(peak):.1f}" stroke="{colour}" stroke-width="{width}"/>')
        label_y = y(peak) - 3
        if any(abs(label_y - other) < 11 for other in labelled):  # a roof just below: this label under its line
            label_y = y(peak) + 11
        labelled.append(label_y)
        out.append(f'<text x="{LEFT + plot_w - 2}" y="{label_y:.1f}" text-anchor="end" fill="{colour}">'
                   f'{escape(name, quote=False)} {figure(peak)}</text>')
    px, py = x(intensity), y(roof.achieved_tflops)
    out.append(f'<line x1="{px:.1f}" y1="{py:.1f}" x2="{px:.1f}" y2="{y(attainable):.1f}" stroke="{POINT}" '
               'stroke-dasharray="2 2"/>')
    out.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="4" fill="{POINT}"/>')
    anchor, dx = ("end", -7) if px > LEFT + plot_w * 0.6 else ("start", 7)
    out.append(f'<text x="{px + dx:.1f}" y="{py + 12:.1f}" text-anchor="{anchor}" fill="{POINT}">'
               f'{figure(roof.achieved_tflops)} TFLOP/s · {roof.pct_of_roof:.0f}% of roof</text>')
    out.append("</svg>")
    return "\n".join(out)


def data_uri(svg: str) -> str:
    """`svg` as a `data:image/svg+xml;base64,` URI (base64: no spaces or quotes for markdown to trip on)."""
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode("ascii")
