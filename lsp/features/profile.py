"""*Profile on GPU* (`kdsl.profile`, arguments `[uri, jit function]`): the GPU's counters per line.

The profile runs as *Run on GPU* runs, in a contained process of the analysis worker (the
user's module runs there, and ncu under it), with work-done progress. Its answer (the
`dsl.profiling` report, untrusted JSON from the user's process, read back through
`ProfileReport.from_json`) is kept per document and rendered here only:

- inlay hints at the end of the hot lines of the profiled file ("31% stalls · long
  scoreboard"), the lines holding at least `HOT_SHARE` of a kernel's warp samples, or its
  hottest `MAX_HINTS`;
- the kernel's hover gains the speed-of-light summary, the limiter and the roofline in words
  (`AI 0.0139 FLOP/B · ... · memory-bound`); for a client whose markdown renders images, also the
  roofline picture, an SVG in a `data:image/svg+xml;base64,` URI (VS Code allows data URIs in a
  hover's images, and they need no file the client could not read: the server may be remote). A
  client says it renders them by naming its markdown parser "marked" (LSP's
  `general.markdown`: vscode-languageclient does); other clients (Neovim, Helix, Emacs) would
  show the URI as text, so they get the words only;
- the SASS view (`kdsl/ir`, stage "sass") ends each sampled instruction's line with its
  samples and top stall;
- a hint whose line's text changed since the profile is dropped; one on a line that still
  reads the same in a later version is marked stale; closing the document forgets it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from dsl.profiling.records import KernelProfile, LineProfile, ProfileReport
from dsl.profiling.roofline import data_uri, roofline_note, roofline_svg
from dsl.profiling.table import line_note, summary
from lsp.convert import to_lsp_position
from lsp.text_model import line_content

if TYPE_CHECKING:
    from collections.abc import Sequence

    from lsp.server import KdslLanguageServer

PROFILE = "kdsl.profile"
LENS_TITLE = "Profile on GPU"
HOT_SHARE = 0.02
MAX_HINTS = 8


@dataclass
class Profiled:
    """A document's latest profile: the report, the version it ran, the text of its lines, and
    whether the client that asked for it renders images in its hovers."""

    report: ProfileReport
    version: int
    lines: dict[int, str]  # 1-based line -> its text when profiled
    images: bool = False


_profiles: dict[str, Profiled] = {}  # uri -> the latest profile (one server per process)


def remember(uri: str, report: ProfileReport, version: int, lines: Sequence[str], images: bool = False) -> None:
    _profiles[uri] = Profiled(report, version, {k + 1: line_content(t) for k, t in enumerate(lines)}, images)


def renders_images(capabilities: types.ClientCapabilities | None) -> bool:
    """Whether the client's markdown shows images: it names its parser "marked" (VS Code's)."""
    general = capabilities.general if capabilities is not None else None
    markdown = general.markdown if general is not None else None
    return markdown is not None and markdown.parser.lower() == "marked"


def forget(uri: str) -> None:
    _profiles.pop(uri, None)


def profiled(uri: str) -> Profiled | None:
    return _profiles.get(uri)


def hot_lines(kernel: KernelProfile, path: str) -> list[LineProfile]:
    """The kernel's lines of `path` worth a hint."""
    mine = [line for line in kernel.lines if line.file == path]
    return [line for k, line in enumerate(mine) if k < MAX_HINTS and (line.stall_share >= HOT_SHARE or k < 3)
            and line.samples > 0]


def profile_hints(uri: str, path: str, lines: Sequence[str], version: int, first: int,
                  last: int) -> list[types.InlayHint]:
    """Hints for the hot lines on 1-based lines `first`..`last` (see the module docstring)."""
    found = _profiles.get(uri)
    if found is None:
        return []
    stale = found.version != version
    out = []
    for kernel in found.report.kernels:
        for line in hot_lines(kernel, path):
            if not first <= line.line <= last or line.line > len(lines):
                continue
            text = line_content(lines[line.line - 1])
            if text != found.lines.get(line.line):
                continue  # the line changed: its figures are not about this text
            label = f"{kernel.name}: {line_note(line)}" if len(found.report.kernels) > 1 else line_note(line)
            if stale:
                label += " (stale: an earlier version was profiled)"
            stalls = ", ".join(f"{reason} {share * 100:.0f}%" for reason, share in line.top_stalls)
            tooltip = (f"{line.stall_share * 100:.1f}% of {kernel.name}'s warp samples; top stalls: {stalls or '-'}; "
                       f"{line.instructions} warp instructions executed")
            if line.sectors_per_request is not None:
                ideal = line.ideal_sectors_per_request
                tooltip += f"; {line.sectors_per_request:g} sectors per request (ideal {ideal:g})"
            if line.bank_conflicts:
                tooltip += f"; {line.bank_conflicts} shared-memory bank conflicts"
            out.append(types.InlayHint(position=to_lsp_position(line.line, len(text), lines), label=label,
                                       padding_left=True, tooltip=tooltip))
    return out


