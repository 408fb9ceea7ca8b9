"""Fork a session at any turn (contract §10): `POST sessions/{id}/fork/`.

The fork's log is the original's #1..bound with new ids, its state the state at the fork's
revision; it can be projected and continued; the original does not change.
"""

from __future__ import annotations

import uuid

from django.utils import timezone

from sessions_app.models import (
    FoldRecord,
    KVEntry,
    KVHistory,
    Message,
    ProjectionSnapshot,
    Run,
    Session,
    ToolReceipt,
    WindowRecord,
)
from sessions_app.reads import raw_log
from sessions_app.services.archive import archive_session, restore_session
from tests.builders.sessions import rich_session
from tests.conftest import KeyClient
from tests.maintenance.test_external_maintainer import commit, long_session, plan

# What a copy keeps of each message (ids, runs and the origin link are checked apart).
KEPT = ("index", "windowId", "role", "kind", "content", "toolCallId", "toolName", "arguments")
KEPT += ("isError", "snapshotId", "createdAt")


def fork(s, **body):
    return s.app_client.post(s.path("fork/"), body)


def forked(s, **body) -> dict:
    response = fork(s, **body)
    assert response.status_code == 201, response.content
    return response.json()


def log(session_id) -> list:
    return raw_log.log_page(session_id, window_id=None, after_index=0, limit=100_000)


def kv_wire(client: KeyClient, session_id: str, **params) -> dict:
    """Every KV entry (all pages) of the kv/ endpoint: key -> value."""
    entries, cursor = {}, None
    while True:
        query = {**params, "limit": 200, **({"cursor": cursor} if cursor else {})}
        response = client.get(f"sessions/{session_id}/kv/", **query)
        assert response.status_code == 200, response.content
        body = response.json()
        entries.update((e["key"], e["value"]) for e in body["entries"])
        cursor = body["nextCursor"]
        if cursor is None:
            return entries


def fork_kv(body: dict, **params) -> dict:
    """The fork's KV (kv/ endpoint) with its folds' messageIds mapped back to the originals
    they were copied from, to compare with the original's state."""
    state = kv_wire(KeyClient(body["sessionKey"]), body["id"], **params)
    origin = {
        str(new): str(old)
        for new, old in Message.objects.filter(session_id=body["id"]).values_list(
            "id", "forked_from_message_id"
        )
    }
    for key, value in state.items():
        if key.startswith("fold/"):
            assert set(value["messageIds"]) <= set(origin), "a fold names a message not copied"
            state[key] = {**value, "messageIds": [origin[m] for m in value["messageIds"]]}
    return state


def rows_of(session_id) -> dict:
    """Every row the original owns, to compare before and after a fork."""
    session = Session.objects.filter(pk=session_id).values().get()
    return {
        "session": session,
        "log": [m.to_wire() for m in log(session_id)],
        "kv": sorted(KVEntry.objects.filter(session_id=session_id).values_list("key", "revision")),
        "history": sorted(
            KVHistory.objects.filter(session_id=session_id).values_list("key", "revision")
        ),
        "folds": sorted(FoldRecord.objects.filter(session_id=session_id).values_list()),
        "windows": sorted(WindowRecord.objects.filter(session_id=session_id).values_list()),
        "runs": sorted(Run.objects.filter(session_id=session_id).values_list()),
        "snapshots": ProjectionSnapshot.objects.filter(session_id=session_id).count(),
        "receipts": ToolReceipt.objects.filter(session_id=session_id).count(),
    }


def assert_copy(original_id, fork_body: dict) -> None:
    """The fork's log is the original's #1..bound: same fields, new ids linked back, runs
    mapped to the fork's own runs; its KV is the original's at the fork's revision."""
    bound = fork_body["forkedFrom"]["throughIndex"]
    source = log(original_id)[:bound]
    copied = log(fork_body["id"])
    assert [m.index for m in copied] == list(range(1, bound + 1))
    assert [{k: m.to_wire()[k] for k in KEPT} for m in copied] == [
        {k: m.to_wire()[k] for k in KEPT} for m in source
    ]
    links = dict(
        Message.objects.filter(session_id=fork_body["id"]).values_list(
            "forked_from_message_id", "id"
        )
    )
    assert {str(k) for k in links} == {m.id for m in source}
    assert not {m.id for m in copied} & {m.id for m in source}
    runs = dict(
        Run.objects.filter(session_id=fork_body["id"]).values_list("forked_from_run_id", "id")
    )
    for old, new in zip(source, copied, strict=True):
        assert new.run_id == (runs[uuid.UUID(old.run_id)].hex if old.run_id else None)
        assert new.input_run == (runs[uuid.UUID(old.input_run)].hex if old.input_run else None)
    assert fork_body["lastIndex"] == bound
    assert fork_body["stateRevision"] == fork_body["forkedFrom"]["revision"]


