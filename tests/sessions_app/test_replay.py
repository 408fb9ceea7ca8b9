"""Replay recorded turns under another protocol version (contract §10, issue 28 part 2).

Replaying a session under the version it ran reproduces every recorded request byte for
byte, for every protocol version and adapter; under another version it shows what a session
built with that version would have shown at the same state; refusals are clear; nothing is
written.
"""

from __future__ import annotations

import json
import uuid

import pytest
from django.apps import apps
from django.test.utils import override_settings

from contextproto.economics.linearise import SIMULATED_PROVIDERS
from contextproto.errors import ApplicationError
from contextproto.protocol.catalog import all_versions
from sessions_app.models import ArchiveChunk, ProjectionSnapshot, Session
from sessions_app.replay import (
    ONE_CALL_KEYS,
    ONE_CALL_NOT_RECORDED,
    replay_target,
    session_replay,
)
from sessions_app.services.rebuild import PRESSURE_ESTIMATED
from sessions_app.store import body_codec, body_retention, snapshot_bodies
from tests.builders.sessions import FLAVOURS, PROVIDERS, flavour, recorded_session, rewrite_bodies
from tests.conftest import KeyClient


def state_of(view_messages: list[dict]) -> dict | None:
    for message in view_messages:
        if message["kind"] == "context_state":
            return json.loads(message["content"].split("\n", 1)[1])
    return None


def row_counts() -> dict[str, int]:
    """Rows of every table of the service's apps."""
    counts = {}
    for label in ("sessions_app", "agents"):
        for model in apps.get_app_config(label).get_models():
            counts[model._meta.label] = model._default_manager.count()
    return counts


# --------------------------------------------------------------------------- identity


def test_the_identity_replay_covers_every_catalog_version():
    """Live turns and replay share one view builder (issue 35): the test below must rebuild
    a recorded turn of every version the catalog has, byte for byte."""
    from_flavours = {f"{f.protocol}@{f.version}" for f in FLAVOURS}
    assert from_flavours == {v.key for v in all_versions()}


@pytest.mark.parametrize("flavour", FLAVOURS, ids=[f.label for f in FLAVOURS])
def test_replaying_under_the_recorded_version_reproduces_every_request(api_session, flavour):
    s = recorded_session(api_session, flavour)
    snapshots = list(ProjectionSnapshot.objects.filter(session_id=s.id))
    # What the recorded views depended on is all there.
    assert {snap.provider for snap in snapshots} == set(PROVIDERS)
    assert ArchiveChunk.objects.filter(session_id=s.id).exists()
    assert any(
        src["firstIndex"] == 1 and src["derivedType"] == "raw"
        for snap in snapshots
        for src in snap.sources
    )
    kinds = {src["derivedType"] for snap in snapshots for src in snap.sources}
    if flavour.protocol == "unified":
        assert "context_fold" in kinds
        assert {snap.window_id for snap in snapshots} == {"main", "alpha"}
    if flavour.version == 4:
        assert "masked" in kinds
        pending = {
            state_of(snap.messages)["contextPressure"]["maintenancePending"] for snap in snapshots
        }
        assert pending == {True, False}
    checkpoints = [snap for snap in snapshots if '"Lookups through #' in json.dumps(snap.messages)]
    assert checkpoints, "no view shows the committed checkpoint"

    replay = session_replay(session_id=s.id)

    assert len(replay.turns) == len(snapshots)
    for turn in replay.turns:
        assert turn.skipped is None, turn.skipped
        assert turn.notes == (), turn.notes
        assert turn.request_identical, (turn.provider, turn.snapshot_id)
        assert turn.view_identical
        assert (
            turn.replayed_protocol
            == turn.recorded_protocol
            == f"{flavour.protocol}@{flavour.version}"
        )
    assert replay.identical == len(snapshots)
    # Both sides of the economy are the same requests: the same figures.
    for provider in SIMULATED_PROVIDERS:
        assert replay.recorded[provider].totals == replay.replayed[provider].totals


