"""The VS Code walk: the packaged extension in code-server 4.100.3, driven in Chromium as a new
user would drive it after the README's quick start.

Fixture: data/saxpy_block_contract.py, copied into a fresh workspace as `saxpy.py` — saxpy
whose `known_block_size=[256, 1, 1]` the jit's launch (`block=128`) contradicts (DSL202).

The tests are the steps of one walk, in order, in one window: the quick fix of step
`test_a_quick_fix_resolves_the_contract_error` changes the file the later steps see, and the
IR view opened by `test_show_ir_opens_the_ir_beside_the_source` is the one the linked
highlighting and refresh steps read. Each step leaves a screenshot named after it in the
artifacts folder, failed or not. The last step checks the whole walk: no error notification,
no error line in the kdsl output channel (and after which step each one appeared).
"""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, sync_playwright

from tests.editor.code_server import CodeServer, start_code_server
from tests.editor.conftest import DATA, required_file
from tests.editor.workbench import CHROMIUM_ARGS, TOAST_RECORDER, Editor, Workbench, wait_until

FIXTURE = DATA / "saxpy_block_contract.py"
FILE = "saxpy.py"
# Compiles on a busy two-core CI machine take seconds; waits on the compiler get this long.
COMPILER_S = 60
UI_MS = 30_000

# Lines of the fixture (1-based, as the editor shows them).
DECORATOR, KERNEL_DEF, KERNEL_I, KERNEL_STORE = 7, 8, 9, 11
JIT_DEF, LAUNCH = 15, 17
BLOCK_ARGUMENT_COLUMN = 61

# What an error line of the output channel looks like: the client library's `[Error - time]`,
# Python's logging and tracebacks, and `SomethingError:` messages.
ERROR_LINE = re.compile(r"\[Error\b|\bERROR\b|Traceback \(most recent call last\)|\b\w*(Error|Exception):")
# The one warning the walk asks for: Run on GPU, with no GPU, offers the interpreter.
NO_GPU_QUESTION = "Run it on the CPU with the interpreter?"


@dataclass
class Walk:
    """The window every step drives, and what the steps leave behind (screenshots, and the
    output channel's lines by the step that added them, so that an error line says when)."""

    server: CodeServer
    browser: BrowserContext
    workbench: Workbench
    artifacts: Path
    steps: int = 0
    channel_seen: int = 0  # characters of the kdsl channel already attributed to a step
    channel_by_step: list[tuple[str, str]] = field(default_factory=list)

    @property
    def source(self) -> Editor:
        return self.workbench.editor(0)

    @property
    def ir(self) -> Editor:
        return self.workbench.editor(1)

    def channel(self) -> str:
        return self.server.output_channel_log("kdsl")

    def end_step(self, name: str) -> None:
        """Screenshot of the step, and the output channel lines it added; then Escape closes
        what the step left open (a hover, a list), so the next step starts from the editor."""
        self.steps += 1
        self.workbench.page.screenshot(path=self.artifacts / f"{self.steps:02d}-{name}.png")
        self.workbench.page.keyboard.press("Escape")
        text = self.channel()
        self.channel_by_step.append((name, text[self.channel_seen:]))
        self.channel_seen = len(text)