def state_at(s, revision: int) -> dict:
    return kv_wire(s.client, s.id, revision=revision)


def view_messages(client: KeyClient, session_id: str) -> list[dict]:
    response = client.post(f"sessions/{session_id}/projection/", {"provider": "neutral"})
    assert response.status_code == 201, response.content
    return response.json()["messages"]


def folded_session(api_session):
    """unified@2: an input, two host lookups folded, more work after the fold."""
    s = api_session(version=2)
    s.input("prepare the quote")
    first, _ = s.host_tool_work("lookup", "price 1300")
    _, last = s.host_tool_work("lookup", "shipping 250")
    fold = s.tool(
        "context_fold_create",
        fromIndex=first,
        throughIndex=last,
        summary="prices looked up",
        expectedWindowId="main",
    )
    assert fold["success"], fold
    s.host_tool_work("lookup", "stock 12")
    return s, fold["foldId"]


# ---------------------------------------------------------------- by snapshot, at a fold


def test_fork_at_a_snapshot_after_a_fold_is_that_turn_with_its_fold(api_session):
    s, fold_id = folded_session(api_session)
    turn = s.project()  # the view with the fold
    s.host_tool_work("lookup", "after the turn")
    s.tool("context_task_memory_set", memory="moved on")
    before = rows_of(s.id)

    body = forked(s, snapshotId=turn["snapshotId"])

    assert body["forkedFrom"] == {
        "sessionId": s.id,
        "throughIndex": turn["upperBound"],
        "revision": turn["revision"],
    }
    assert body["sessionKey"].startswith("cps_") and body["agentVersionId"] == str(
        s.agent_version.id
    )
    assert_copy(s.id, body)
    fork_client = KeyClient(body["sessionKey"])
    assert fork_kv(body) == state_at(s, turn["revision"])
    # The fork's view is the turn's view: same messages, the fold in place.
    assert view_messages(fork_client, body["id"]) == turn["messages"]
    fold = fork_client.get(f"sessions/{body['id']}/folds/").json()["folds"]
    assert [f["foldId"] for f in fold] == [fold_id]
    copied_ids = {m.id for m in log(body["id"])}
    assert set(fold[0]["messageIds"]) <= copied_ids
    # GET sessions/{id}/ of the fork says where it came from; the original is no fork.
    detail = fork_client.get(f"sessions/{body['id']}/").json()
    assert detail["forkedFrom"] == body["forkedFrom"]
    assert s.client.get(s.path()).json()["forkedFrom"] is None
    assert rows_of(s.id) == before


def test_a_fork_is_projected_and_continued_a_call_dispatched_and_its_fold_read_back(
    api_session,
):
    s, fold_id = folded_session(api_session)
    body = forked(s, throughIndex=Session.objects.get(pk=s.id).last_index)
    before = rows_of(s.id)
    f = type(s)(s.app, s.app_client, KeyClient(body["sessionKey"]), body["id"], s.agent_version)

    read = f.tool("context_fold_read", foldId=fold_id)
    assert read["success"], read
    assert "price 1300" in read["text"] and "shipping 250" in read["text"]
    # A copied call is answered; its receipt stays the original's.
    copied_fold_call = next(m for m in log(f.id) if m.tool_name == "context_fold_create")
    again = f.client.post(f.path(f"tool-calls/{copied_fold_call.tool_call_id}/dispatch/"))
    assert again.status_code == 400
    assert again.json()["error"]["code"] == "tool_call_already_answered"
    opened = f.tool(
        "context_window_open", windowId="alpha", goal="delivery", input="x", expectedWindowId="main"
    )
    assert opened["success"], opened
    f.host_tool_work("lookup", "in the fork")
    state = kv_wire(f.client, f.id)
    assert state["activeWindow"] == "alpha"
    assert Session.objects.get(pk=f.id).state_revision == body["stateRevision"] + 1
    # The fork's own history goes on from the copied one.
    assert fork_kv(body, revision=body["stateRevision"]) == state_at(s, body["stateRevision"])
    assert rows_of(s.id) == before
    assert "window/alpha" not in kv_wire(s.client, s.id)


