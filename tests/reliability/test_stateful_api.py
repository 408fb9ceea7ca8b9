"""Model-based test of the HTTP API: a hypothesis state machine against a model of the session.

The model keeps what the protocol promises, independently of the code: the raw log (index,
window, kind, run), the state revision, the active window and every window's status and
origin, task memory, folds, coverage per window (moved by an external maintainer) and the
receipt of every dispatched call. Rules drive the API as a host would (inputs, host tool
exchanges, protocol tools including refused ones, stale calls, two calls in one answer,
replays, maintenance plan/page/commit); after every step the invariant compares the
session, the raw log, the projection (which raw messages and folds the model sees, in
order), the folds with their `compressed` flag and the KV with the model.

CI runs it derandomized: STATEFUL_EXAMPLES x STATEFUL_STEPS steps (default 6 x 40 = 240)
on each database. To search longer locally, raise them and let hypothesis pick seeds:

    STATEFUL_EXAMPLES=200 STATEFUL_STEPS=80 STATEFUL_RANDOM=1 \\
        .venv/bin/python -m pytest tests/reliability/test_stateful_api.py
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tests.conftest import KeyClient

WINDOW_NAMES = ("quote", "schedule", "budget", "review")
PAGE = 200  # the API's largest page


@dataclass
class Msg:
    index: int
    window: str
    kind: str
    run: int
    call_id: str | None = None


@dataclass
class Fold:
    fold_id: str
    window: str
    first: int
    last: int


@dataclass
class Model:
    revision: int = 1  # the session's creation is one KV transaction
    active: str = "main"
    windows: dict[str, dict[str, Any]] = field(
        default_factory=lambda: {"main": {"status": "active", "openedFrom": None}}
    )
    task_memory: str | None = None
    log: list[Msg] = field(default_factory=list)
    run: int = 0
    covered: dict[str, int] = field(default_factory=dict)
    folds: dict[str, Fold] = field(default_factory=dict)
    receipts: dict[str, tuple[dict, int]] = field(default_factory=dict)

    def append(self, kind: str, window: str, call_id: str | None = None) -> Msg:
        msg = Msg(len(self.log) + 1, window, kind, self.run, call_id)
        self.log.append(msg)
        return msg

    def window_log(self, window: str, above: int = 0) -> list[Msg]:
        return [m for m in self.log if m.window == window and m.index > above]

    def groups(self, window: str) -> list[tuple[int, int, bool]]:
        """(first, last, foldable) of the window's groups above its coverage (contract §2.7)."""
        groups: list[tuple[int, int, bool]] = []
        current: list[Msg] = []
        open_calls: set[str] = set()
        for m in self.window_log(window, self.covered.get(window, 0)):
            if m.kind == "input" and not open_calls:
                groups.append((m.index, m.index, False))
                continue
            current.append(m)
            if m.kind == "tool_call":
                open_calls.add(m.call_id or "")
            elif m.kind == "tool_result":
                open_calls.discard(m.call_id or "")
            if not open_calls:
                foldable = all(x.kind != "input" for x in current)
                groups.append((current[0].index, current[-1].index, foldable))
                current = []
        assert not current, "the machine never leaves a call unanswered"
        return groups

    def fold_spans(self, window: str) -> list[tuple[int, int]]:
        """Ranges a fold_create must accept: consecutive foldable groups of the window, not
        folded yet, with no other window's message between them (so the view's order of
        a fold and another window's input is never in question)."""
        groups = self.groups(window)
        folded = [f for f in self.folds.values() if f.window == window]
        usable = [g for g in groups if g[2] and not any(f.first <= g[0] <= f.last for f in folded)]
        spans = []
        for i, start in enumerate(usable):
            for end in usable[i:]:
                inside = self.log[start[0] - 1 : end[1]]
                if any(m.window != window for m in inside):
                    break
                between = [g for g in groups if start[0] <= g[0] <= end[1]]
                if any(g not in usable for g in between):
                    break
                spans.append((start[0], end[1]))
        return spans

    def expected_view(self) -> list[tuple]:
        """The history part of the projection: ('raw', index) and ('fold', id, first, last)."""
        window, covered = self.active, self.covered.get(self.active, 0)
        shown = {m.index for m in self.window_log(window, covered)}
        shown |= {m.index for m in self.log if m.kind == "input" and m.run == self.run}
        folds = [f for f in self.folds.values() if f.window == window and f.first > covered]
        items: list[tuple] = []
        for index in sorted(shown):
            fold = next((f for f in folds if f.first <= index <= f.last), None)
            if fold is None or self.log[index - 1].window != window:
                items.append(("raw", index))
            elif index == fold.first:
                items.append(("fold", fold.fold_id, fold.first, fold.last))
        return items