@pytest.fixture(scope="module")
def walk(artifacts: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Walk]:
    code_server = required_file("KDSL_CODE_SERVER", "code-server", "code-server 4.100.3")
    chromium = required_file("KDSL_CHROMIUM", "/usr/bin/chromium", "Debian's chromium")
    vsix = required_file("KDSL_E2E_VSIX", "", "the packaged extension (.vsix)")
    root = tmp_path_factory.mktemp("code-server")
    workspace = root / "workspace"
    workspace.mkdir()
    shutil.copy(FIXTURE, workspace / FILE)
    server = start_code_server(code_server, vsix, workspace, root)
    playwright = sync_playwright().start()
    browser = playwright.chromium.launch_persistent_context(
        root / "chromium", executable_path=str(chromium), args=CHROMIUM_ARGS, headless=True,
        viewport={"width": 1920, "height": 1080})
    try:
        page = browser.pages[0] if browser.pages else browser.new_page()
        page.set_default_timeout(UI_MS)
        page.add_init_script(TOAST_RECORDER)
        page.goto(server.url)
        page.locator(".monaco-workbench").wait_for()
        workbench = Workbench(page)
        workbench.quick_open(FILE)
        page.locator(".editor-group-container .view-line", has_text="import dsl").wait_for()
        yield Walk(server, browser, workbench, artifacts)
    finally:
        shutil.copy(server.log, artifacts / "code-server.log")
        (artifacts / "kdsl-output-channel.log").write_text(server.output_channel_log("kdsl"))
        browser.close()
        playwright.stop()
        server.stop()


