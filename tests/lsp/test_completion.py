"""Completion in kernel and jit bodies: the `dsl.` API valid on that side, tensor members,
launch keywords.

Fixture: data/typed_values.py (kernel `row_sum` at lines 8-22, jit `run_row_sum` at 26-28),
opened with one line replaced by what is being typed. What may be used where is the
language's own registry (`dsl.language.placement`); these tests hold the editor to it and
spell out the names that must or must not appear.
"""

from __future__ import annotations

import inspect

from lsprotocol import types
from pygls import uris

import dsl
from dsl.language.placement import BOTH, DEVICE, HOST, placement
from tests.lsp.conftest import ROOT, initialize, open_file, pos, read, tdi

KERNEL_LINE, JIT_LINE = 8, 26  # 0-based: `row = dsl.block_idx.x`, `rows = x.shape[0]`


def exported() -> dict[str, object]:
    """Every name `dsl` exports (`__all__`, and the language's own names beside it)."""
    names = {n: getattr(dsl, n, None) for n in dsl.__all__}
    names.update({n: v for n, v in vars(dsl).items() if not n.startswith("_") and placement(v, n)})
    return names


def placed(*sides: str) -> list[str]:
    return sorted((n for n, v in exported().items() if placement(v, n) in sides), key=lambda n: (n.lower(), n))


async def complete(client, line: int, typed: str, trigger: str | None = None) -> list[types.CompletionItem]:
    """Opens the fixture with 0-based `line` replaced by `typed`; completes at its end, as
    typing `trigger` asks (else as the user asks)."""
    lines = read("typed_values.py").split("\n")
    lines[line] = typed
    uri = open_file(client, "typed_values.py", "\n".join(lines))
    context = types.CompletionContext(
        trigger_kind=types.CompletionTriggerKind.TriggerCharacter if trigger else types.CompletionTriggerKind.Invoked,
        trigger_character=trigger)
    result = await client.text_document_completion_async(
        types.CompletionParams(text_document=tdi(uri), position=pos(line, len(typed)), context=context))
    assert isinstance(result, types.CompletionList)
    return list(result.items)


def labels(items: list[types.CompletionItem]) -> list[str]:
    return [i.label for i in items]


MARKDOWN = types.ClientCapabilities(text_document=types.TextDocumentClientCapabilities(
    completion=types.CompletionClientCapabilities(
        completion_item=types.ClientCompletionItemOptions(documentation_format=[types.MarkupKind.Markdown]))))


async def test_kernel_body_offers_device_and_shared_api_only(client):
    await initialize(client, trusted=False)  # completion needs no compiler
    found = labels(await complete(client, KERNEL_LINE, "    row = dsl."))
    assert found == placed(DEVICE, BOTH)
    for name in ("barrier", "thread_idx", "shfl_xor", "atomic_add", "SharedAllocator", "exp", "f32", "cdiv",
                 "static_range", "warp_size"):
        assert name in found
    for name in ("sm_count", "device_attribute", "kernel", "jit", "compile", "Tensor", "TensorSpec", "Diagnostic"):
        assert name not in found


async def test_jit_body_offers_host_and_shared_api_only(client):
    await initialize(client, trusted=False)
    found = labels(await complete(client, JIT_LINE, "    rows = dsl."))
    assert found == placed(HOST, BOTH)
    for name in ("sm_count", "device_attribute", "cdiv", "f32", "Int32", "const_expr", "min", "max"):
        assert name in found
    for name in ("barrier", "thread_idx", "shfl_xor", "exp", "SharedAllocator", "kernel", "compile"):
        assert name not in found


async def test_module_level_offers_everything(client):
    await initialize(client, trusted=False)
    found = labels(await complete(client, 3, "TILE = dsl."))
    assert found == sorted(exported(), key=lambda n: (n.lower(), n))


async def test_items_carry_signature_and_documentation(client):
    """Documentation is Markdown for a client that reads it, else the same text, plain."""
    await client.initialize_session(types.InitializeParams(
        capabilities=MARKDOWN, root_uri=uris.from_fs_path(str(ROOT)), initialization_options={"trusted": False}))
    items = {i.label: i for i in await complete(client, KERNEL_LINE, "    row = dsl.")}
    shfl = items["shfl_xor"]
    assert shfl.kind == types.CompletionItemKind.Function
    assert shfl.detail == "shfl_xor(value, mask, width=32)"
    assert shfl.documentation == types.MarkupContent(kind=types.MarkupKind.Markdown,
                                                     value=inspect.cleandoc(dsl.shfl_xor.__doc__ or ""))
    assert items["ballot"].detail == "ballot(predicate, mask=0xFFFFFFFF)"
    thread_idx = items["thread_idx"]
    assert (thread_idx.kind, thread_idx.detail) == (types.CompletionItemKind.Variable, "Dim3")
    assert thread_idx.documentation == types.MarkupContent(
        kind=types.MarkupKind.Markdown, value="Index of the thread within its block (`threadIdx`), per axis, as i32.")
    assert (items["Float32"].kind, items["Float32"].detail) == (types.CompletionItemKind.Class,
                                                                "scalar type f32")


