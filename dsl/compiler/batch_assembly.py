"""Kernel resources (registers, spills, stack, static shared memory) of many PTX modules from
one ptxas run: what `kdsl lint` needs of ptxas, at a fraction of its cost.

Starting ptxas and tearing it down costs about as much CPU as compiling a small module, and
a lint of a project runs it once per function. ptxas takes several PTX files at once as one
program, so modules that share a target go to one run: each module's own symbols (its
kernels, device functions, globals, shared arrays and dynamic shared memory; not the
driver's `vprintf`) get a prefix that makes them distinct, its line
information is dropped (`.loc` / `.file`: ptxas allocates registers the same without it,
as `toolchain.strip_debug_sections` explains), and the log's per-kernel figures are mapped
back through the prefix. Only modules whose dynamic shared memory asks for the same
alignment share a run (ptxas pads every kernel's static shared memory to the program's
largest), and a module whose symbol is also an instruction name (a kernel called `add`)
could not be renamed textually without touching the instruction, so it runs alone.

Only resources come back, not cubins: lint shows diagnostics, never runs or disassembles
the code, and the editor makes a kernel's cubin only when a view asks for it
(`CompiledFunction.assembled_cubin`; `Batches` collects one analysis's modules). When the
combined run fails, each module runs alone, so an error names the one module it belongs
to, with ptxas's own message. Every run has a time limit per module and a memory cap, as
the analysis runs that would otherwise have run ptxas have.
`tests/compiler/test_batch_assembly.py` checks the figures against one ptxas run per module
for every example.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import hashlib
import re
import resource
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from dsl.compiler.artifacts import Resources
from dsl.compiler.toolchain import ToolError, parse_ptxas_info, ptxas_path, usable_ptxas

_DEFINITION = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+|\.extern\s+)?"
                         r"(\.entry|\.func|\.global|\.shared|\.const)\b(.*)$")
_CALLABLE_NAME = re.compile(r"([A-Za-z_$%][\w$]*)\s*\(")
_VARIABLE_NAME = re.compile(r"([A-Za-z_$%][\w$]*)\s*(?:\[|;|=)")
_OPCODE = re.compile(r"^\s*(?:@!?%\w+\s+)?([A-Za-z_]\w*)")
_LINE_INFO = (".loc", ".file")
T = TypeVar("T")
BATCH = 24  # modules per ptxas run: start-up amortized, batches still small enough to overlap compiling


def module_symbols(ptx: str) -> list[str]:
    """The program-wide names a PTX module defines: its functions, and its `.global`,
    `.shared` and `.const` variables, at the top level or inside a function (ptxas allocates
    those for the whole program: two modules' kernel-local shared arrays of one name would be
    taken for one), and its dynamic shared memory (an `.extern .shared` array: shared by
    every module, it would take the largest alignment any of them asks for and pad the static
    shared memory of all their kernels). Other `.extern`s (the driver's `vprintf`) keep
    their names."""
    names = []
    depth = 0
    for line in ptx.splitlines():
        stripped = line.strip()
        if not stripped.startswith(".extern") or re.match(r"\.extern\s+\.shared\b", stripped):
            m = _DEFINITION.match(line)
            if m is not None and (depth == 0 or m.group(1) not in (".entry", ".func")):
                kind, rest = m.groups()
                if kind in (".entry", ".func"):
                    rest = re.sub(r"^\s*\([^)]*\)\s*", "", rest)  # a device function's return parameter
                    found = _CALLABLE_NAME.search(rest)
                else:
                    found = _VARIABLE_NAME.search(rest)
                if found is not None:
                    names.append(found.group(1))
        depth += line.count("{") - line.count("}")
    return names


def renamed(ptx: str, prefix: str) -> str | None:
    """`ptx` with every symbol it defines prefixed and its line information dropped; None
    when a symbol is also one of its instruction names (textual renaming is then unsafe)."""
    names = set(module_symbols(ptx))
    lines = [line for line in ptx.splitlines() if not line.lstrip().startswith(_LINE_INFO)]
    opcodes = {m.group(1) for line in lines if (m := _OPCODE.match(line))}
    if names & opcodes:
        return None
    text = "\n".join(lines) + "\n"
    if names:
        pattern = re.compile(r"(?<![\w$%])(" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
                             + r")(?![\w$.])")
        text = pattern.sub(lambda m: prefix + m.group(1), text)
    return text


class Timeout(ToolError):
    """ptxas did not finish one module within the time limit."""


def resources_of(modules: Sequence[str], arch: str, *, timeout: float | None = None,
                 memory_mb: int = 0) -> list[dict[str, Resources] | ToolError]:
    """Each module's per-kernel resources for `arch` (or the ToolError ptxas gave it), in order.

    `timeout` (seconds) is per module: a run of several gets that much per module in it, and
    a module alone that takes longer is a `Timeout`; `memory_mb` caps each ptxas process's
    address space (0: no cap). ptxas runs no user code, but user code chooses what it compiles."""
    try:
        usable_ptxas()
    except ToolError as err:
        return [err for _ in modules]
    limits = (timeout, memory_mb)
    found: dict[int, dict[str, Resources] | ToolError] = {}
    batches: dict[int | None, list[tuple[int, str, str]]] = {}  # (position, prefix, renamed text) by alignment
    for i, ptx in enumerate(modules):
        prefix = f"__kdsl_m{i}_"
        text = renamed(ptx, prefix)
        if text is None:
            found[i] = _ptxas([ptx], arch, limits)
        else:
            batches.setdefault(dynamic_smem_alignment(ptx), []).append((i, prefix, text))
    for batch in batches.values():
        together = _ptxas([text for _, _, text in batch], arch, limits) if len(batch) > 1 else None
        for i, prefix, _ in batch:
            if isinstance(together, dict):
                found[i] = {name[len(prefix):]: res for name, res in together.items() if name.startswith(prefix)}
            else:  # alone, or the run failed: which module does ptxas refuse?
                found[i] = _ptxas([modules[i]], arch, limits)
    return [found[i] for i in range(len(modules))]


_DYNAMIC_SMEM = re.compile(r"^\s*\.extern\s+\.shared\s+(?:\.align\s+(\d+)\s+)?", re.M)


def dynamic_smem_alignment(ptx: str) -> int | None:
    """The alignment a module's dynamic shared memory asks for (None: it has none).

    ptxas rounds the static shared memory of every kernel of a program up to the largest
    such alignment in it, so only modules that ask for the same one share a run."""
    found = [int(m.group(1) or 1) for m in _DYNAMIC_SMEM.finditer(ptx)]
    return max(found) if found else None


def _ptxas(texts: list[str], arch: str, limits: tuple[float | None, int]) -> dict[str, Resources] | ToolError:
    """One ptxas run over `texts` (one PTX file each): the log's figures, or its error."""
    timeout, memory_mb = limits
    with tempfile.TemporaryDirectory(prefix="kdsl-") as tmp:
        files = []
        for k, text in enumerate(texts):
            file = Path(tmp) / f"m{k}.ptx"
            file.write_text(text)
            files.append(str(file))
        proc = subprocess.Popen([str(ptxas_path()), f"-arch={arch}", "-O3", "-v", *files, "-o",
                                 str(Path(tmp) / "all.cubin")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        if memory_mb > 0 and hasattr(resource, "prlimit"):  # Linux
            with contextlib.suppress(OSError, ValueError):
                resource.prlimit(proc.pid, resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
        try:
            log, _ = proc.communicate(timeout=None if timeout is None else timeout * len(texts))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return Timeout(f"ptxas did not finish within the time limit ({timeout:g} s a module)")
    if proc.returncode != 0:
        return ToolError(log.strip())
    return parse_ptxas_info(log)


def split_evenly(items: list[T], parts: int) -> list[list[T]]:
    """`items` in at most `parts` runs of nearly equal length, in order (what is left to
    assemble once nothing else runs beside it goes to every thread at once)."""
    share = max(1, -(-len(items) // max(1, parts)))
    return [items[start:start + share] for start in range(0, len(items), share)]


class Batches:
    """One analysis's modules, assembled for their figures `BATCH` to a ptxas run in `pool`'s
    threads while the caller lowers the next functions. Waiting for a module not yet sent
    sends everything collected, split over `threads` runs (nothing is left to compile beside
    them). A module met twice (a kernel compiled alone and inside the jit that launches it)
    is assembled once. Not thread-safe: one compiling thread starts and waits."""

    def __init__(self, pool: concurrent.futures.Executor, threads: int):
        self._pool = pool
        self._threads = max(1, threads)
        self._collected: dict[str, list[tuple[str, str]]] = {}  # arch -> (key, ptx) not yet sent
        self._sent: dict[str, tuple[concurrent.futures.Future, int]] = {}  # key -> (its run, its place)

    def start(self, ptx: str, arch: str) -> Callable[[], dict[str, Resources]]:
        """Queues `ptx`; the returned function waits for its kernels' figures (raises the
        `ToolError` ptxas gave the module)."""
        key = f"{hashlib.sha256(ptx.encode()).hexdigest()}:{arch}"
        waiting = self._collected.setdefault(arch, [])
        if key not in self._sent and all(k != key for k, _ in waiting):
            waiting.append((key, ptx))
            if len(waiting) >= BATCH:
                self._send(arch, self._collected.pop(arch))

        def wait() -> dict[str, Resources]:
            if key not in self._sent:
                self._send_all()
            run, place = self._sent[key]
            found = run.result()[place]
            if isinstance(found, ToolError):
                raise found
            return {name: dataclasses.replace(res) for name, res in found.items()}  # the caller fills them in

        return wait

    def _send_all(self) -> None:
        for arch in list(self._collected):
            for part in split_evenly(self._collected.pop(arch), self._threads):
                self._send(arch, part)

    def _send(self, arch: str, modules: list[tuple[str, str]]) -> None:
        run = self._pool.submit(resources_of, [ptx for _, ptx in modules], arch)
        for place, (key, _) in enumerate(modules):
            self._sent[key] = (run, place)