@pytest.mark.parametrize("flavour", FLAVOURS, ids=[f.label for f in FLAVOURS])
def test_a_dropped_body_is_rebuilt_byte_for_byte_by_the_same_builder(api_session, flavour):
    """A snapshot whose body retention dropped is rebuilt from the state at R and the log
    through U by the builder live turns use: the text the turn sent, for every version."""
    s = recorded_session(api_session, flavour)
    snapshots = list(ProjectionSnapshot.objects.filter(session_id=s.id))
    sent = {x.pk: body_codec.body_text(x.view.body) for x in snapshots}
    assert body_retention.bodies_drop(list(sent)) == len(sent)
    snapshot_bodies.forget_cache()
    for again in ProjectionSnapshot.objects.filter(session_id=s.id):
        assert again.view.rebuilt and again.view.hash_matches is True, again.pk
        assert body_codec.body_text(again.view.body) == sent[again.pk], again.pk


def test_a_recorded_request_that_differs_is_reported_not_hidden(api_session):
    s = recorded_session(api_session, flavour("unified@2"))
    changed = ProjectionSnapshot.objects.filter(
        session_id=s.id, provider="anthropic-messages"
    ).latest("created_at")
    rewrite_bodies(
        s.id,
        lambda snap, body: (
            {**body, "request": {**body["request"], "system": "something else was sent"}}
            if snap.pk == changed.pk
            else None
        ),
    )

    replay = session_replay(session_id=s.id)

    different = [t for t in replay.turns if not t.request_identical]
    assert [t.snapshot_id for t in different] == [str(changed.pk)]
    assert different[0].view_identical  # the view is the same; only the request differs
    assert replay.identical == len(replay.turns) - 1


def test_the_preview_limit_a_view_was_built_with_is_recorded_and_replayed(api_session):
    with override_settings(TOOL_RESULT_PREVIEW_CHARS=300):
        s = recorded_session(api_session, flavour("unified@2"))
    snapshots = ProjectionSnapshot.objects.filter(session_id=s.id)
    assert {snap.build_inputs["toolResultPreviewChars"] for snap in snapshots} == {300}
    assert any("truncated for view" in json.dumps(snap.messages) for snap in snapshots)

    replay = session_replay(session_id=s.id)  # under today's setting, 16000
    assert all(t.request_identical and not t.notes for t in replay.turns)

    # A snapshot from before the limit was recorded gets today's, and says so: its views
    # with a cut result can no longer be rebuilt as sent.
    snapshots.update(build_inputs=None)
    replay = session_replay(session_id=s.id)
    assumed = (
        "toolResultPreviewChars assumed 16000 (the current setting; not recorded on this snapshot)"
    )
    assert all(t.notes == (assumed,) for t in replay.turns)
    cut = [t for t in replay.turns if not t.request_identical]
    assert cut and all(t.replayed_tokens > t.sent_tokens for t in cut)


def test_a_request_recorded_before_one_call_per_answer_is_compared_without_it(api_session):
    s = recorded_session(api_session, flavour("unified@2"))
    snapshots = ProjectionSnapshot.objects.filter(session_id=s.id)
    older = 0

    def without_one_call_keys(snap, body):
        nonlocal older
        request = {k: v for k, v in body["request"].items() if k not in ONE_CALL_KEYS}
        if request == body["request"]:
            return None
        older += 1
        return {**body, "request": request}

    rewrite_bodies(s.id, without_one_call_keys)
    # Every openai-chat and anthropic-messages request carried tools; neutral has neither key.
    assert older == snapshots.exclude(provider="neutral").count() > 0

    replay = session_replay(session_id=s.id)

    assert all(t.request_identical for t in replay.turns)
    noted = [t for t in replay.turns if t.notes == (ONE_CALL_NOT_RECORDED,)]
    assert len(noted) == older
    assert {t.provider for t in noted} == {"openai-chat", "anthropic-messages"}
    # What it rebuilds is what would be sent today, the settings included.
    assert all("parallel_tool_calls" in t.request or "tool_choice" in t.request for t in noted)
    # A recorded request that differs otherwise is still reported.
    changed = snapshots.filter(provider="openai-chat").latest("created_at")
    rewrite_bodies(
        s.id,
        lambda snap, body: (
            {**body, "request": {**body["request"], "messages": []}}
            if snap.pk == changed.pk
            else None
        ),
    )
    assert session_replay(session_id=s.id).identical == len(replay.turns) - 1


