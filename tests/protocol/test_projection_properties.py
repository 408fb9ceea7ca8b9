"""Properties of the projection over random logs and states (hypothesis)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.groups import build_groups
from contextproto.protocol.messages import KIND_INPUT, KIND_TOOL_CALL, KIND_TOOL_RESULT, Fold
from contextproto.protocol.projection import Projection, ProjectionInput, project
from tests.protocol.logbuilder import LogBuilder, make_input

WINDOWS = ("main", "a", "b")
RUNS = ("1" * 32, "2" * 32, "3" * 32)


@dataclass
class Case:
    log: LogBuilder
    inp: ProjectionInput
    window: str
    covered: int
    dangling_visible: bool


def _exchange(log: LogBuilder, draw, window: str) -> None:
    """A group of 1-3 calls whose results may arrive with other messages in between."""
    calls = [
        log.call(draw(st.sampled_from(("search", "fetch", "shell"))))
        for _ in range(draw(st.integers(1, 3)))
    ]
    if draw(st.booleans()):
        log.approval(calls[0])
    if draw(st.booleans()):
        # Another window writes while this group is open (an input or a text there).
        other = draw(st.sampled_from([w for w in WINDOWS if w != window]))
        log.switch(other)
        log.input("meanwhile") if draw(st.booleans()) else log.text("elsewhere")
        log.switch(window)
    for call in draw(st.permutations(calls)):
        log.result(
            call,
            draw(st.sampled_from(("ok", "x" * 40, [{"type": "text", "text": "t"}]))),
            is_error=draw(st.booleans()),
        )


def _folds_over(groups, draw, window: str, log: LogBuilder, tag: str) -> list[Fold]:
    """Folds made of consecutive foldable groups, never overlapping (the fold rules' output)."""
    folds: list[Fold] = []
    i = 0
    while i < len(groups):
        if groups[i].foldable and draw(st.integers(0, 2)) == 0:
            j = i
            while j + 1 < len(groups) and groups[j + 1].foldable and draw(st.booleans()):
                j += 1
            folds.append(
                log.fold(
                    window,
                    groups[i].first_index,
                    groups[j].last_index,
                    f"summary {tag}{i}",
                    call_id=f"{tag}-{i}",
                )
            )
            i = j + 1
        else:
            i += 1
    return folds


@st.composite
def cases(draw) -> Case:
    log = LogBuilder(window="main", run=RUNS[0])
    for _ in range(draw(st.integers(0, 30))):
        op = draw(
            st.sampled_from(
                ("switch", "run", "input", "text", "instruction", "exchange", "exchange", "image")
            )
        )
        if op == "switch":
            log.switch(draw(st.sampled_from(WINDOWS)))
        elif op == "run":
            log.run = draw(st.sampled_from(RUNS))
        elif op == "input":
            log.input(f"input {len(log.messages) + 1}")
        elif op == "text":
            log.text(f"text {len(log.messages) + 1}")
        elif op == "instruction":
            log.instruction()
        elif op == "image":
            log.input(
                [
                    {"type": "text", "text": "see"},
                    {"type": "image", "mediaType": "image/png", "data": "AAAA"},
                ]
            )
        else:
            _exchange(log, draw, log.window)
    dangling_window = None
    if draw(st.integers(0, 4)) == 0:
        dangling_window = log.window
        log.call("pending")

    protocol = draw(st.sampled_from(("unified@1", "unified@2", "unified@3", "prefix@2")))
    protocol_id, version = protocol.split("@")
    window = "main" if protocol_id == "prefix" else draw(st.sampled_from(WINDOWS))
    groups = build_groups(log.of_window(window))
    closed = [g for g in groups if not g.open]
    covered = 0
    if closed and draw(st.booleans()):
        covered = draw(st.sampled_from(closed)).last_index
    below = [g for g in groups if g.last_index <= covered]
    above = [g for g in groups if g.first_index > covered]
    folds = [] if protocol_id == "prefix" else _folds_over(above, draw, window, log, "up")
    compressed = _folds_over(below, draw, window, log, "down")  # passed in, must be ignored
    options = {"guiProjection": draw(st.booleans())}
    if version == "3":
        options["stateMessagePlacement"] = draw(
            st.sampled_from(("trailing_assistant", "before_history_assistant", "trailing_user"))
        )
    run_id = draw(st.sampled_from((*RUNS, None)))
    inp = make_input(
        log,
        window=window,
        version=int(version),
        protocol_id=protocol_id,
        covered=covered,
        folds=folds,
        run_id=run_id,
        options=options,
        preview_chars=draw(st.sampled_from((10, 16000))),
        kv={
            "currentWindowEntry": {
                "windowId": window,
                "fromWindowId": "main",
                "upperBoundBeforeEntry": draw(st.integers(0, 9)),
                "input": "handoff",
            }
        },
    )
    inp = ProjectionInput(**{**inp.__dict__, "folds": [*inp.folds, *compressed]})
    return Case(
        log=log, inp=inp, window=window, covered=covered, dangling_visible=dangling_window == window
    )


def _expected_ids(case: Case) -> set[str]:
    inp = case.inp
    visible = {m.id for m in case.log.of_window(case.window, after=case.covered)}
    inputs = {m.id for m in inp.run_inputs}
    return visible | inputs


def _project(case: Case) -> Projection | None:
    if case.dangling_visible:
        with pytest.raises(ProtocolError) as caught:
            project(case.inp)
        assert caught.value.code == "projection_pairing_violation"
        return None
    return project(case.inp)


PROPERTY_SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@PROPERTY_SETTINGS
@given(cases())
def test_projection_is_deterministic(case: Case) -> None:
    one = _project(case)
    if one is None:
        return
    two = project(case.inp)
    assert one == two
    assert json.dumps(one.to_wire(), ensure_ascii=False) == json.dumps(
        two.to_wire(), ensure_ascii=False
    )


@PROPERTY_SETTINGS
@given(cases())
def test_every_message_is_accounted_for_exactly_once(case: Case) -> None:
    projection = _project(case)
    if projection is None:
        return
    all_ids = [i for s in projection.sources for i in s.message_ids]
    assert len(all_ids) == len(set(all_ids)), "a raw message is shown twice"
    # Every current-run input is there, and nothing but W above C and those inputs.
    assert {m.id for m in case.inp.run_inputs} <= set(all_ids)
    assert set(all_ids) == _expected_ids(case)


@PROPERTY_SETTINGS
@given(cases())
def test_no_other_window_raw_message_but_current_run_inputs(case: Case) -> None:
    projection = _project(case)
    if projection is None:
        return
    by_id = {m.id: m for m in case.log.messages}
    for source in projection.sources:
        if source.derived_type != "raw":
            continue
        message = by_id[source.message_ids[0]]
        if message.window_id != case.window or message.index <= case.covered:
            assert message.kind == KIND_INPUT and message.input_run == case.inp.plan.run_id


@PROPERTY_SETTINGS
@given(cases())
def test_pairing_holds_in_every_view(case: Case) -> None:
    projection = _project(case)
    if projection is None:
        return
    pending: set[str] = set()
    done: set[str] = set()
    for message, source in zip(projection.messages, projection.sources, strict=True):
        protected = source.derived_type == "raw" and (
            source.window_id != case.window or (source.first_index or 0) <= case.covered
        )
        # An input carried in from elsewhere never splits an interaction group.
        assert not (protected and pending)
        if message.kind == KIND_TOOL_CALL:
            assert message.tool_call_id not in pending | done
            pending.add(message.tool_call_id)
        elif message.kind == KIND_TOOL_RESULT:
            assert message.tool_call_id in pending
            pending.discard(message.tool_call_id)
            done.add(message.tool_call_id)
    assert not pending


@PROPERTY_SETTINGS
@given(cases())
def test_sources_describe_their_messages(case: Case) -> None:
    projection = _project(case)
    if projection is None:
        return
    assert len(projection.sources) == len(projection.messages)
    by_id = {m.id: m for m in case.log.messages}
    folds = {f.id: f for f in case.inp.folds}
    raw_indices_of_w = []
    for message, source in zip(projection.messages, projection.sources, strict=True):
        if source.derived_type == "raw":
            (message_id,) = source.message_ids
            raw = by_id[message_id]
            assert (message.role, message.kind) == (raw.role, raw.kind)
            assert source.first_index == source.last_index == raw.index
            assert source.window_id == raw.window_id
            if raw.kind in (KIND_TOOL_CALL, KIND_TOOL_RESULT):
                assert message.tool_call_id == raw.tool_call_id
            if raw.window_id == case.window and raw.index > case.covered:
                raw_indices_of_w.append((raw.index, raw.role))
        elif source.derived_type == "context_fold":
            fold = folds[source.fold_id]
            assert fold.first_index > case.covered
            assert message.kind == "context_fold" and message.tool_call_id is None
            assert source.message_ids == fold.message_ids
            assert (source.first_index, source.last_index) == (fold.first_index, fold.last_index)
        else:
            assert source.message_ids == ()
            assert message.kind == source.derived_type
            assert source.first_index is None and source.last_index is None
    # W's history keeps index order, except that user messages written while a call was
    # open follow its group (contract §4.1 step 2): in order among themselves, and never
    # between a call and its results.
    others = [index for index, role in raw_indices_of_w if role != "user"]
    users = [index for index, role in raw_indices_of_w if role == "user"]
    assert others == sorted(others), "W's history is out of order"
    assert users == sorted(users), "W's user messages are out of order"
    open_calls: set[str] = set()
    for message in projection.messages:
        if message.kind == KIND_TOOL_CALL:
            open_calls.add(message.tool_call_id)
        elif message.kind == KIND_TOOL_RESULT:
            open_calls.discard(message.tool_call_id)
        elif message.role == "user" and message.kind != "context_state":
            assert not open_calls, f"a user message sits between calls {open_calls} and results"
    kinds = [m.kind for m in projection.messages]
    assert kinds[:2] == ["system", "context_header"]
    expects_state = projection.protocol in ("unified@2", "unified@3")
    assert kinds.count("context_state") == (1 if expects_state else 0)