# ---------------------------------------------------------------- by throughIndex


def test_fork_at_a_window_switch_by_through_index(api_session):
    s = rich_session(api_session)
    calls = [m for m in log(s.id) if m.kind == "tool_call" and m.tool_name == "context_window_open"]
    first_open = calls[0]
    result = next(
        m
        for m in log(s.id)
        if m.kind == "tool_result" and m.tool_call_id == first_open.tool_call_id
    )
    before = rows_of(s.id)

    after_switch = forked(s, throughIndex=result.index)
    assert after_switch["forkedFrom"]["throughIndex"] == result.index
    assert after_switch["activeWindow"] == "alpha"
    assert_copy(s.id, after_switch)
    revision = after_switch["forkedFrom"]["revision"]
    # The revision committed before message #result+1: the switch's own revision.
    receipt = ToolReceipt.objects.get(session_id=s.id, tool_call_id=first_open.tool_call_id)
    assert revision == receipt.state_revision
    assert fork_kv(after_switch) == state_at(s, revision)
    windows = WindowRecord.objects.filter(session_id=after_switch["id"])
    assert dict(windows.values_list("window_id", "status")) == {
        "main": "suspended",
        "alpha": "active",
    }
    counts = dict(windows.values_list("window_id", "message_count"))
    copied = log(after_switch["id"])
    assert counts == {w: sum(m.window_id == w for m in copied) for w in ("main", "alpha")}

    # Through the call itself: the call is unanswered as of the bound, so the fork ends
    # before it, in main, at the revision before the call.
    at_call = forked(s, throughIndex=first_open.index)
    assert at_call["forkedFrom"]["throughIndex"] == first_open.index - 1
    assert at_call["activeWindow"] == "main"
    assert at_call["forkedFrom"]["revision"] == receipt.state_revision - 1
    assert_copy(s.id, at_call)
    assert rows_of(s.id) == before


def test_an_open_call_at_the_bound_moves_the_bound_before_its_group(api_session):
    s = api_session(version=2)
    s.input("go")
    s.host_tool_work("lookup", "done")
    snapshot = s.project()
    call = s.write(
        role="assistant",
        kind="tool_call",
        content="",
        toolCallId="pending_1",
        toolName="lookup",
        arguments={},
        snapshotId=snapshot["snapshotId"],
    )
    feedback = s.write(
        role="user", kind="approval_feedback", content="ok, go on", toolCallId="pending_1"
    )
    # Through the last message: the group of the unanswered call starts at the call.
    body = forked(s, throughIndex=feedback["index"])
    assert body["forkedFrom"]["throughIndex"] == call["index"] - 1
    assert_copy(s.id, body)
    assert not [m for m in log(body["id"]) if m.tool_call_id == "pending_1"]
    # Once answered, the same bound stands.
    s.write(role="tool", kind="tool_result", content="r", toolCallId="pending_1")
    last = Session.objects.get(pk=s.id).last_index
    assert forked(s, throughIndex=last)["forkedFrom"]["throughIndex"] == last
    # Bound 0: an empty log and the state before #1.
    empty = forked(s, throughIndex=0)
    assert empty["lastIndex"] == 0 and empty["forkedFrom"]["revision"] == 1
    assert fork_kv(empty) == state_at(s, 1)


def test_fork_after_a_checkpoint_carries_it_and_a_fork_before_it_does_not(api_session):
    s = long_session(api_session)
    before_commit = s.project()
    job = plan(s)
    assert commit(s, job, "Checkpoint: lookups done.").status_code == 200
    after_commit = s.project()

    after = forked(s, snapshotId=after_commit["snapshotId"])
    fork_client = KeyClient(after["sessionKey"])
    state = kv_wire(fork_client, after["id"])
    assert state["checkpoint/main"] == "Checkpoint: lookups done."
    assert state["coveredThrough/main"] == job["throughIndex"]
    assert view_messages(fork_client, after["id"]) == after_commit["messages"]

    before = forked(s, snapshotId=before_commit["snapshotId"])
    assert "checkpoint/main" not in kv_wire(KeyClient(before["sessionKey"]), before["id"])
    assert view_messages(KeyClient(before["sessionKey"]), before["id"]) == before_commit["messages"]


