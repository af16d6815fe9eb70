"""Finding a function's source in a big file: each lookup reads only that function.

`SourceFile.segment` must give exactly what `ast.get_source_segment` gives (which splits the
whole file on every call, once per function and per edit in the editor's worker), and
`function_source` must find the same `def` the walk over the whole tree found, from an
index built once per parse.
"""

from __future__ import annotations

import ast
import linecache
from pathlib import Path

import pytest

from dsl.frontend import source
from dsl.frontend.source import SourceFile, function_source, load_file

TEXTS = {
    "ascii": "x = 1\n\ndef f(a,\n      b):\n    return (a +\n            b)\n",
    "non-ascii": "s = 'é€😀'; t = 2\n\ndef g():\n    return 'ß' + \\\n        'ü'\n",
    "crlf and cr": "a = 1\r\nb = [1,\r\n  2]\rdef h():\r\n    return b\r\n",
    "form feed and U+2028": "a = '\u2028'\n\x0cb = 3\ndef i():\n    return 'x\u2028y'\n",
    "no final newline": "def j():\n    return {'k': [1, 2,\n        3]}",
}


@pytest.mark.parametrize("text", TEXTS.values(), ids=TEXTS.keys())
def test_segment_is_get_source_segment(text: str) -> None:
    file = SourceFile("<t>", text, ast.parse(text))
    nodes = [n for n in ast.walk(file.tree) if hasattr(n, "lineno")]
    assert nodes
    for node in nodes:
        assert file.segment(node) == (ast.get_source_segment(text, node) or ""), ast.dump(node)


NESTED = '''\
import functools


def deco(fn):
    return fn


@deco
@functools.lru_cache
def first():
    def inner():
        return 1
    return inner


class Holder:
    def method(self):
        async def later():
            return 2
        return later

    @staticmethod
    def first():
        return 3
'''


def test_function_source_finds_each_def(tmp_path: Path) -> None:
    path = tmp_path / "nested.py"
    path.write_text(NESTED)
    namespace: dict = {}
    exec(compile(NESTED, str(path), "exec"), namespace)
    first, holder = namespace["first"], namespace["Holder"]
    found = {
        "first": function_source(first),
        "inner": function_source(first.__wrapped__()),
        "method": function_source(holder.method),
        "later": function_source(holder().method()),
        "Holder.first": function_source(holder.first),
    }
    assert {name: (src.node.name, src.node.lineno) for name, src in found.items()} == {
        "first": ("first", 10),
        "inner": ("inner", 11),
        "method": ("method", 17),
        "later": ("later", 18),
        "Holder.first": ("first", 23),
    }
    assert found["later"].text == "async def later():\n            return 2"
    assert found["first"].text == ast.get_source_segment(NESTED, found["first"].node)


def test_a_buffer_is_parsed_once_for_all_its_functions(tmp_path: Path) -> None:
    path = str(tmp_path / "many.py")
    text = "".join(f"def f{i}():\n    return {i}\n\n" for i in range(50))
    linecache.cache[path] = (len(text), None, text.splitlines(keepends=True), path)
    namespace: dict = {}
    exec(compile(text, path, "exec"), namespace)
    before = source._parse.cache_info()
    sources = [function_source(namespace[f"f{i}"]) for i in range(50)]
    after = source._parse.cache_info()
    assert after.misses - before.misses == 1 and after.hits == before.hits  # one parse, then the index
    assert all(src.file is sources[0].file for src in sources)
    assert [src.text for src in sources[:2]] == ["def f0():\n    return 0", "def f1():\n    return 1"]
    assert load_file(path) is sources[0].file


REPOSITORY = Path(__file__).resolve().parents[2]
SOURCES = sorted([*(REPOSITORY / "dsl").rglob("*.py"), *(REPOSITORY / "lsp").rglob("*.py"),
                  *(REPOSITORY / "examples").glob("*.py")])


def _dump(tree: ast.AST) -> str:
    return ast.dump(tree, include_attributes=True)


def test_parse_module_is_ast_parse_on_every_file_of_the_repository() -> None:
    """Each file whole, then again with a line added in its middle (which may fall in a string
    or a bracket, or make it invalid): the same tree, or the same error, as `ast.parse`."""
    assert len(SOURCES) > 50
    for path in SOURCES:
        text = path.read_text()
        lines = text.splitlines(keepends=True)
        edited = "".join(lines[: len(lines) // 2]) + "x_edit = 1\n" + "".join(lines[len(lines) // 2 :])
        for version in (text, edited):
            try:
                expected = _dump(ast.parse(version, filename=str(path)))
            except SyntaxError as error:
                with pytest.raises(SyntaxError) as raised:
                    source.parse_module(version, str(path))
                assert (raised.value.msg, raised.value.lineno, raised.value.offset) == (
                    error.msg, error.lineno, error.offset)
                continue
            assert _dump(source.parse_module(version, str(path))) == expected, path


SYNTAX_ERRORS = {
    "a bracket open at the top": "x = (1,\n",
    "a colon missing": "def f()\n    return 1\n",
    "an unterminated string at the end": 'y = """abc\n',
    "inconsistent tabs": "if True:\n\tx = 1\n        y = 2\n",
}


@pytest.mark.parametrize("broken", SYNTAX_ERRORS.values(), ids=SYNTAX_ERRORS.keys())
def test_a_syntax_error_is_pythons(broken: str) -> None:
    text = '"""A docstring\nwhose lines start\nat column 0."""\n\n' + NESTED
    for version in (broken + text, text + broken, text.replace("class Holder:", broken + "class Holder:")):
        with pytest.raises(SyntaxError) as expected:
            ast.parse(version, filename="<broken>")
        source.parse_module(text, "<broken>")  # the last good version, as in an editor
        with pytest.raises(SyntaxError) as raised:
            source.parse_module(version, "<broken>")
        assert (raised.value.msg, raised.value.lineno, raised.value.offset, raised.value.end_offset) == (
            expected.value.msg, expected.value.lineno, expected.value.offset, expected.value.end_offset)


def test_unchanged_blocks_keep_their_nodes() -> None:
    text = '"""A docstring\nwhose lines start\nat column 0."""\n\n' + NESTED
    before = source.parse_module(text, "<kept>")
    after = source.parse_module(text.replace("return 3", "return 4"), "<kept>")
    assert _dump(after) == _dump(ast.parse(text.replace("return 3", "return 4")))
    same = [a is b for a, b in zip(before.body, after.body)]
    assert same == [True] * (len(same) - 1) + [False]  # only `class Holder`, which changed
