"""*Profile on GPU* in the editor: `kdsl.profile`, and how a profile is shown (inlay hints on the
hot lines, the kernel's hover), going stale as the text changes.

Fixtures: data/saxpy.py for the command; the hints are made from the profile of
tests/profiling/planted.py recorded on an H200 (tests/profiling/data/run_strided.raw.json); the
roofline in the hover from the same profile (its FLOP counters, recorded with it) and, for a
profile an older kdsl made, without them (tests/profiling/recorded.py).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from lsprotocol import types

from dsl.profiling.analysis import kernel_profile
from dsl.profiling.records import ProfileReport
from dsl.runtime import driver
from lsp.features import profile
from tests.lsp.conftest import initialize, open_file, tdi
from tests.profiling.recorded import with_roofline_counters, without_roofline_counters

PROFILING = Path(__file__).resolve().parents[1] / "profiling"
PLANTED = (PROFILING / "planted.py").read_text().splitlines()


def recorded_report() -> ProfileReport:
    raw = json.loads((PROFILING / "data" / "run_strided.raw.json").read_text())
    kernel = kernel_profile(raw["actions"][0], 0, {"planted.py": PLANTED})
    return ProfileReport("run_strided", "planted.py", raw["device"], [kernel])


def test_hot_lines_get_hints_that_go_stale_and_go_away():
    uri = "file:///w/planted.py"
    report = recorded_report()
    profile.remember(uri, report, 3, PLANTED)
    try:
        hints = profile.profile_hints(uri, "planted.py", PLANTED, 3, 1, len(PLANTED))
        hot = report.kernels[0].lines[0]
        first = next(h for h in hints if h.position.line == hot.line - 1)
        assert first.position.character == len(PLANTED[hot.line - 1])
        assert str(first.label).startswith(f"{hot.stall_share * 100:.0f}% stalls · ")
        assert len(hints) >= 3 and all("stale" not in str(h.label) for h in hints)
        later = profile.profile_hints(uri, "planted.py", PLANTED, 4, 1, len(PLANTED))  # a later version, same text
        assert [str(h.label) for h in later] == [f"{h.label} (stale: an earlier version was profiled)" for h in hints]
        edited = list(PLANTED)
        edited[hot.line - 1] += "  # edited"
        gone = profile.profile_hints(uri, "planted.py", edited, 5, 1, len(edited))
        assert hot.line - 1 not in {h.position.line for h in gone} and len(gone) == len(hints) - 1
        hover = profile.kernel_hover(uri, "strided")
        assert hover is not None and hover.startswith("**Profiled on NVIDIA H200** (run_strided):")
        assert "memory-bound: 81% of DRAM peak" in hover and "DRAM 3.91 TB/s (81% of peak)" in hover
    finally:
        profile.forget(uri)


@pytest.mark.skipif(driver.available(), reason="a GPU is attached: the profile runs there")
async def test_profile_without_a_gpu_says_so(client):
    await initialize(client)
    uri = open_file(client, "saxpy.py")
    result = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="kdsl.profile", arguments=[uri, "run_saxpy"]))
    assert result["ok"] is False
    assert result["message"].startswith("run_saxpy: profiling failed: ") and "GPU" in result["message"]
    assert "Traceback" not in result["message"]
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(text_document=tdi(uri)))
    assert ("Profile on GPU", "kdsl.profile") in [(c.command.title, c.command.command) for c in lenses]


@pytest.mark.gpu
@pytest.mark.skipif(not driver.available(), reason="no NVIDIA GPU here")
async def test_profile_on_gpu_puts_hints_on_the_hot_line(client):
    from dsl.profiling.nsight import find_ncu

    if find_ncu() is None:
        pytest.skip("Nsight Compute (ncu) is not installed")
    await initialize(client)
    uri = open_file(client, "saxpy.py")
    result = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="kdsl.profile", arguments=[uri, "run_saxpy"]))
    assert result["ok"] is True, result["message"]
    assert result["message"].startswith("run_saxpy profiled: on NVIDIA")
    (kernel,) = result["profile"]["kernels"]
    assert kernel["name"] == "saxpy"
    assert kernel["limiter"].split(":")[0] in ("memory-bound", "compute-bound", "latency-bound")
    found = await client.text_document_inlay_hint_async(types.InlayHintParams(
        text_document=tdi(uri), range=types.Range(start=types.Position(0, 0), end=types.Position(20, 0))))
    stalls = {h.position.line + 1: str(h.label) for h in found or [] if "% stalls" in str(h.label)}
    assert 9 in stalls, stalls  # `y[i] = a * x[i] + y[i]`: the loads and the store


def test_the_sass_view_shows_each_sampled_instructions_samples():
    """The recorded profile's offsets are the kernel's own: compiled here for sm_90, the SASS
    view of `strided` has the same instructions at the same offsets as the profiled cubin."""
    import dsl

    uri = "file:///w/planted.py"
    report = recorded_report()
    profile.remember(uri, report, 1, PLANTED)
    try:
        path = str(PROFILING / "planted.py")
        sass = dsl.analyze_source("\n".join(PLANTED), path).function("strided").compiled.sass
        annotated = profile.annotate_sass(uri, sass)
        assert len(annotated.split("\n")) == len(sass.split("\n"))  # the source map still holds
        marked = [line for line in annotated.split("\n") if " samples, " in line]
        kernel = report.kernels[0]
        assert len(marked) == len(kernel.sass) > 10
        hottest = max(kernel.sass, key=lambda i: i.samples)
        line = next(line for line in marked if f"/*{hottest.offset:04x}*/" in line)
        assert line.endswith(f"// {hottest.samples} samples, "
                             f"{hottest.samples / sum(i.samples for i in kernel.sass) * 100:.1f}%: {hottest.top_stall}")
    finally:
        profile.forget(uri)


def roofline_report() -> ProfileReport:
    device, action = with_roofline_counters("run_strided")
    return ProfileReport("run_strided", "planted.py", device, [kernel_profile(action, 0, {"planted.py": PLANTED},
                                                                              device)])


def test_the_kernels_hover_has_the_roofline_in_words_and_for_vs_code_in_a_picture():
    uri = "file:///w/planted.py"
    report = roofline_report()
    try:
        profile.remember(uri, report, 1, PLANTED, images=True)
        hover = profile.kernel_hover(uri, "strided")
        assert hover is not None
        note = next(line.strip() for line in hover.split("\n") if line.strip().startswith("AI "))
        assert note.endswith("TFLOP/s fp32 · 81% of the memory roof · memory-bound (ridge 14.0 FLOP/B)")
        (image,) = [line.strip() for line in hover.split("\n") if line.strip().startswith("![")]
        assert image.startswith("![roofline of strided](data:image/svg+xml;base64,") and image.endswith(")")
        svg = base64.b64decode(image[len("![roofline of strided](data:image/svg+xml;base64,"):-1]).decode()
        assert svg.startswith("<svg ") and "strided on NVIDIA H200: memory-bound" in svg
        assert len(hover) < 20_000  # VS Code cuts a hover's markdown at 100,000 characters
        profile.remember(uri, report, 1, PLANTED, images=False)  # another editor: the words only
        words = profile.kernel_hover(uri, "strided")
        assert words is not None and "data:image" not in words and note in words
        device, action = without_roofline_counters("run_strided")
        older_report = ProfileReport("run_strided", "planted.py", device,
                                     [kernel_profile(action, 0, {"planted.py": PLANTED}, device)])
        profile.remember(uri, older_report, 1, PLANTED, images=True)  # profiled before the counters
        older = profile.kernel_hover(uri, "strided")
        assert older is not None and "data:image" not in older
        assert ("roofline: this profile has no FLOP counts (an older kdsl made it, or its ncu lacked the "
                "counters): profile again") in older
    finally:
        profile.forget(uri)


def test_only_a_client_whose_markdown_is_marked_gets_pictures():
    """vscode-languageclient sends `general.markdown = {parser: "marked", version: "1.1.0"}`."""
    vscode = types.ClientCapabilities(general=types.GeneralClientCapabilities(
        markdown=types.MarkdownClientCapabilities(parser="marked", version="1.1.0")))
    assert profile.renders_images(vscode)
    assert not profile.renders_images(types.ClientCapabilities())
    assert not profile.renders_images(types.ClientCapabilities(general=types.GeneralClientCapabilities(
        markdown=types.MarkdownClientCapabilities(parser="Python-Markdown", version="3.2"))))