def test_fork_of_a_session_whose_messages_are_archived(api_session):
    s, fold_id = folded_session(api_session)
    turn = s.project()
    s.host_tool_work("lookup", "later")
    last = Session.objects.get(pk=s.id).last_index
    assert archive_session(session_id=s.id, keep_last=2, chunk_size=3)
    assert Message.objects.filter(session_id=s.id).count() < last
    before = rows_of(s.id)

    by_snapshot = forked(s, snapshotId=turn["snapshotId"])
    assert_copy(s.id, by_snapshot)
    by_index = forked(s, throughIndex=last)
    assert_copy(s.id, by_index)
    f = type(s)(
        s.app, s.app_client, KeyClient(by_index["sessionKey"]), by_index["id"], s.agent_version
    )
    read = f.tool("context_fold_read", foldId=fold_id)
    assert read["success"] and "price 1300" in read["text"], read
    assert (
        view_messages(KeyClient(by_snapshot["sessionKey"]), by_snapshot["id"]) == turn["messages"]
    )
    assert rows_of(s.id) == before
    # The fork's own archive keeps the link to each original and the revision it was written at.
    columns = ("index", "forked_from_message_id", "written_at_revision")
    rows = Message.objects.filter(session_id=by_index["id"]).order_by("index")
    kept = list(rows.values_list(*columns))
    assert archive_session(session_id=by_index["id"], keep_last=0, chunk_size=2)
    restore_session(session_id=by_index["id"])
    assert list(rows.values_list(*columns)) == kept
    copies = [(link, revision) for i, link, revision in kept if i <= by_index["lastIndex"]]
    assert all(link is not None and revision is not None for link, revision in copies)


def test_a_fork_of_a_fork_by_through_index(api_session):
    s = rich_session(api_session)
    last = Session.objects.get(pk=s.id).last_index
    first = forked(s, throughIndex=last)
    grand = s.app_client.post(f"sessions/{first['id']}/fork/", {"throughIndex": last - 3})
    assert grand.status_code == 201, grand.content
    body = grand.json()
    assert body["forkedFrom"]["sessionId"] == first["id"]
    # The same point of the original gives the same state and log.
    direct = forked(s, throughIndex=last - 3)
    assert body["forkedFrom"]["throughIndex"] == direct["forkedFrom"]["throughIndex"]
    assert body["forkedFrom"]["revision"] == direct["forkedFrom"]["revision"]
    # Its folds name the first fork's copies, which name the original's messages.
    revision = direct["forkedFrom"]["revision"]
    assert fork_kv(body) == kv_wire(KeyClient(first["sessionKey"]), first["id"], revision=revision)
    assert fork_kv(first, revision=direct["forkedFrom"]["revision"]) == state_at(
        s, direct["forkedFrom"]["revision"]
    )
    assert_copy(first["id"], body)


def test_fork_to_another_unified_version_of_the_same_agent(api_session, make_version):
    s, _fold = folded_session(api_session)
    newer = make_version(s.app, protocol="unified", version=1)
    assert newer.agent_id == s.agent_version.agent_id
    body = forked(s, throughIndex=3, agentVersionId=str(newer.id))
    assert body["agentVersionId"] == str(newer.id)
    tools = KeyClient(body["sessionKey"]).get(f"sessions/{body['id']}/tools/").json()
    assert tools["protocol"] == "unified@1"
    assert view_messages(KeyClient(body["sessionKey"]), body["id"])


# ---------------------------------------------------------------- refusals


