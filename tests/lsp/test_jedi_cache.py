"""jedi's parse cache, half written by another language server, is read past: kdsl empties its
own cache and asks jedi once more (found when two test workers' servers parsed the same files
at once, and completion after `dsl.thread_idx.` came back empty for good)."""

from __future__ import annotations

from pathlib import Path

import parso.cache

from lsp.features import jedi_use


def test_a_half_written_parse_cache_file_is_read_past(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path / "cache"))
    parso.cache.parser_cache.clear()  # modules parsed earlier in this process are parsed (and cached) again
    user = str(tmp_path / "user.py")

    def names() -> list[str]:
        return [n.name for n in jedi_use.resolved(
            lambda: jedi_use.script("import dsl\ndsl.thread_idx\n", user).infer(2, 6))]

    assert names() == ["Dim3"]  # what dsl.thread_idx is
    written = list(Path(jedi_use.cache_directory()).rglob("*.pkl"))
    assert written  # the module's parse was cached in kdsl's own folder
    for pickled in written:
        pickled.write_bytes(pickled.read_bytes()[:10])  # as a reader sees one being written
    parso.cache.parser_cache.clear()  # a fresh server: nothing in memory
    assert names() == ["Dim3"]  # what dsl.thread_idx is