async def test_an_alias_of_the_module_completes_the_same(client):
    await initialize(client, trusted=False)
    text = read("typed_values.py").replace("import dsl\n", "import dsl\nimport dsl as D\n", 1)
    lines = text.split("\n")
    lines[KERNEL_LINE + 1] = "    row = D."
    uri = open_file(client, "typed_values.py", "\n".join(lines))
    result = await client.text_document_completion_async(
        types.CompletionParams(text_document=tdi(uri), position=pos(KERNEL_LINE + 1, len("    row = D."))))
    assert isinstance(result, types.CompletionList)
    assert labels(list(result.items)) == placed(DEVICE, BOTH)


async def test_tensor_members_depend_on_the_side(client):
    await initialize(client, trusted=False)
    kernel_side = await complete(client, KERNEL_LINE, "    row = x.")
    assert labels(kernel_side) == ["shape", "strides", "dtype", "rank", "vload", "vstore", "view"]
    assert kernel_side[4].detail == "Tensor.vload"
    assert [i.kind for i in kernel_side[4:]] == [types.CompletionItemKind.Method] * 3  # vload, vstore, view
    assert labels(await complete(client, JIT_LINE, "    rows = x.")) == ["shape", "strides", "dtype"]


async def test_thread_index_axes(client):
    await initialize(client, trusted=False)
    assert labels(await complete(client, KERNEL_LINE, "    row = dsl.thread_idx.")) == ["x", "y", "z"]
    assert labels(await complete(client, JIT_LINE, "    rows = dsl.thread_idx.")) == []  # device only


async def test_launch_and_its_keywords(client):
    await initialize(client, trusted=False)
    launch = await complete(client, 27, "    row_sum(x, out, x.shape[1], 128).")
    assert labels(launch) == ["launch"]
    assert launch[0].detail == "launch(grid, block, smem=None, stream=None, cluster=None)"
    given_grid = await complete(client, 27, "    row_sum(x, out, x.shape[1], 128).launch(grid=rows, ")
    # the keywords not given yet, then the DSL names the module imported that host code may use
    assert labels(given_grid) == ["block=", "smem=", "stream=", "cluster=", "Int32", "f32"]
    positional = await complete(client, 27, "    row_sum(x, out, x.shape[1], 128).launch(rows, BLOCK, st")
    assert labels(positional) == ["smem=", "stream=", "cluster=", "Int32", "f32"]
    assert positional[1].insert_text == "stream="


async def test_typing_an_open_parenthesis_pops_up_only_launch_keywords(client):
    await initialize(client, trusted=False)
    assert labels(await complete(client, KERNEL_LINE, "    row = dsl.exp(", trigger="(")) == []
    assert labels(await complete(client, KERNEL_LINE, "    row = dsl.exp(acc, ", trigger=",")) == []
    launch = await complete(client, 27, "    row_sum(x, out, x.shape[1], 128).launch(", trigger="(")
    assert labels(launch) == ["grid=", "block=", "smem=", "stream=", "cluster=", "Int32", "f32"]


async def test_nothing_to_complete_after_a_number_or_an_unknown_receiver(client):
    await initialize(client, trusted=False)
    assert labels(await complete(client, KERNEL_LINE, "    row = 1.")) == []
    assert labels(await complete(client, KERNEL_LINE, "    row = unknown_thing.")) == []


async def test_documentation_is_plain_text_for_a_client_without_markdown(client):
    await initialize(client, trusted=False)
    items = {i.label: i for i in await complete(client, KERNEL_LINE, "    row = dsl.")}
    assert items["barrier"].documentation == inspect.cleandoc(dsl.barrier.__doc__ or "")


def test_a_new_intrinsic_is_device_code_unless_the_language_says_otherwise():
    """What completion filters by is the language's rule, not a list: anything a
    `dsl.language` module defines is device code by default."""

    def mma_new(a, b):  # as if added to dsl/language/tensor_cores.py
        raise RuntimeError

    mma_new.__module__ = "dsl.language.tensor_cores"
    assert placement(mma_new) == DEVICE
    assert placement(dsl.sm_count) == HOST
    assert placement(dsl.cdiv) == BOTH and placement(dsl.f32) == BOTH and placement(dsl.warp_size, "warp_size") == BOTH
    assert placement(dsl.kernel) is None and placement(dsl.Tensor) is None and placement(print) is None


def test_the_start_up_warm_up_loads_the_catalogue_and_leaves_jedi_free():
    """`jedi_use.warm_up` (run in a thread after `initialized`) builds the `dsl` catalogue and
    makes jedi's first inference; it must leave the lock free for the handlers."""
    import threading

    from lsp.features import dsl_api, jedi_use

    dsl_api.dsl_names.cache_clear()
    worker = threading.Thread(target=jedi_use.warm_up)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive() and not jedi_use.LOCK.locked()
    assert dsl_api.dsl_names.cache_info().currsize == 1 and dsl_api.dsl_names()