class ApiMachine(RuleBasedStateMachine):
    """Drives one new session per example through the API and checks it against Model."""

    app_client: KeyClient
    version_id: str
    seen: Counter = Counter()  # what the examples exercised, checked by the test

    def __init__(self) -> None:
        super().__init__()
        self.model = Model()
        self.calls = 0
        self.checked = 0  # messages already compared with the model
        self.last_view: dict | None = None

    # ------------------------------------------------------------------ plumbing

    def post(self, tail: str, body: Any = None, expect: int | tuple[int, ...] = (200, 201)):
        response = self.client.post(f"sessions/{self.sid}/{tail}", body)
        wanted = (expect,) if isinstance(expect, int) else expect
        assert response.status_code in wanted, (tail, response.status_code, response.content)
        return response.json()

    def get(self, tail: str, **params) -> dict:
        response = self.client.get(f"sessions/{self.sid}/{tail}", **params)
        assert response.status_code == 200, (tail, response.content)
        return response.json()

    def project(self) -> dict:
        view = self.post("projection/", {"provider": "neutral"}, 201)
        assert view["revision"] == self.model.revision
        assert view["upperBound"] == len(self.model.log)
        assert view["windowId"] == self.model.active
        self.last_view = view
        return view

    def view(self) -> dict:
        """The view a model would act on now: the invariant's, unless anything moved since."""
        last = self.last_view
        m = self.model
        if last and (last["revision"], last["upperBound"]) == (m.revision, len(m.log)):
            return last
        return self.project()

    def write_call(self, tool: str, arguments: dict, snapshot: dict) -> str:
        self.calls += 1
        call_id = f"c{self.calls}"
        written = self.post(
            "messages/",
            {
                "role": "assistant",
                "kind": "tool_call",
                "content": "",
                "toolCallId": call_id,
                "toolName": tool,
                "arguments": {"purpose": "model test", **arguments},
                "snapshotId": snapshot["snapshotId"],
            },
            201,
        )
        msg = self.model.append("tool_call", self.model.active, call_id)
        assert (written["index"], written["windowId"]) == (msg.index, msg.window)
        return call_id

    def dispatch(self, call_id: str) -> dict:
        receipt = self.post(f"tool-calls/{call_id}/dispatch/", None, 200)
        assert receipt["replayed"] is False
        call = next(m for m in self.model.log if m.call_id == call_id and m.kind == "tool_call")
        msg = self.model.append("tool_result", call.window, call_id)
        assert receipt["resultMessage"]["index"] == msg.index
        assert receipt["resultMessage"]["windowId"] == call.window  # the call's window
        self.model.receipts[call_id] = (receipt["result"], receipt["stateRevision"])
        return receipt

    def tool(self, tool: str, arguments: dict, snapshot: dict | None = None) -> dict:
        """Record a call from `snapshot` (a fresh view by default), dispatch it, check the
        revision: +1 exactly when a mutating tool succeeded."""
        before = self.model.revision
        receipt = self.dispatch(self.write_call(tool, arguments, snapshot or self.view()))
        result = receipt["result"]
        mutating = tool in (
            "context_task_memory_set",
            "context_window_open",
            "context_window_complete",
            "context_fold_create",
            "context_window_memory_set",
        )
        if result["success"] and mutating:
            self.model.revision += 1
        assert receipt["stateRevision"] == self.model.revision, (tool, result, before)
        return result

    def refused(self, result: dict, *codes: str) -> None:
        assert result["success"] is False, result
        assert result["error"]["code"] in codes, result
        self.seen[result["error"]["code"]] += 1

    # ------------------------------------------------------------------ rules

    @initialize()
    def start(self) -> None:
        created = self.app_client.post(
            "sessions/", {"agentVersionId": self.version_id, "inputs": {"user": "model test"}}
        )
        assert created.status_code == 201, created.content
        body = created.json()
        self.sid = body["id"]
        self.client = KeyClient(body["sessionKey"])
        self.user_input("start")

    @rule(text=st.sampled_from(["next step", "budget is now 9000", "back to the quote"]))
    def user_input(self, text: str) -> None:
        answer = self.post("inputs/", {"content": text}, 201)
        self.model.run += 1
        msg = self.model.append("input", self.model.active)
        assert answer["index"] == msg.index
        assert answer["message"]["windowId"] == msg.window

    @rule(size=st.sampled_from([20, 1200, 3000]))
    def host_exchange(self, size: int) -> None:
        view = self.view()
        self.calls += 1
        call_id = f"h{self.calls}"
        call = self.post(
            "messages/",
            {
                "role": "assistant",
                "kind": "tool_call",
                "content": "",
                "toolCallId": call_id,
                "toolName": "lookup",
                "arguments": {"q": call_id},
                "snapshotId": view["snapshotId"],
            },
            201,
        )
        result = self.post(
            "messages/",
            {"role": "tool", "kind": "tool_result", "content": "x" * size, "toolCallId": call_id},
            201,
        )
        first = self.model.append("tool_call", self.model.active, call_id)
        second = self.model.append("tool_result", self.model.active, call_id)
        assert (call["index"], result["index"]) == (first.index, second.index)

    @rule(memory=st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=30))
    def task_memory_set(self, memory: str) -> None:
        result = self.tool("context_task_memory_set", {"memory": memory})
        assert result["success"] is True, result
        self.model.task_memory = memory

    @rule(name=st.sampled_from(WINDOW_NAMES), resume=st.booleans())
    def window_open(self, name: str, resume: bool) -> None:
        m = self.model
        result = self.tool(
            "context_window_open",
            {
                "windowId": name,
                "goal": f"work on {name}",
                "input": "handoff",
                "resume": resume,
                "expectedWindowId": m.active,
            },
        )
        if name == m.active:
            return self.refused(result, "context_window_already_active")
        if name in m.windows and not resume:
            return self.refused(result, "context_window_exists")
        if name not in m.windows and resume:
            return self.refused(result, "context_window_not_found")
        self.switched(result, name, "window resumed" if resume else "window opened")

    @precondition(lambda self: len(self.model.windows) > 1)
    @rule(data=st.data())
    def window_resume(self, data: st.DataObject) -> None:
        m = self.model
        name = data.draw(st.sampled_from(sorted(w for w in m.windows if w != m.active)))
        result = self.tool(
            "context_window_open",
            {"windowId": name, "input": "back to it", "resume": True, "expectedWindowId": m.active},
        )
        self.switched(result, name, "window resumed")

    def switched(self, result: dict, name: str, what: str) -> None:
        m = self.model
        assert result["success"] is True, result
        assert (result["windowId"], result["previousWindowId"]) == (name, m.active)
        if m.windows[m.active]["status"] != "completed":
            m.windows[m.active]["status"] = "suspended"
        m.windows[name] = {"status": "active", "openedFrom": m.active}
        m.active = name
        self.seen[what] += 1

    @precondition(lambda self: self.model.active != "main")
    @rule()
    def window_complete(self) -> None:
        m = self.model
        result = self.tool(
            "context_window_complete", {"outcome": "done", "expectedWindowId": m.active}
        )
        assert result["success"] is True, result
        came_from = m.windows[m.active]["openedFrom"] or "main"
        target = came_from
        if came_from == m.active or m.windows.get(came_from, {}).get("status") == "completed":
            target = "main"
        assert result["windowId"] == target, (result, m.windows)
        m.windows[m.active]["status"] = "completed"
        m.windows[target]["status"] = "active"
        m.active = target
        self.seen["window completed"] += 1

    @rule(name=st.sampled_from(("main", *WINDOW_NAMES)), complete_main=st.booleans())
    def refused_writes(self, name: str, complete_main: bool) -> None:
        """A call on the wrong window, or completing main: refused, nothing changes."""
        m = self.model
        if complete_main and m.active == "main":
            result = self.tool(
                "context_window_complete", {"outcome": "done", "expectedWindowId": "main"}
            )
            return self.refused(result, "context_window_main_not_completable")
        if name == m.active:
            name = "elsewhere"
        result = self.tool(
            "context_window_memory_set", {"memory": "never written", "expectedWindowId": name}
        )
        self.refused(result, "context_window_mismatch")
        assert result["error"]["currentWindowId"] == m.active

    @rule()
    def stale_call(self) -> None:
        old = self.view()
        self.task_memory_set("moved on")
        result = self.tool("context_task_memory_set", {"memory": "stale"}, snapshot=old)
        self.refused(result, "context_state_stale")

    @rule(first_is_executed=st.booleans())
    def two_calls_in_one_answer(self, first_is_executed: bool) -> None:
        m = self.model
        view = self.view()
        first = self.write_call("context_task_memory_set", {"memory": "first call"}, view)
        second = self.write_call("context_task_memory_get", {}, view)
        order = (first, second) if first_is_executed else (second, first)
        for call_id in order:
            result = self.dispatch(call_id)["result"]
            if call_id == first:
                assert result["success"] is True, result
                m.revision += 1
                m.task_memory = "first call"
            else:
                self.refused(result, "single_tool_call_per_turn")
            assert m.receipts[call_id][1] == m.revision

    @precondition(lambda self: self.model.fold_spans(self.model.active))
    @rule(data=st.data())
    def fold_create(self, data: st.DataObject) -> None:
        m = self.model
        first, last = data.draw(st.sampled_from(m.fold_spans(m.active)), label="span")
        result = self.tool(
            "context_fold_create",
            {
                "fromIndex": first,
                "throughIndex": last,
                "summary": f"done #{first}-#{last}",
                "expectedWindowId": m.active,
            },
        )
        assert result["success"] is True, (result, first, last)
        assert (result["firstIndex"], result["lastIndex"]) == (first, last)
        m.folds[result["foldId"]] = Fold(result["foldId"], m.active, first, last)
        self.seen["fold created"] += 1

    @precondition(
        lambda self: any(
            f.window == self.model.active and f.first > self.model.covered.get(f.window, 0)
            for f in self.model.folds.values()
        )
    )
    @rule(data=st.data())
    def fold_over_a_fold(self, data: st.DataObject) -> None:
        m = self.model
        live = [
            f
            for f in m.folds.values()
            if f.window == m.active and f.first > m.covered.get(f.window, 0)
        ]
        fold = data.draw(st.sampled_from(live), label="fold")
        result = self.tool(
            "context_fold_create",
            {
                "fromIndex": fold.first,
                "throughIndex": fold.last,
                "summary": "again",
                "expectedWindowId": m.active,
            },
        )
        self.refused(result, "context_fold_overlap", "context_fold_nested")

    @precondition(lambda self: self.model.receipts)
    @rule(data=st.data())
    def replay(self, data: st.DataObject) -> None:
        call_id = data.draw(st.sampled_from(sorted(self.model.receipts)), label="call")
        receipt = self.post(f"tool-calls/{call_id}/dispatch/", None, 200)
        assert receipt["replayed"] is True
        assert (receipt["result"], receipt["stateRevision"]) == self.model.receipts[call_id]
        self.seen["replayed"] += 1

    @precondition(
        lambda self: (
            len(
                self.model.window_log(
                    self.model.active, self.model.covered.get(self.model.active, 0)
                )
            )
            >= 4
        )
    )
    @rule()
    def maintenance(self) -> None:
        """An external maintainer plans, reads every page and commits a checkpoint."""
        m = self.model
        window, covered = m.active, m.covered.get(m.active, 0)
        response = self.client.post(f"sessions/{self.sid}/windows/{window}/maintenance/plan/", {})
        if response.status_code != 201:
            assert response.status_code in (400, 409, 422), response.content
            code = response.json()["error"]["code"]
            assert code == "maintenance_nothing_to_compress", response.content
            self.seen[code] += 1
            return
        plan = response.json()
        through = plan["throughIndex"]
        assert plan["frozenRevision"] == m.revision
        ends = {g[1] for g in m.groups(window)}
        assert through in ends, (through, m.groups(window))  # a group boundary of W
        assert covered < through <= len(m.log)
        for f in m.folds.values():  # never cuts a fold
            assert f.window != window or f.last <= through or f.first > through
        seen = []
        for n in range(plan["pageCount"]):
            page = self.get(f"windows/{window}/maintenance/{plan['jobId']}/pages/{n}/")
            seen += [msg["index"] for msg in page["messages"]]
        assert seen == [x.index for x in m.window_log(window, covered) if x.index <= through]
        done = self.post(
            f"windows/{window}/maintenance/{plan['jobId']}/commit/",
            {"checkpoint": f"summary of {window} through #{through}"},
            200,
        )
        m.revision += 1
        m.covered[window] = through
        self.seen["checkpoint committed"] += 1
        if any(f.window == window and f.last <= through for f in m.folds.values()):
            self.seen["fold compressed"] += 1
        assert (done["stateRevision"], done["coveredThrough"]) == (m.revision, through)

    # ------------------------------------------------------------------ invariants

    def stored_log(self, after: int) -> list[tuple]:
        rows = []
        while True:
            page = self.get("messages/", limit=PAGE, afterIndex=after)
            rows += [
                (x["index"], x["windowId"], x["kind"], x["toolCallId"]) for x in page["messages"]
            ]
            if page["nextAfterIndex"] is None:
                return rows
            after = page["nextAfterIndex"]

    def model_log(self, after: int) -> list[tuple]:
        return [
            (x.index, x.window, x.kind, x.call_id if x.kind != "input" else None)
            for x in self.model.log[after:]
        ]

    @invariant()
    def the_view_state_and_log_agree_with_the_model(self) -> None:
        """After every step: the projection, the KV and the messages written since."""
        if not hasattr(self, "sid"):
            return
        m = self.model
        view = self.project()  # also checks revision, upper bound and window
        history = []
        for source in view["sources"]:
            if source["derivedType"] == "raw":
                assert source["firstIndex"] == source["lastIndex"]
                history.append(("raw", source["firstIndex"]))
            elif source["derivedType"] == "context_fold":
                history.append(
                    ("fold", source["foldId"], source["firstIndex"], source["lastIndex"])
                )
        assert history == m.expected_view(), (history, m.expected_view())

        entries = self.get("kv/", limit=PAGE)["entries"]
        kv = {e["key"]: e["value"] for e in entries}
        assert max(e["revision"] for e in entries) == m.revision
        assert kv["activeWindow"] == m.active
        assert kv.get("taskMemory") == m.task_memory
        windows = {k.removeprefix("window/"): v for k, v in kv.items() if k.startswith("window/")}
        assert {w: (v["status"], v["openedFrom"]) for w, v in windows.items()} == {
            w: (v["status"], v["openedFrom"]) for w, v in m.windows.items()
        }
        covered = {
            k.removeprefix("coveredThrough/"): v
            for k, v in kv.items()
            if k.startswith("coveredThrough/")
        }
        assert covered == m.covered
        folds = {k.removeprefix("fold/") for k in kv if k.startswith("fold/")}
        assert folds == set(m.folds)

        assert self.stored_log(self.checked) == self.model_log(self.checked)
        self.checked = len(m.log)

    def teardown(self) -> None:
        """At the end of each example: the whole log, the session and the folds read model."""
        if not hasattr(self, "sid"):
            return
        m = self.model
        assert self.stored_log(0) == self.model_log(0)  # gapless 1..N, windows, kinds
        session = self.get("")
        assert (session["stateRevision"], session["activeWindow"]) == (m.revision, m.active)
        assert session["lastIndex"] == len(m.log)
        folds = self.get("folds/", limit=PAGE)["folds"]
        assert {
            (f["foldId"], f["windowId"], f["firstIndex"], f["lastIndex"], f["compressed"])
            for f in folds
        } == {
            (f.fold_id, f.window, f.first, f.last, f.last <= m.covered.get(f.window, 0))
            for f in m.folds.values()
        }


def _settings() -> settings:
    examples = int(os.environ.get("STATEFUL_EXAMPLES", "6"))
    steps = int(os.environ.get("STATEFUL_STEPS", "40"))
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        derandomize=os.environ.get("STATEFUL_RANDOM") != "1",
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        print_blob=True,
    )


@pytest.mark.django_db
def test_the_api_never_diverges_from_the_model(tenant, make_version):
    app, client = tenant("model-based")
    # Small enough that a few host exchanges leave something for maintenance to compress.
    version = make_version(app, max_input_tokens=4500)
    ApiMachine.app_client = client
    ApiMachine.version_id = str(version.id)
    ApiMachine.seen = Counter()
    run_state_machine_as_test(ApiMachine, settings=_settings())
    print("exercised:", dict(ApiMachine.seen))
    # Not vacuous: every kind of step happened, refusals included.
    assert set(ApiMachine.seen) >= {
        "fold created",
        "checkpoint committed",
        "fold compressed",
        "replayed",
        "window opened",
        "window resumed",
        "window completed",
        "context_state_stale",
        "context_window_mismatch",
        "single_tool_call_per_turn",
        "context_fold_nested",
        "context_window_main_not_completable",
    }, ApiMachine.seen
