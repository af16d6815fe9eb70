"""The debug adapter over stdio, driven by a DAP client as an editor drives it.

Every test starts `python -m lsp.dap` and speaks the protocol to it; the values it checks
come from the NumPy model of each kernel in `data/kernels.py` run by `data/script.py`.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from tests.debugger.dap_client import DapClient

DATA = os.path.join(os.path.dirname(__file__), "data")
KERNELS = os.path.join(DATA, "kernels.py")
SCRIPT = os.path.join(DATA, "script.py")

pytest.importorskip("mlir")


@pytest.fixture
def client():
    c = DapClient(cwd=DATA)
    yield c
    c.close()


def _values(c: DapClient, frame: dict) -> dict[str, str]:
    return {name: v["value"] for name, v in c.locals(frame["id"]).items()}


def _lines_of(c: DapClient) -> list[tuple[str, int]]:
    frames = c.request("stackTrace", {"threadId": c.stopped_thread})["body"]["stackFrames"]
    return [(f["name"].split(" ")[0], f["line"]) for f in frames]


def test_breakpoints_stepping_and_the_focus_threads_values(client: DapClient):
    placed = client.start({"program": SCRIPT, "args": ["steps"], "block": [1, 0, 0], "thread": [5, 0, 0]},
                          {KERNELS: [{"line": 46}, {"line": 19}, {"line": 3}]})
    launch_bp, moved, outside = placed[KERNELS]
    assert (launch_bp["verified"], launch_bp["line"]) == (True, 47)  # the jit's launch, not its host statement
    assert (moved["verified"], moved["line"]) == (True, 21)  # a comment and a blank line move to the next statement
    assert not outside["verified"] and "not inside a function" in outside["message"]

    stop = client.stopped()
    assert stop["reason"] == "breakpoint" and stop["hitBreakpointIds"] == [launch_bp["id"]]
    client.stopped_thread = stop["threadId"]
    frame = client.top_frame(stop["threadId"])
    assert frame["line"] == 47 and frame["name"] == "launch of steps"
    launch = _values(client, frame)
    assert (launch["grid"], launch["block"]) == ("(4, 1, 1)", "(64, 1, 1)")

    client.request("stepIn")  # into the kernel, at the focus thread's first statement
    order = []
    for command in ["next", "next", "next", "stepIn", "stepIn"]:
        stop = client.stopped()
        order.append(_lines_of(client)[0][1])
        client.request(command)
    stop = client.stopped()
    assert order == [14, 15, 16, 17, 18]
    assert _lines_of(client) == [("scaled", 8), ("steps", 18), ("launch", 47)]  # the helper, inlined, as a frame
    helper = _values(client, client.top_frame(stop["threadId"]))
    x = np.arange(256, dtype=np.int32) * 3
    i = 1 * 64 + 5
    assert (helper["v"], helper["k"]) == (str(x[i]), "0")

    client.request("stepOut")  # back in the kernel, the loop's next round
    stop = client.stopped()
    assert _lines_of(client)[0] == ("steps", 18)
    assert _values(client, client.top_frame(stop["threadId"]))["k"] == "1"

    client.request("continue")  # to line 21
    stop = client.stopped()
    assert stop["hitBreakpointIds"] == [moved["id"]]
    frame = client.top_frame(stop["threadId"])
    names = client.locals(frame["id"])
    acc = sum(int(x[i]) * k + 1 for k in range(3))
    assert names["acc"]["value"] == str(acc) and names["i"]["value"] == str(i)
    pair = client.children(names["pair"]["variablesReference"])
    assert [pair["[0]"]["value"], pair["[1]"]["value"]] == [str(i), str(i + 1)]
    across = client.children(names["i"]["variablesReference"])
    warp = next(v for k, v in across.items() if k.startswith("warp"))
    assert warp["value"].startswith("int32 [32], 32 active [64, 65, 66,")  # every thread is at the statement
    block = client.children(next(v for k, v in across.items() if k.startswith("block"))["variablesReference"])
    assert [block[f"[{t}]"]["value"] for t in (0, 63)] == ["64", "127"]
    got = client.evaluate("acc * 2 + dsl.thread_idx.x", frame["id"])["body"]["result"]
    assert got == str(acc * 2 + 5)
    assert client.evaluate("x[i + 1]", frame["id"])["body"]["result"] == str(x[i + 1])

    client.request("continue")
    assert client.event("exited")["body"]["exitCode"] == 0
    client.event("terminated")
    out = 9 * np.arange(3) + 4  # the NumPy model: acc + 1 = 9 i + 4
    assert f"steps: {out.tolist()}" in client.output()


def test_conditions_hit_counts_logpoints_and_moving_the_focus(client: DapClient):
    placed = client.start({"program": SCRIPT, "args": ["steps"]},
                          {KERNELS: [{"line": 18, "condition": "dsl.thread_idx.x == 9 and k > 1"},
                                     {"line": 8, "hitCondition": "2"},
                                     {"line": 21, "logMessage": "i={i} acc={acc}"},
                                     {"line": 15, "hitCondition": "~3"}]})
    assert not placed[KERNELS][3]["verified"] and "hit count" in placed[KERNELS][3]["message"]
    x = np.arange(256, dtype=np.int32) * 3

    stop = client.stopped()  # the helper's line, its second hit: k == 1 for the focus thread (0, 0, 0)
    frame = client.top_frame(stop["threadId"])
    assert frame["line"] == 8 and _values(client, frame)["k"] == "1"

    client.request("continue")
    stop = client.stopped()  # the condition chose thread 9: the focus moved there
    assert "focus moved to thread (9, 0, 0) of block (0, 0, 0)" in stop["description"]
    frame = client.top_frame(stop["threadId"])
    values = _values(client, frame)
    assert (values["i"], values["k"]) == ("9", "2")
    assert values["acc"] == str(sum(int(x[9]) * k + 1 for k in range(2)))

    moved = client.request("kdsl/focus", {"block": [0, 0, 0], "thread": [12, 0, 0]})["body"]
    assert moved["thread"] == [12, 0, 0]
    assert client.event("invalidated")["body"]["areas"]
    frame = client.top_frame(stop["threadId"])
    assert _values(client, frame)["i"] == "12"
    bad = client.request("kdsl/focus", {"block": [9, 0, 0], "thread": [0, 0, 0]}, ok=False)
    assert not bad["success"] and "outside this launch" in bad["message"]

    client.request("continue")
    client.event("terminated")
    logged = [line for line in client.output().splitlines() if line.startswith("i=")]
    assert logged == [f"i=12 acc={9 * 12 + 3}"]  # once a batch, for the focus thread


def test_a_fault_stops_on_its_line_with_the_faulting_thread(client: DapClient):
    client.start({"program": SCRIPT, "args": ["fault"]})
    stop = client.stopped()
    assert stop["reason"] == "exception" and "out-of-bounds" in stop["text"]
    frame = client.top_frame(stop["threadId"])
    assert frame["line"] == 41 and "thread (4, 0, 0) of block (0, 0, 0)" in frame["name"]  # the first offender
    assert _values(client, frame)["i"] == "4"
    info = client.request("exceptionInfo", {"threadId": stop["threadId"]})["body"]
    assert info["exceptionId"] == "DSL601"
    client.request("continue")
    assert client.event("exited")["body"]["exitCode"] == 1
    output = client.output()
    assert "LaunchError" in output and "script.py" in output
    assert "decorators.py" not in output and "interpreted launcher" not in output  # the user's frames only


def test_shared_memory_after_a_barrier(client: DapClient):
    client.start({"program": SCRIPT, "args": ["shared"], "block": [1, 0, 0]}, {KERNELS: [{"line": 31}]})
    stop = client.stopped()
    frame = client.top_frame(stop["threadId"])
    names = client.locals(frame["id"])
    tile = client.children(names["tile"]["variablesReference"])
    model = 2.0 * np.arange(64, 128, dtype=np.float32)
    assert [float(tile[f"[{k}]"]["value"]) for k in range(64)] == model.tolist()
    assert float(client.evaluate("tile.sum()", frame["id"])["body"]["result"]) == model.sum()
    client.request("continue")
    client.event("terminated")


def test_terminate_in_the_middle(client: DapClient):
    client.start({"program": SCRIPT, "args": ["loop"]}, {KERNELS: [{"line": 21, "hitCondition": "3"}]})
    client.stopped()
    started = time.monotonic()
    client.request("terminate")
    client.event("terminated")
    assert time.monotonic() - started < 5
    client.request("disconnect")
    assert client.proc.wait(timeout=10) == 0


def test_bad_input_is_answered_and_the_session_lives(client: DapClient):
    client.send_raw(b"{not json")
    assert not client.request("bogusRequest", ok=False)["success"]
    assert "threadId" in client.request("stackTrace", {}, ok=False)["message"]
    assert not client.request("continue", ok=False)["success"]  # nothing is stopped
    client.request("initialize", {"adapterID": "kdsl"})
    client.event("initialized")
    unknown = client.request("launch", {"program": KERNELS, "function": "nosuch"}, ok=False)
    assert "no @dsl.jit function 'nosuch'" in unknown["message"] and "run_steps" in unknown["message"]
    placed = client.request("setBreakpoints", {"source": {"path": os.path.join(DATA, "not_a_kernel.py")},
                                               "breakpoints": [{"line": 5}]})["body"]["breakpoints"]
    assert not placed[0]["verified"] and "not a kdsl file" in placed[0]["message"]
    assert "not JSON" in client.output()
    client.request("launch", {"program": os.path.join(DATA, "broken.py"), "function": "run_broken"})
    client.request("configurationDone")
    assert client.event("exited")["body"]["exitCode"] == 1
    errors = [e["body"] for e in client.events if e["event"] == "output" and e["body"].get("line")]
    assert any("DSL301" in e["output"] and e["line"] == 10 for e in errors)  # the diagnostic, at its line


def test_a_jit_function_on_its_examples(client: DapClient):
    client.start({"program": KERNELS, "function": "run_steps", "block": [3, 0, 0], "thread": [1, 0, 0]},
                 {KERNELS: [{"line": 21}]})
    stop = client.stopped()
    frame = client.top_frame(stop["threadId"])
    assert _values(client, frame)["i"] == str(3 * 64 + 1)  # examples= sized the input: 4096 elements
    client.request("continue")
    assert client.event("exited")["body"]["exitCode"] == 0
    assert "run_steps: ran in" in client.output()


def test_a_divergent_barrier_stops_where_the_skipped_threads_wait(client: DapClient):
    client.start({"program": SCRIPT, "args": ["barrier"]})
    stop = client.stopped()
    assert stop["reason"] == "exception" and "barrier" in stop["text"]
    frame = client.top_frame(stop["threadId"])
    # the second barrier, reached by thread 16: the first thread that skipped the first one
    assert frame["line"] == 65 and "thread (16, 0, 0) of block (0, 0, 0)" in frame["name"]
    assert client.locals(frame["id"])["t"]["value"] == "16"
    client.request("continue")
    assert client.event("exited")["body"]["exitCode"] == 1


def test_warps_that_run_apart_stop_only_in_the_focus_threads_warp(client: DapClient):
    """A kernel with a named barrier runs one warp per thread of the interpreter: the breakpoint
    stops the focus thread's warp (warp 1 here), once; the other warp does not stop."""
    client.start({"program": SCRIPT, "args": ["warps"], "thread": [40, 0, 0]}, {KERNELS: [{"line": 79}]})
    stop = client.stopped()
    assert stop["threadId"] == 2  # warp 1, as the threads view numbers warps from 1
    frame = client.top_frame(stop["threadId"])
    assert frame["line"] == 79 and "thread (40, 0, 0)" in frame["name"]
    assert client.locals(frame["id"])["v"]["value"] == "80"
    client.request("continue")
    assert client.event("exited")["body"]["exitCode"] == 0
    assert sum(1 for e in client.events if e["event"] == "stopped") == 0  # the first was taken: no other
    assert "warps: [0, 81]" in client.output()