def kernel_hover(uri: str, name: str) -> str | None:
    """The profile's summary of kernel `name` (or of a jit function's kernels), for its hover."""
    found = _profiles.get(uri)
    if found is None:
        return None
    kernels = [k for k in found.report.kernels if k.name == name or found.report.function == name]
    if not kernels:
        return None
    parts = [f"**Profiled on {found.report.device}** ({found.report.function}):"]
    for k in kernels:
        duration = f"{k.duration_us:.2f} us" if k.duration_us is not None else "-"
        parts.append(f"- `{k.name}` launch {k.launch}: {duration} · {k.limiter}  \n  {summary(k)}  \n"
                     f"  {roofline_note(k)}")
        if found.images and k.roofline is not None and k.arithmetic_intensity:
            parts.append(f"\n  {roofline_image(k, found.report.device)}\n")
    return "\n".join(parts)


def roofline_image(kernel: KernelProfile, device: str) -> str:
    """The kernel's roofline picture as a markdown image (a data URI: see the module docstring)."""
    assert kernel.roofline is not None and kernel.arithmetic_intensity
    title = f"{kernel.name} on {device or 'the GPU'}: {kernel.roofline.bound}-bound"
    svg = roofline_svg(kernel.roofline, kernel.arithmetic_intensity, title)
    alt = f"roofline of {kernel.name}".replace("[", "(").replace("]", ")")
    return f"![{alt}]({data_uri(svg)})"


_SECTION = re.compile(r"^//-+ \.text\.(\S+)")
_OFFSET = re.compile(r"/\*([0-9a-f]{4,})\*/")


def annotate_sass(uri: str, text: str) -> str:
    """The SASS view with each sampled instruction's samples at its line's end
    (`// 35 samples, 12.0%: long scoreboard`); the lines stay where they are, so the view's
    source map still holds."""
    found = _profiles.get(uri)
    if found is None:
        return text
    by_kernel = {k.name: k for k in found.report.kernels}
    out, kernel = [], None
    for line in text.split("\n"):
        if m := _SECTION.match(line.strip()):
            kernel = by_kernel.get(m.group(1))
        elif kernel is not None and (m := _OFFSET.search(line)):
            total = sum(i.samples for i in kernel.sass) or 1
            hit = next((i for i in kernel.sass if i.offset == int(m.group(1), 16)), None)
            if hit is not None:
                line += f"  // {hit.samples} samples, {hit.samples / total * 100:.1f}%: {hit.top_stall}"
        out.append(line)
    return "\n".join(out)


async def profile_function(ls: KdslLanguageServer, uri: str, name: str) -> dict[str, Any]:
    from lsp.features.commands import runnable

    document = await runnable(ls, uri)
    if isinstance(document, dict):
        return document
    text, path = document
    state = ls.documents.get(uri)
    version = state.version if state is not None else 0
    result = await ls.worker().profile_on_gpu(text, path, name, device=ls.settings.device)
    if not result.get("ok"):
        return {**result, "message": f"{name}: profiling failed: {result.get('message') or 'unknown error'}"}
    try:
        report = ProfileReport.from_json(result.get("profile"))  # type: ignore[arg-type]
    except ValueError as err:
        return {"ok": False, "message": f"{name}: the profile could not be read: {err}"}
    remember(uri, report, version, text.splitlines(), renders_images(ls.client_capabilities))
    workspace = ls.client_capabilities.workspace
    if workspace is not None and workspace.inlay_hint is not None and workspace.inlay_hint.refresh_support:
        ls.workspace_inlay_hint_refresh(None)
    return {"ok": True, "message": f"{name} profiled: {result.get('message')}", "profile": report.to_json()}


def register(server: KdslLanguageServer) -> None:
    from lsp.features.commands import run_command

    @server.command(PROFILE)
    async def profile_command(ls, *arguments: Any) -> dict[str, Any]:
        return await run_command(ls, PROFILE, arguments, "Profiling {name} on the GPU (Nsight Compute)",
                                 profile_function)
