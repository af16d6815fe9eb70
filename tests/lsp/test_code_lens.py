"""Code lenses: per kernel and jit function, the resource summary, Compile, Run on GPU, Profile on
GPU, Show IR; a kernel's Run on GPU and Profile on GPU run the jit function that launches it.

Fixtures: data/saxpy.py (both compile), data/broken.py (`bad` fails with a type error).
"""

from __future__ import annotations

from lsprotocol import types

from tests.lsp.conftest import initialize, open_file, pos, report_of, tdi


def expected(uri: str, name: str, line: int, start: int, title: str, runs: str | None = "") -> list[tuple]:
    """The lenses of `name`; `runs` is the jit function its run lens runs ("" for itself, None
    for no run lens: a kernel that no jit function of the file launches)."""
    rng = types.Range(start=pos(line, start), end=pos(line, start + len(name)))
    run = [] if runs is None else [
        (rng, f"Run on GPU: {runs}" if runs else "Run on GPU", "kdsl.run", [uri, runs or name]),
        (rng, f"Profile on GPU: {runs}" if runs else "Profile on GPU", "kdsl.profile", [uri, runs or name]),
    ]
    return [
        (rng, title, "", None),
        (rng, "Compile", "kdsl.compile", [uri, name]),
        *run,
        (rng, "Show IR", "kdsl.showIr", [uri, name]),
    ]


def flatten(lenses) -> list[tuple]:
    return [
        (
            c.range,
            c.command.title,
            c.command.command,
            list(c.command.arguments) if c.command.arguments else None,
        )
        for c in lenses
    ]


def resources(report, name: str) -> str:
    kernels = [k for k in report.function(name).compiled.kernels if k.resources]
    if len(kernels) == 1:
        return kernels[0].resources.summary()
    return "; ".join(f"{k.source_name}: {k.resources.summary()}" for k in kernels)


async def test_lenses_show_resources_and_commands(client):
    await initialize(client)
    uri = open_file(client, "saxpy.py")
    report = report_of("saxpy.py")
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(text_document=tdi(uri)))
    assert flatten(lenses) == expected(uri, "saxpy", 5, 4, resources(report, "saxpy"), "run_saxpy") + expected(
        uri, "run_saxpy", 12, 4, resources(report, "run_saxpy")
    )


async def test_lens_of_a_failed_compile_names_the_code(client):
    await initialize(client)
    uri = open_file(client, "broken.py")
    report = report_of("broken.py")
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(text_document=tdi(uri)))
    code = report.function("bad").diagnostics[0].code
    # neither kernel is launched by a jit function of the file: nothing to run
    assert flatten(lenses) == expected(uri, "good", 5, 4, resources(report, "good"), None) + expected(
        uri, "bad", 10, 4, f"compile failed: {code}", None
    )


async def test_untrusted_lenses_say_so(client):
    await initialize(client, trusted=False)
    uri = open_file(client, "saxpy.py")
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(text_document=tdi(uri)))
    title = "static checks only (untrusted workspace)"
    assert flatten(lenses) == expected(uri, "saxpy", 5, 4, title, "run_saxpy") + expected(
        uri, "run_saxpy", 12, 4, title)