def test_an_older_unified4_snapshot_states_its_pending_flag_in_its_view(api_session):
    s = recorded_session(api_session, flavour("unified@4"))
    snapshots = ProjectionSnapshot.objects.filter(session_id=s.id)
    recorded = {snap.build_inputs.get("maintenancePending") for snap in snapshots}
    assert recorded == {True, False}
    for snap in snapshots:
        snap.build_inputs = {"toolResultPreviewChars": snap.build_inputs["toolResultPreviewChars"]}
        snap.save(update_fields=["build_inputs"])

    replay = session_replay(session_id=s.id)

    assert all(t.request_identical and not t.notes for t in replay.turns)


# --------------------------------------------------------------------------- what-if


def fork_view(s, snapshot_id: str, version) -> tuple[dict, dict]:
    """A session forked at the turn onto `version` and projected (neutral): what a session
    built with that version shows at the same state. Returns the fork and its view."""
    response = s.app_client.post(
        s.path("fork/"), {"snapshotId": snapshot_id, "agentVersionId": str(version.id)}
    )
    assert response.status_code == 201, response.content
    fork = response.json()
    view = KeyClient(fork["sessionKey"]).post(
        f"sessions/{fork['id']}/projection/", {"provider": "neutral"}
    )
    assert view.status_code == 201, view.content
    return fork, view.json()


@pytest.mark.parametrize(
    ("recorded", "target", "options"),
    [
        ("unified@2", "unified@4", {"maskKeepRecent": 1, "maskStep": 1}),
        ("unified@4", "unified@2", {}),
        ("unified@1", "unified@3", {"stateMessagePlacement": "before_history_assistant"}),
    ],
)
def test_a_replay_under_another_version_shows_what_that_version_would_have(
    api_session, make_version, recorded, target, options
):
    # No view while a job is pending: a fork has no maintenance job of its own.
    s = recorded_session(api_session, flavour(recorded), project_while_pending=False)
    protocol, number = target.split("@")
    other = make_version(s.app, protocol=protocol, version=int(number), options=options)
    assert other.agent_id == s.agent_version.agent_id
    other.tools.set(s.agent_version.tools.all())

    replay = session_replay(session_id=s.id, protocol=target, options=options)

    neutral = [t for t in replay.turns if t.provider == "neutral"]
    assert len(neutral) >= 8
    windows = set()
    for turn in neutral:
        assert turn.replayed_protocol == target
        # A unified@2 view never stated the pending flag: estimated from the (empty) jobs.
        assert set(turn.notes) <= {PRESSURE_ESTIMATED}
        assert not turn.request_identical  # another version: another request
        _fork, view = fork_view(s, turn.snapshot_id, other)
        assert (view["revision"], view["upperBound"]) == (turn.revision, turn.upper_bound)
        assert view["windowId"] == turn.window_id
        windows.add(view["windowId"])
        # The neutral request is the view and the tools: equal, byte for byte.
        assert json.dumps(turn.request) == json.dumps(view["request"]), turn.snapshot_id
    assert windows == {"main", "alpha"}


def test_replaying_unified2_under_unified4_estimates_the_pending_flag_from_the_jobs(api_session):
    s = recorded_session(api_session, flavour("unified@2"))

    replay = session_replay(
        session_id=s.id, protocol="unified@4", options={"maskKeepRecent": 1, "maskStep": 1}
    )

    pending = []
    for turn in replay.turns:
        assert turn.notes == (PRESSURE_ESTIMATED,)
        if turn.provider == "neutral":
            pending.append(
                state_of(turn.request["messages"])["contextPressure"]["maintenancePending"]
            )
    # The turn projected while the external maintainer held its plan: pending, the rest not.
    assert pending.count(True) == 1 and pending.count(False) >= 8
    masked = [
        src
        for t in replay.turns
        if t.provider == "neutral"
        for src in t.request["messages"]
        if "masked:" in str(src.get("content"))
    ]
    assert masked, "unified@4 masks the older long results"
    # The economy prices both sides over the same turns.
    for provider in SIMULATED_PROVIDERS:
        assert len(replay.recorded[provider].turns) == len(replay.replayed[provider].turns)
        assert replay.recorded[provider].totals != replay.replayed[provider].totals