@pytest.fixture(autouse=True)
def step(walk: Walk, request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    walk.end_step(request.node.name)


def test_the_server_starts_from_the_interpreter_setting_and_lists_its_stages(walk: Walk):
    """`kdsl.interpreterPath` in the user settings starts the server, and `kdsl/capabilities`
    (sent by the client with no `params` member) answers with the stages."""
    walk.workbench.show_output_channel("kdsl")
    wait_until(walk.workbench.output_text, lambda text: "Server stages:" in text or "kdsl/capabilities:" in text,
               "the server's stages in the kdsl output channel", COMPILER_S)
    log = walk.channel()
    assert f"Python interpreter: {sys.executable} (from the kdsl.interpreterPath setting)" in log
    assert "kdsl/capabilities:" not in log, log
    assert re.search(r"Server stages: traced, lowered, llvm, ptx, sass\b", log), log


def test_the_problems_panel_shows_the_contract_error_at_its_line(walk: Walk):
    walk.workbench.problems()
    rows = wait_until(walk.workbench.problem_rows, lambda rows: any("known_block_size" in r for r in rows),
                      "the DSL202 error in the Problems panel", COMPILER_S)
    error = next(r for r in rows if r.startswith("Error: launch block"))
    assert error.startswith("Error: launch block x=128 differs from known_block_size x=256 declared on kernel 'saxpy'.")
    assert f"at line {LAUNCH} and character {BLOCK_ARGUMENT_COLUMN}." in error
    assert "generated by kdsl" in error
    related = [r for r in rows if r.startswith("known_block_size=[256, 1, 1] declared here")]
    assert related and f"at line {DECORATOR} and character 30 in {FILE}" in related[0]


def test_hover_on_a_kernel_shows_its_resources_and_lowered_mlir(walk: Walk):
    workbench = walk.workbench
    workbench.focus_group(0)
    workbench.go_to(KERNEL_DEF, 6)
    text = workbench.hover_text()
    assert text.startswith("@kernel saxpy")
    assert "registers" in text and "occupancy" in text
    assert "lowered MLIR" in text and "llvm.func @saxpy" in text


def test_inlay_hints_show_the_types_the_tracer_inferred(walk: Walk):
    lines = wait_until(walk.source.lines, lambda lines: lines.get(KERNEL_I, "").startswith("    i: i32 = "),
                       f"the inlay `i: i32` on line {KERNEL_I}", COMPILER_S)
    # (a line-cost hint may follow at the end of the line: the next step's subject)
    assert lines[KERNEL_I].startswith("    i: i32 = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x")


def test_line_cost_hints_follow_the_setting(walk: Walk):
    """The user settings turn `kdsl.inlayHints.lineCost` on: kernel lines end with their SASS count."""
    kernel_lines = range(KERNEL_I, KERNEL_STORE + 1)
    wait_until(walk.source.lines, lambda lines: any(re.search(r"\d+ SASS", lines.get(n, "")) for n in kernel_lines),
               f"a `N SASS` line-cost hint on lines {KERNEL_I}-{KERNEL_STORE}", COMPILER_S)


def _colour_of(spans: list[tuple[str, str]], word: str) -> str | None:
    found = [colour for text, colour in spans if text.strip() == word]
    return found[0] if found else None


def test_semantic_tokens_tell_compile_time_run_time_and_intrinsics_apart(walk: Walk):
    """In the default theme a Constexpr (`BLOCK`) and a run-time value (`n`) look different,
    and an intrinsic (`dsl.thread_idx`) gets a token of its own, coloured unlike plain text."""
    launch = walk.source.spans(LAUNCH)
    block, n = _colour_of(launch, "BLOCK"), _colour_of(launch, "n")
    assert block is not None and n is not None, launch
    assert block != n, f"BLOCK (compile-time) and n (run-time) are both {block}"
    body = walk.source.spans(KERNEL_I)
    thread_idx, module = _colour_of(body, "thread_idx"), _colour_of(body, "dsl")
    assert thread_idx is not None, f"dsl.thread_idx has no token of its own: {body}"
    assert thread_idx != module, f"thread_idx is coloured as plain text ({module})"


def test_run_lenses_sit_on_jit_functions_or_name_the_jit_they_run(walk: Walk):
    """A kernel is run through the jit that launches it: a Run lens on a kernel names that jit."""
    jit_lens = wait_until(lambda: walk.source.lens_text_above(JIT_DEF), lambda text: "Run on" in text,
                          "the jit's Run lens", COMPILER_S)
    assert "Run on GPU" in jit_lens
    kernel_lens = walk.source.lens_text_above(KERNEL_DEF)
    runs = [part.strip() for part in kernel_lens.split("|") if part.strip().startswith("Run on")]
    assert all(run.endswith(": run_saxpy") for run in runs), kernel_lens


def test_show_ir_opens_the_ir_beside_the_source(walk: Walk):
    workbench = walk.workbench
    workbench.focus_group(0)
    workbench.run_command("kdsl: Show IR")
    workbench.quick_pick("saxpy,")  # the row "saxpy, kernel, line 8" (not run_saxpy)
    workbench.quick_pick("lowered")
    wait_until(workbench.editor_groups, lambda groups: groups == 2, "a second editor group", 30)
    tab = workbench.page.locator(".editor-group-container").nth(1).locator(".tab.active")
    assert tab.inner_text().strip() == "saxpy.saxpy.lowered.mlir"
    wait_until(walk.ir.text, lambda text: "llvm.func @saxpy" in text, "the lowered MLIR of saxpy", COMPILER_S)


def _ir_line(walk: Walk, op: str) -> int:
    """The IR view's line holding `op`."""
    found = [n for n, text in sorted(walk.ir.lines().items()) if op in text]
    assert found, f"no {op} in the IR view:\n{walk.ir.text()}"
    return found[0]


def test_cursor_in_the_source_highlights_its_ir_lines(walk: Walk):
    workbench = walk.workbench
    workbench.focus_group(0)
    workbench.go_to(KERNEL_STORE, 9)
    fadd, store = _ir_line(walk, "llvm.fadd"), _ir_line(walk, "llvm.store")
    wait_until(walk.ir.decorated_lines, lambda lines: {fadd, store} <= set(lines),
               f"IR lines {fadd} (fadd) and {store} (store) highlighted", 30)


def test_cursor_in_the_ir_highlights_its_source_range(walk: Walk):
    workbench = walk.workbench
    workbench.focus_group(1)
    workbench.go_to(_ir_line(walk, "llvm.fadd"), 10)
    wait_until(walk.source.decorated_lines, lambda lines: lines == [KERNEL_STORE],
               f"source line {KERNEL_STORE} highlighted", 30)


def test_an_edit_refreshes_the_ir_view(walk: Walk):
    workbench = walk.workbench
    workbench.focus_group(0)
    workbench.replace_line(KERNEL_STORE, "y[i] = a * x[i] - y[i]")
    wait_until(walk.ir.text, lambda text: "llvm.fsub" in text and "llvm.fadd" not in text,
               "llvm.fsub in place of llvm.fadd in the IR view", COMPILER_S)


def test_a_quick_fix_resolves_the_contract_error(walk: Walk):
    workbench = walk.workbench
    workbench.focus_group(0)
    workbench.go_to(LAUNCH, BLOCK_ARGUMENT_COLUMN)
    workbench.page.keyboard.press("Control+.")
    actions = workbench.page.locator(".action-widget")
    actions.wait_for()
    labels = [r.get_attribute("aria-label") for r in actions.locator(".monaco-list-row").all()]
    assert "Launch with block=(256, 1, 1)" in labels, labels
    workbench.choose(actions, "Change known_block_size to [128, 1, 1]")
    fixed = "@dsl.kernel(known_block_size=[128, 1, 1])"
    wait_until(lambda: walk.source.lines().get(DECORATOR), lambda line: line == fixed, "the rewritten decorator", 30)
    panel = workbench.problems()
    wait_until(panel.inner_text, lambda text: "No problems have been detected in the workspace." in text,
               "an empty Problems panel", COMPILER_S)
    wait_until(walk.ir.text, lambda text: "nvvm.read.ptx.sreg.tid.x range <i32, 0, 128>" in text,
               "the IR view compiled for the new block (thread ids below 128)", COMPILER_S)


def test_completion_after_dsl_dot_lists_the_dsl_api(walk: Walk):
    workbench, page = walk.workbench, walk.workbench.page
    workbench.focus_group(0)
    workbench.go_to(KERNEL_STORE)
    page.keyboard.press("End")
    page.keyboard.press("Enter")
    page.keyboard.type("dsl.")
    rows = page.locator(".suggest-widget .monaco-list-row")
    labels = wait_until(lambda: [r.get_attribute("aria-label") or "" for r in rows.all()],
                        lambda labels: len(labels) > 3, "the completion list after `dsl.`", COMPILER_S)
    names = {label.split(",")[0] for label in labels}
    assert {"abs", "atomic_add", "barrier"} <= names, labels
    page.keyboard.type("thread_i")
    focused = page.locator(".suggest-widget .monaco-list-row.focused")
    wait_until(lambda: focused.get_attribute("aria-label") or "", lambda label: label.startswith("thread_idx,"),
               "thread_idx focused in the completion list", 30)
    page.screenshot(path=walk.artifacts / "completion-list.png")
    page.keyboard.press("Escape")
    page.keyboard.press("Control+Shift+K")  # delete the line again
    between = range(KERNEL_STORE + 1, JIT_DEF)  # two blank lines and the decorator, as before
    wait_until(lambda: [walk.source.lines().get(n) for n in between], lambda lines: lines == ["", "", "@dsl.jit"],
               "the typed line deleted", 30)


def _click_lens(walk: Walk, line: int, title: str) -> None:
    """Clicks the lens `title` above `line` once it is offered (lenses go while a file does not parse)."""
    wait_until(lambda: walk.source.lens_text_above(line), lambda text: title in text,
               f"the lens {title!r} above line {line}", COMPILER_S)
    lens = walk.source.lens_above(line)
    assert lens is not None
    lens.locator("a", has_text=title).click()


def test_run_on_cpu_shows_what_ran(walk: Walk):
    """With no GPU, Run on GPU offers the interpreter; declining says nothing more (no second
    warning), and the lens that then offers the interpreter runs it and shows what ran."""
    workbench = walk.workbench
    workbench.focus_group(0)
    earlier = len(workbench.toasts())
    _click_lens(walk, JIT_DEF, "Run on GPU")
    question = workbench.toast(NO_GPU_QUESTION)
    question.wait_for(timeout=COMPILER_S * 1000)
    buttons = question.locator(".notification-list-item-buttons-container")
    assert buttons.inner_text().strip() == "Run on CPU (interpreter)"
    workbench.expand(question)
    workbench.page.screenshot(path=walk.artifacts / "run-on-gpu-question.png")
    question.locator(".codicon-notifications-clear").click()  # decline
    _click_lens(walk, JIT_DEF, "Run on CPU (interpreter)")
    result = workbench.toast("on the CPU (interpreter)")
    result.wait_for(timeout=COMPILER_S * 1000)
    workbench.page.locator(".notification-toast.notification-fade-in-done .notification-list-item-message",
                           has_text="on the CPU (interpreter)").wait_for()  # on screen, for the screenshot
    workbench.expand(result)
    message = result.locator(".notification-list-item-message").inner_text()
    assert message.startswith("run_saxpy on the CPU (interpreter): "), message
    assert re.search(r"\bran in [\d.]+ (ms|s)\b", message), f"no run time in {message!r}"
    assert re.search(r"\bmin -?[\d.]+", message) and re.search(r"\bmax -?[\d.]+", message), message
    assert re.search(r"\bmean -?[\d.e+-]+", message) and "NaN" in message and "inf" in message, message
    assert "no reference declared" in message
    later = [t for t in workbench.toasts()[earlier:] if t["severity"] != "info" and NO_GPU_QUESTION not in t["message"]]
    assert later == [], f"declining the question was followed by {later}"


def test_debug_on_cpu_stops_at_a_breakpoint_with_the_focus_threads_variables(walk: Walk):
    """F9 on the kernel's store, then the Debug on CPU lens: the kdsl debugger (the extension
    starts `python -m lsp.dap`) stops there, the Variables view shows the focus thread's `i`
    (thread 0 of block 0: 0), and Continue runs the program to its end."""
    workbench = walk.workbench
    page = workbench.page
    workbench.focus_group(0)
    workbench.go_to(KERNEL_STORE)
    workbench.run_command("Debug: Toggle Breakpoint")
    _click_lens(walk, JIT_DEF, "Debug on CPU")
    page.locator(".debug-top-stack-frame-line").first.wait_for(timeout=COMPILER_S * 1000)  # stopped in the kernel
    rows = page.locator(".debug-view-content .monaco-list-row")
    top_frame = "saxpy · thread (0, 0, 0) of block (0, 0, 0) saxpy.py 11:1"
    # The Variables and Call Stack views render independently after the stop: wait for both.
    variables = wait_until(lambda: [r.inner_text().replace("\n", " ") for r in rows.all()],
                           lambda texts: "i = 0" in texts and any(t.startswith(top_frame) for t in texts),
                           "the focus thread's i and its top frame in the Run and Debug view", COMPILER_S)
    assert "n = 4096" in variables and "Thread" in variables, variables  # Run on CPU's inputs: 4096 elements
    assert any(t.startswith("warp 0 · threads 0-31 of block (0, 0, 0) (focus)") for t in variables), variables
    page.screenshot(path=walk.artifacts / "debug-stopped.png")
    workbench.run_command("Debug: Continue")
    page.locator(".debug-top-stack-frame-line").first.wait_for(state="detached", timeout=COMPILER_S * 1000)
    workbench.run_command("Debug: Toggle Breakpoint")  # the cursor is still on the line: off again


def test_no_error_notification_and_no_error_line_in_the_output_channel(walk: Walk):
    workbench = walk.workbench
    workbench.show_output_channel("kdsl")
    assert "Python interpreter:" in workbench.output_text()
    errors = workbench.notifications("error")
    assert errors == [], f"error notifications: {errors}"
    warnings = [w for w in workbench.notifications("warning") if NO_GPU_QUESTION not in w]
    assert warnings == [], f"warning notifications the walk did not ask for: {warnings}"
    by_step = [*walk.channel_by_step, ("the last step", walk.channel()[walk.channel_seen:])]
    error_lines = [f"after {step}: {line}" for step, text in by_step for line in text.splitlines()
                   if ERROR_LINE.search(line)]
    assert error_lines == [], "error lines in the kdsl output channel:\n" + "\n".join(error_lines)
