"""Code lenses: per kernel and jit function, the resource summary, Compile, Run on GPU, Profile on
GPU, Show IR; a kernel's Run on GPU and Profile on GPU run the jit function that launches it. A
client whose capabilities say `experimental.kdsl.debugLens` (the VS Code extension) also gets
Debug on CPU, its own command `kdsl.debugFunction`; other clients do not.

Fixtures: data/saxpy.py (both compile), data/broken.py (`bad` fails with a type error).
"""

from __future__ import annotations

import attrs
import pytest
from lsprotocol import types
from pygls import uris

from tests.lsp.conftest import CAPABILITIES, ROOT, TEST_OPTIONS, initialize, open_file, pos, report_of, tdi


def expected(uri: str, name: str, line: int, start: int, title: str, runs: str | None = "",
             debug: bool = False) -> list[tuple]:
    """The lenses of `name`; `runs` is the jit function its run lens runs ("" for itself, None
    for no run lens: a kernel that no jit function of the file launches); `debug`: the client
    runs `kdsl.debugFunction`, so Debug on CPU follows Profile on GPU."""
    rng = types.Range(start=pos(line, start), end=pos(line, start + len(name)))
    run = [] if runs is None else [
        (rng, f"Run on GPU: {runs}" if runs else "Run on GPU", "kdsl.run", [uri, runs or name]),
        (rng, f"Profile on GPU: {runs}" if runs else "Profile on GPU", "kdsl.profile", [uri, runs or name]),
    ]
    if debug and runs is not None:
        debug_title = f"Debug on CPU: {runs}" if runs else "Debug on CPU"
        run.append((rng, debug_title, "kdsl.debugFunction", [uri, runs or name]))
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


DEBUGGING_CLIENT = attrs.evolve(CAPABILITIES, experimental={"kdsl": {"debugLens": True}})
UNTRUSTED = "static checks only (untrusted workspace)"


async def initialize_with(client, capabilities: types.ClientCapabilities) -> None:
    """As `initialize`, untrusted (nothing compiles, so the lenses come at once), with `capabilities`."""
    await client.initialize_session(
        types.InitializeParams(
            capabilities=capabilities,
            root_uri=uris.from_fs_path(str(ROOT)),
            initialization_options={**TEST_OPTIONS, "trusted": False},
        )
    )


async def test_a_client_that_runs_kdsl_debug_function_gets_debug_on_cpu(client):
    """The VS Code extension's capabilities: each jit function, and each kernel a jit launches,
    gets Debug on CPU with `[uri, jit]`, beside the run lenses (saxpy.py: `run_saxpy` launches `saxpy`)."""
    await initialize_with(client, DEBUGGING_CLIENT)
    uri = open_file(client, "saxpy.py")
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(text_document=tdi(uri)))
    assert flatten(lenses) == expected(uri, "saxpy", 5, 4, UNTRUSTED, "run_saxpy", debug=True) + expected(
        uri, "run_saxpy", 12, 4, UNTRUSTED, debug=True)


@pytest.mark.parametrize("experimental", [None, {"kdsl": {"debugLens": "yes"}}, {"debugLens": True}])
async def test_no_debug_lens_without_the_capability(client, experimental):
    """A client that says nothing, or anything but `kdsl.debugLens: true`, gets no Debug on CPU."""
    await initialize_with(client, attrs.evolve(CAPABILITIES, experimental=experimental))
    uri = open_file(client, "saxpy.py")
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(text_document=tdi(uri)))
    assert flatten(lenses) == expected(uri, "saxpy", 5, 4, UNTRUSTED, "run_saxpy") + expected(
        uri, "run_saxpy", 12, 4, UNTRUSTED)