def test_turns_older_than_the_kv_history_are_listed_and_left_out_of_the_totals(api_session):
    s = recorded_session(api_session, flavour("unified@2"))
    snapshots = list(ProjectionSnapshot.objects.filter(session_id=s.id).order_by("created_at"))
    cut = snapshots[len(snapshots) // 2].revision
    Session.objects.filter(pk=s.id).update(kv_history_from=cut)

    replay = session_replay(session_id=s.id)

    old = [t for t in replay.turns if t.revision < cut]
    assert old and all(t.skipped.startswith("revision_not_recorded") for t in old)
    assert all(t.request_identical for t in replay.turns if t.revision >= cut)
    totals = replay.totals()
    assert (totals.turns, totals.skipped) == (len(snapshots) - len(old), len(old))
    for provider in SIMULATED_PROVIDERS:
        assert len(replay.replayed[provider].turns) == totals.turns


# --------------------------------------------------------------------------- refusals


def refusal(call, code: str) -> ApplicationError:
    with pytest.raises(ApplicationError) as caught:
        call()
    assert caught.value.code == code, caught.value.message
    return caught.value


def test_refusals_say_what_to_fix(api_session):
    s = api_session(version=2)
    s.input("hello")
    s.project()
    prefix = api_session(protocol="prefix", version=2)

    error = refusal(
        lambda: session_replay(session_id=s.id, protocol="prefix@2"), "replay_protocol_incompatible"
    )
    assert error.status == 400
    assert error.details["compatible"] == ["unified@1", "unified@2", "unified@3", "unified@4"]
    assert "unified@2 sessions cannot be replayed under prefix@2" in error.message
    error = refusal(
        lambda: session_replay(session_id=prefix.id, protocol="unified@4"),
        "replay_protocol_incompatible",
    )
    assert error.details["compatible"] == ["prefix@2"]
    for unknown in ("unified@9", "unified", "nope@1", "unified@²"):
        refusal(lambda u=unknown: session_replay(session_id=s.id, protocol=u), "protocol_unknown")

    error = refusal(
        lambda: session_replay(
            session_id=s.id,
            protocol="unified@4",
            options={"maskStep": 0, "stateMessagePlacement": "system", "colour": "red"},
        ),
        "replay_options_invalid",
    )
    assert error.status == 400
    assert [(e["field"], e["code"]) for e in error.details["errors"]] == [
        ("options.stateMessagePlacement", "option_bad_enum"),
        ("options.maskStep", "option_out_of_range"),
        ("options.colour", "option_unknown"),
    ]
    refusal(
        lambda: session_replay(session_id=s.id, protocol="unified@2", options=[1]),
        "replay_options_invalid",
    )
    # unified@2 has no masking options.
    refusal(
        lambda: session_replay(session_id=s.id, options={"maskStep": 2}), "replay_options_invalid"
    )

    for unknown in (uuid.uuid4(), "not-a-uuid"):
        error = refusal(lambda u=unknown: session_replay(session_id=u), "not_found")
        assert error.status == 404
    refusal(lambda: session_replay(session_id=s.id, think_seconds=-1), "invalid_request")
    refusal(lambda: session_replay(session_id=s.id, last_turns=0), "invalid_request")


def test_the_target_defaults_to_the_versions_options_only_for_its_own_protocol(api_session):
    s = api_session(version=3, options={"stateMessagePlacement": "trailing_user"})
    own = replay_target(s.agent_version, protocol="unified@3")
    assert own.options["stateMessagePlacement"] == "trailing_user"
    other = replay_target(s.agent_version, protocol="unified@4")
    assert other.options["maskKeepRecent"] == 6  # the target's defaults
    assert replay_target(s.agent_version).protocol is None  # as recorded, turn by turn


# --------------------------------------------------------------------------- no writes


def test_a_replay_writes_nothing(api_session):
    s = recorded_session(api_session, flavour("unified@4"))
    before = row_counts()
    session_row = Session.objects.filter(pk=s.id).values().get()
    snapshots = list(ProjectionSnapshot.objects.filter(session_id=s.id).values())

    session_replay(session_id=s.id)
    session_replay(session_id=s.id, protocol="unified@2", think_seconds=None)

    assert row_counts() == before
    assert Session.objects.filter(pk=s.id).values().get() == session_row
    assert list(ProjectionSnapshot.objects.filter(session_id=s.id).values()) == snapshots
