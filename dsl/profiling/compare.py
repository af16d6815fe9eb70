"""The CI gate: this profile against a baseline profile, kernel by kernel.

Kernels are matched by name and launch index. A kernel whose duration grew by more than
`fail_above_pct` percent fails the gate; kernels only in one of the two are listed, and do
not fail it (a renamed kernel is a change the reviewer sees, not a slowdown).
"""

from __future__ import annotations

from dataclasses import dataclass

from dsl.profiling.records import ProfileReport


@dataclass
class Comparison:
    ok: bool
    text: str


def compare(current: ProfileReport, baseline: ProfileReport, fail_above_pct: float) -> Comparison:
    before = {(k.name, k.launch): k for k in baseline.kernels}
    now = {(k.name, k.launch): k for k in current.kernels}
    lines, ok = [], True
    for key, kernel in now.items():
        name = f"{kernel.name} (launch {kernel.launch})"
        old = before.get(key)
        if old is None:
            lines.append(f"  {name}: new, {kernel.duration_us} us (not in the baseline)")
            continue
        if not old.duration_us or kernel.duration_us is None:
            lines.append(f"  {name}: no duration to compare")
            continue
        change = (kernel.duration_us - old.duration_us) / old.duration_us * 100.0
        slower = change > fail_above_pct
        ok &= not slower
        verdict = f"SLOWER than the limit of +{fail_above_pct:g}%" if slower else "ok"
        lines.append(f"  {name}: {kernel.duration_us:.2f} us, baseline {old.duration_us:.2f} us, "
                     f"{change:+.1f}%: {verdict}")
    lines += [f"  {name} (launch {launch}): in the baseline only" for name, launch in before if (name, launch)
              not in now]
    head = (f"{current.function}: every kernel within +{fail_above_pct:g}% of the baseline" if ok else
            f"{current.function}: a kernel got slower than the baseline by more than {fail_above_pct:g}%")
    return Comparison(ok, "\n".join([head, *lines]))