def test_refusals_change_nothing(api_session, make_version, tenant):
    s, _fold = folded_session(api_session)
    turn = s.project()
    last = Session.objects.get(pk=s.id).last_index
    t = api_session(version=1)  # another Application's session
    t.input("x")
    theirs = t.project()
    sessions = Session.objects.count()

    def refused(status: int, code: str, client=None, **body) -> dict:
        response = (client or s.app_client).post(s.path("fork/"), body)
        assert response.status_code == status, response.content
        error = response.json()["error"]
        assert error["code"] == code, error
        return error

    # Another Application's key, and the session's own key: the session does not exist.
    _other, other_client = tenant("Other")
    refused(404, "not_found", client=other_client, throughIndex=1)
    refused(404, "not_found", client=s.client, throughIndex=1)
    # Another session's snapshot.
    refused(404, "not_found", snapshotId=theirs["snapshotId"])
    refused(404, "not_found", snapshotId="not-a-uuid")
    # Bounds beyond the log.
    error = refused(400, "fork_bound_out_of_range", throughIndex=last + 1)
    assert error["details"]["field"] == "throughIndex" and error["details"]["lastIndex"] == last
    refused(400, "fork_bound_out_of_range", throughIndex=-1)
    # Exactly one of snapshotId and throughIndex; nothing else.
    refused(400, "invalid_request")
    refused(400, "invalid_request", snapshotId=turn["snapshotId"], throughIndex=1)
    refused(400, "invalid_request", throughIndex=1, windowId="main")
    refused(400, "invalid_request", throughIndex="two")
    # Versions: another protocol, another agent, a draft, another Application's.
    prefix = make_version(s.app, protocol="prefix", version=2)
    error = refused(
        400, "fork_protocol_incompatible", throughIndex=1, agentVersionId=str(prefix.id)
    )
    assert error["details"]["protocol"] == "unified@2"
    assert error["details"]["requested"] == "prefix@2"
    stranger = make_version(s.app, name="another-agent")
    refused(400, "fork_agent_mismatch", throughIndex=1, agentVersionId=str(stranger.id))
    draft = make_version(s.app)
    draft.status = draft.Status.DRAFT
    draft.save(update_fields=["status"])
    refused(400, "agent_version_not_published", throughIndex=1, agentVersionId=str(draft.id))
    refused(404, "not_found", throughIndex=1, agentVersionId=str(t.agent_version.id))
    # The session's own version, archived since: new sessions, forks too, need another one.
    s.agent_version.status = s.agent_version.Status.ARCHIVED
    s.agent_version.save(update_fields=["status"])
    refused(409, "agent_version_archived", throughIndex=1)
    assert Session.objects.count() == sessions


def test_prefix_sessions_fork_to_prefix_versions_only(api_session, make_version):
    s = api_session(protocol="prefix", version=2)
    s.input("go")
    s.host_tool_work("lookup", "x")
    unified = make_version(s.app, protocol="unified", version=2)
    response = fork(s, throughIndex=3, agentVersionId=str(unified.id))
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "fork_protocol_incompatible"
    body = forked(s, throughIndex=3)
    assert_copy(s.id, body)
    assert view_messages(KeyClient(body["sessionKey"]), body["id"])


# ---------------------------------------------------------------- sessions older than the history


def test_points_older_than_the_history_are_refused(api_session):
    """A session seeded by the migration knows its state only from its revision then on,
    and messages written before it have no recorded revision."""
    s = api_session(version=2)
    s.input("go")
    old_turn = s.project()
    s.tool("context_task_memory_set", memory="later state")
    session = Session.objects.get(pk=s.id)
    assert old_turn["revision"] < session.state_revision
    Session.objects.filter(pk=s.id).update(kv_history_from=session.state_revision)
    start = session.next_message_index
    Message.objects.bulk_create(
        [
            Message(
                session=session,
                index=start + n,
                window_id="main",
                role="assistant",
                kind="text",
                content=f"written before revisions were recorded {n}",
                created_at=timezone.now(),
            )
            for n in range(3)
        ]
    )
    Session.objects.filter(pk=s.id).update(next_message_index=start + 3)

    response = fork(s, snapshotId=old_turn["snapshotId"])
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "revision_not_recorded"
    assert response.json()["error"]["details"]["earliestRevision"] == session.state_revision
    response = fork(s, throughIndex=start)
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "revision_not_recorded"
    # At the end of the log the state is the current one, which the history holds.
    body = forked(s, throughIndex=start + 2)
    assert body["forkedFrom"]["revision"] == session.state_revision
    assert_copy(s.id, body)
