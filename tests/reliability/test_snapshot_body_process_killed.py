"""A process SIGKILLed between a turn's commit and its body write loses no body (issue 33).

A child process builds one turn the way a turn that calls a model does (issue 42): the
snapshot row commits with its request hash, the body is encoded (as while the model call is in
flight), and the process is SIGKILLed before the commit that would store it: the child prints
the body it sent, then is killed. Afterwards the row has no body, and is never served empty:
any reader gets the body rebuilt from the state at R and the log through U at once, equal byte
for byte to what was sent and saying so (`body: "rebuilt"`, `bodyHashMatches: true`); the
sweeper writes it, marked rebuilt with a note; the session's next turns store deltas on it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from django.test.utils import override_settings

from sessions_app.maintenance import body_sweeps
from sessions_app.models import ProjectionSnapshot
from sessions_app.services.projection import projection_build
from sessions_app.store import body_codec, snapshot_bodies
from tests.conftest import KeyClient
from tests.servers import ROOT, worker_env

pytestmark = [pytest.mark.postgres]

CHILD = textwrap.dedent(
    """
    import sys, threading
    import django
    django.setup()
    from django.db import transaction
    from sessions_app.services import projection
    from sessions_app.store import body_codec, body_writer

    def first_commit_only(*, body, **fields):
        # The turn's first commit: the row. Its body is encoded, and the process dies before
        # the second commit would store it.
        with transaction.atomic():
            snapshot = body_writer.snapshot_row_create(body=body, **fields)
        body_writer.body_encode(snapshot, body)
        return snapshot

    projection.snapshot_create = first_commit_only
    snapshot = projection.projection_build(session_id=sys.argv[1], provider="anthropic-messages")
    print(snapshot.pk, flush=True)
    print(body_codec.body_text(snapshot.view.body), flush=True)
    threading.Event().wait()
    """
)


@pytest.mark.django_db(transaction=True)
def test_a_turn_killed_before_its_body_is_written_is_rebuilt_never_empty(api_session):
    s = api_session(protocol="unified", version=2)
    s.input("quote ACME: 40 seats")
    s.host_tool_work("lookup", "stock 12, ünïcode")
    s.project("anthropic-messages")  # an earlier body, stored
    s.write(role="assistant", kind="text", content="40 seats are in stock.")

    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, s.id],
        cwd=ROOT,
        env=worker_env(DJANGO_SETTINGS_MODULE="contextproto.settings", NODE_ROLE="api"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        snapshot_id = child.stdout.readline().strip()
        sent = child.stdout.readline().rstrip("\n")
        assert snapshot_id, child.stderr.read()
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    assert child.returncode == -signal.SIGKILL

    lost = ProjectionSnapshot.objects.get(pk=snapshot_id)
    assert lost.body_state == "pending" and lost.body is None and lost.request_hash
    snapshot_bodies.forget_cache()

    # Any reader rebuilds it at once: the view as sent, and says so.
    view = ProjectionSnapshot.objects.get(pk=snapshot_id).view
    assert view.rebuilt and view.hash_matches is True and view.problem is None
    assert body_codec.body_text(view.body) == sent
    answer = KeyClient(s.client.key).get(s.path(f"snapshots/{snapshot_id}/"))
    assert answer.status_code == 200, answer.content
    wire = answer.json()
    assert wire["body"] == "rebuilt" and wire["bodyHashMatches"] is True
    assert json.dumps(wire["request"]) == json.dumps(json.loads(sent)["request"])

    # Past the grace period the sweeper writes it, marked rebuilt, with a note saying why.
    assert body_sweeps.snapshot_body_sweep().rebuilt == 0  # (a turn may still be calling)
    with override_settings(SNAPSHOT_BODY_GRACE_SECONDS=0):
        assert body_sweeps.snapshot_body_sweep().rebuilt == 1
    stored = ProjectionSnapshot.objects.get(pk=snapshot_id)
    assert stored.body_state == "rebuilt" and stored.body is not None
    assert "the process of the turn ended before writing it" in stored.notes[-1]
    assert "matches" in stored.notes[-1]
    snapshot_bodies.forget_cache()
    again = ProjectionSnapshot.objects.get(pk=snapshot_id).view
    assert again.rebuilt and again.hash_matches is True
    assert body_codec.body_text(again.body) == sent

    # The session goes on; its next body is a delta on the rebuilt one.
    s.write(role="assistant", kind="text", content="Quote sent.")
    following = projection_build(session_id=s.id, provider="anthropic-messages")
    snapshot_bodies.forget_cache()
    following = ProjectionSnapshot.objects.get(pk=following.pk)
    assert following.body_encoding == "delta" and str(following.body_base) == snapshot_id
    assert following.view.origin == "stored" and following.request["messages"]
