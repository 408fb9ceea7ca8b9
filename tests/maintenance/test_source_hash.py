"""Page reads and the commit re-check the source hash, not only the revision (contract §6)."""

from __future__ import annotations

from sessions_app.models import ArchiveChunk, MaintenanceJob, Session
from sessions_app.services.archive import archive_session
from sessions_app.store.cold_store import chunk_encode, chunk_records
from tests.maintenance.test_external_maintainer import commit, kv, long_session, page, plan


def revision(s) -> int:
    return Session.objects.get(pk=s.id).state_revision


def test_a_changed_hash_at_the_same_revision_rejects_the_page_and_the_commit(api_session):
    s = long_session(api_session)
    job = plan(s)
    assert page(s, job, 0).status_code == 200
    # The source drifting under the plan (simulated: the stored hash no longer matches).
    MaintenanceJob.objects.filter(pk=job["jobId"]).update(source_hash="0" * 64)
    refused = page(s, job, 1)
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "maintenance_state_changed"
    assert error["details"]["changed"] == "sourceHash"
    assert error["details"]["currentSourceHash"] == job["sourceHash"]
    assert error["details"]["frozenRevision"] == error["details"]["currentRevision"]
    assert "source hash changed at the same revision" in error["message"]
    assert "revision moved" not in error["message"]
    refused = commit(s, job, "checkpoint")
    assert refused.status_code == 409
    message = refused.json()["error"]["message"]
    assert "source hash changed" in message and "before the commit" in message
    assert "moved from" not in message
    assert "checkpoint/main" not in kv(s.id)
    assert "source hash changed" in MaintenanceJob.objects.get(pk=job["jobId"]).reason


def test_a_rewritten_archive_chunk_changes_the_hash_without_moving_the_revision(api_session):
    s = long_session(api_session)
    job = plan(s)
    before = revision(s)
    # Moving the range to cold storage keeps every byte: the plan still holds.
    assert archive_session(session_id=s.id, keep_last=2, chunk_size=5)
    assert page(s, job, 0).status_code == 200
    # A cold chunk rewritten with one message altered (a faulty re-encoding, a bad restore
    # from backup): nothing in KV moved, so only the hash can tell.
    chunk = ArchiveChunk.objects.filter(session_id=s.id).order_by("first_index").first()
    records = chunk_records(chunk)
    records[-1]["content"] = "tampered"
    ArchiveChunk.objects.filter(pk=chunk.pk).update(data=chunk_encode(records))
    refused = page(s, job, 1)
    assert refused.status_code == 409
    assert refused.json()["error"]["details"]["changed"] == "sourceHash"
    assert revision(s) == before
    assert commit(s, job, "checkpoint").status_code == 409
    assert "checkpoint/main" not in kv(s.id)


def test_a_moved_revision_still_says_revision(api_session):
    s = long_session(api_session)
    job = plan(s)
    s.tool("context_task_memory_set", memory="moved")
    refused = page(s, job, 0).json()["error"]
    assert refused["details"]["changed"] == "revision"
    frozen, current = job["frozenRevision"], refused["details"]["currentRevision"]
    assert frozen != current
    assert refused["message"].startswith(f"state revision moved from {frozen} to {current}")
