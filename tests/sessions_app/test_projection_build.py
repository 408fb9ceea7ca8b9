"""projection_build reads only what the turn shows: its query count ignores session size."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from contextproto.errors import ApplicationError
from sessions_app.models import ProjectionSnapshot
from sessions_app.services.projection import projection_build
from sessions_app.services.runs import run_start
from sessions_app.services.sessions import session_create
from tests.builders.bulk import bulk_history


def build_queries(session) -> tuple[int, ProjectionSnapshot]:
    with CaptureQueriesContext(connection) as queries:
        snapshot = projection_build(session_id=session.id, provider="openai-chat", use_cache=False)
    return len(queries), snapshot


@pytest.mark.slow
def test_query_count_is_the_same_for_100_and_100k_messages(application, make_version):
    version = make_version(application)
    small, _ = session_create(agent_version=version)
    big, _ = session_create(agent_version=version)
    bulk_history(small, total=100)
    bulk_history(big, total=100_000)
    for s in (small, big):
        run_start(session_id=s.id, content="go")
    build_queries(small)  # the version's host tools are read once per process, then kept
    small_count, _small_snapshot = build_queries(small)
    big_count, big_snapshot = build_queries(big)
    assert small_count == big_count
    assert small_count <= 12
    # The view holds main's share of history, not the whole log.
    assert len(big_snapshot.messages) < 100_000 / 10


def test_snapshot_is_cached_by_revision_bound_and_run(session):
    run_start(session_id=session.id, content="hi")
    first = projection_build(session_id=session.id)
    again = projection_build(session_id=session.id)
    assert first.id == again.id
    other_provider = projection_build(session_id=session.id, provider="anthropic-messages")
    assert other_provider.id != first.id
    run_start(session_id=session.id, content="more")
    assert projection_build(session_id=session.id).id != first.id


def test_unknown_provider_is_refused(session):
    with pytest.raises(ApplicationError) as refused:
        projection_build(session_id=session.id, provider="grpc")
    assert refused.value.code == "provider_unknown"
