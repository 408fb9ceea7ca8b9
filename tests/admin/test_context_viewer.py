"""The context viewer: a turn's view beside its raw log, the token breakdown, the diff."""

from __future__ import annotations

import re

import pytest

from sessions_app.admin_views import context as ctx
from sessions_app.admin_views.diff import snapshot_diff
from sessions_app.models import ArchiveChunk
from sessions_app.providers.base import canonical_json, estimate_tokens
from sessions_app.services.archive import archive_session
from sessions_app.services.sessions import session_create
from sessions_app.store.state import kv_commit
from tests.builders.sessions import HostTurns, build_context_session


def browse(session, tail: str = "") -> str:
    return f"/admin/sessions_app/session/{session.pk}/browse/{tail}"


def raw_row(html: str, index: int) -> str:
    at = html.index(f'<tr id="r{index}"')
    return html[at : html.index("</tr>", at)]


def view_row(html: str, position: int) -> str:
    at = html.index(f'<tr id="v{position}"')
    return html[at : html.index("</tr>", at)]


@pytest.fixture
def operator(superuser, admin_client_for):
    return admin_client_for(superuser)


@pytest.fixture
def built(published_version):
    return build_context_session(published_version(version=2))


def positions(snapshot) -> dict[str, int]:
    """View position of each derived message: raw by MessageId, the rest by derived type."""
    found = {}
    for position, source in enumerate(snapshot.sources):
        if source["derivedType"] == "raw":
            found[source["messageIds"][0]] = position
        else:
            found.setdefault(source["derivedType"], position)
    return found


# ---------------------------------------------------------------- side by side


def test_raw_log_beside_the_view_says_what_is_shown_folded_compressed_or_hidden(operator, built):
    session, turns, named, fold_id = built
    snapshot = turns.views[-1]
    at = positions(snapshot)
    html = operator.get(browse(session, f"snapshots/{snapshot.pk}/?raw_after=0")).content.decode()

    # The current run's input, received in main, is carried into the research view.
    row = raw_row(html, named["input"].index)
    assert 'data-status="shown"' in row
    assert f'href="#v{at[str(named["input"].id)]}"' in row
    assert "carried from window main" in row
    # main's host lookup is another window's history.
    for name in ("main_call", "main_result"):
        assert 'data-status="hidden"' in raw_row(html, named[name].index)
    # Lookup A is covered by research's checkpoint: the header stands for it.
    for name in ("a_call", "a_result"):
        row = raw_row(html, named[name].index)
        assert 'data-status="compressed"' in row
        assert f'href="#v{at["context_header"]}"' in row
        assert f"through #{named['a_result'].index}" in row
    # Lookups B and C are in the view only through the fold.
    for name in ("b_call", "b_result", "c_call", "c_result"):
        row = raw_row(html, named[name].index)
        assert 'data-status="folded"' in row
        assert f'href="#v{at["context_fold"]}"' in row
        assert fold_id in row
    # Lookup D is in view as itself.
    row = raw_row(html, named["d_result"].index)
    assert 'data-status="shown"' in row and f'href="#v{at[str(named["d_result"].id)]}"' in row


def test_every_derived_message_links_to_its_sources(operator, built):
    session, turns, named, fold_id = built
    snapshot = turns.views[-1]
    at = positions(snapshot)
    html = operator.get(browse(session, f"snapshots/{snapshot.pk}/")).content.decode()

    fold = view_row(html, at["context_fold"])
    first = named["b_call"].index
    # Into the raw pane beside it, at the fold's first message ...
    assert f'raw_after={first - 1}#r{first}"' in fold
    # ... to the fold page and to every original message.
    assert f"/browse/folds/{fold_id}/" in fold
    for name in ("b_call", "b_result", "c_call", "c_result"):
        assert f"/browse/messages/{named[name].id}/" in fold
    raw = view_row(html, at[str(named["d_result"].id)])
    assert f"/browse/messages/{named['d_result'].id}/" in raw
    assert f"#r{named['d_result'].index}" in raw
    header = view_row(html, at["context_header"])
    assert "/browse/kv/?prefix=checkpoint/" in header
    assert f"#1\u2013#{named['a_result'].index}" in header  # an en dash, as the page has it


def test_raw_messages_and_folds_link_back_to_their_place_in_the_latest_view(operator, built):
    session, turns, named, fold_id = built
    snapshot = turns.views[-1]
    at = positions(snapshot)

    html = operator.get(browse(session, f"messages/{named['b_call'].id}/")).content.decode()
    cell = html[html.index('id="message-in-view"') :]
    assert "folded" in cell[:400]
    assert f"/browse/snapshots/{snapshot.pk}/?raw_after={named['b_call'].index - 1}" in cell
    assert f"#v{at['context_fold']}" in cell

    html = operator.get(browse(session, f"messages/{named['main_call'].id}/")).content.decode()
    cell = html[html.index('id="message-in-view"') :]
    assert "hidden" in cell[:400] and 'id="message-view-link"' not in cell[:1000]

    html = operator.get(browse(session, f"folds/{fold_id}/")).content.decode()
    cell = html[html.index('id="fold-in-view"') :]
    assert f"#v{at['context_fold']}" in cell[:800]


def legend_counts(html: str) -> dict[str, int]:
    legend = html[html.index('id="raw-legend"') :]
    legend = legend[: legend.index("</p>")]
    return {
        status: int(count)
        for status, count in re.findall(
            r'data-status="(\w+)">.*?class="status-count">(\d+)<', legend
        )
    }


def test_raw_pane_opens_on_the_views_range_and_counts_it_whole(operator, built):
    session, turns, named, _fold_id = built
    snapshot = turns.views[-1]
    bound = snapshot.upper_bound
    # A page smaller than the range: the counts still describe the whole range, so a view
    # with a fold and a checkpoint never reports "folded 0, compressed 0".
    html = operator.get(browse(session, f"snapshots/{snapshot.pk}/?raw_limit=4")).content.decode()
    first = named["input"].index  # the carried input is the earliest message the view uses
    assert f'data-first="{first}" data-last="{bound}"' in html
    assert legend_counts(html) == {
        "shown": 5,  # the input, the fold call and its result, lookup D
        "masked": 0,
        "folded": 4,  # lookups B and C
        "compressed": 2,  # lookup A, under research's checkpoint
        "hidden": bound - first + 1 - 11,  # main's lookup and the window_open call/result
    }
    # The pane starts at the range's first message and pages forward to the bound.
    indices = [int(i) for i in re.findall(r'<tr id="r(\d+)"', html)]
    assert indices == [first, first + 1, first + 2, first + 3]
    assert f"raw_after={first + 3}" in html and 'id="raw-range"' not in html
    later = operator.get(
        browse(session, f"snapshots/{snapshot.pk}/?raw_limit=50&raw_after={first + 3}")
    ).content.decode()
    assert re.findall(r'<tr id="r(\d+)"', later)[-1] == str(bound)
    assert 'id="raw-range"' in later  # the way back to the view's range
    assert legend_counts(later) == legend_counts(html)

    # With the default page size the whole range is on the page, every status in its row.
    html = operator.get(browse(session, f"snapshots/{snapshot.pk}/")).content.decode()
    rows = re.findall(r'<tr id="r(\d+)" class="raw-row status-(\w+)"', html)
    assert [int(i) for i, _ in rows] == list(range(first, bound + 1))
    seen = {status: sum(1 for _, s in rows if s == status) for status in ctx.STATUS_HELP}
    assert seen == legend_counts(html)


def test_a_window_with_its_first_message_under_the_checkpoint_starts_the_range(
    operator, published_version
):
    """Without a carried input, the range starts at the window's first message (compressed)."""
    session, _key = session_create(agent_version=published_version(version=2), inputs={})
    turns = HostTurns(session)
    first_call, first_result = turns.host("lookup", "one")
    turns.host("lookup", "two")
    kv_commit(session_id=session.id, writes={"coveredThrough/main": first_result.index})
    snapshot = turns.project()
    html = operator.get(browse(session, f"snapshots/{snapshot.pk}/")).content.decode()
    assert f'data-first="{first_call.index}"' in html
    counts = legend_counts(html)
    assert counts["compressed"] == 2 and counts["shown"] == 2 and counts["hidden"] == 0
    assert 'data-status="compressed"' in raw_row(html, first_call.index)


def test_tool_call_arguments_show_inline_and_fold_only_when_long(operator, published_version):
    session, _key = session_create(agent_version=published_version(version=2), inputs={})
    turns = HostTurns(session)
    short_call, _ = turns.host("crm_lookup", "ok", arguments={"customer": "ACME <Corp>"})
    rows = [{"sku": f"L-{n}", "price": 1000 + n} for n in range(40)]
    long_call, long_result = turns.host("quote_create", "ok", arguments={"rows": rows})
    snapshot = turns.project()
    at = positions(snapshot)
    html = operator.get(browse(session, f"snapshots/{snapshot.pk}/")).content.decode()

    short = view_row(html, at[str(short_call.id)])
    assert '<div class="tool-arguments">' in short and "<details" not in short
    assert "&quot;customer&quot;: &quot;ACME &lt;Corp&gt;&quot;" in short  # pretty, escaped
    long = view_row(html, at[str(long_call.id)])
    assert '<details class="tool-arguments"><summary>arguments (' in long
    assert "&quot;sku&quot;: &quot;L-39&quot;" in long
    # The raw pane shows them beside the call too.
    assert "&quot;customer&quot;: &quot;ACME &lt;Corp&gt;&quot;" in raw_row(html, short_call.index)
    assert '<details class="tool-arguments">' in raw_row(html, long_call.index)

    detail = operator.get(browse(session, f"messages/{long_call.id}/")).content.decode()
    section = detail[detail.index('id="message-arguments"') :]
    assert "&quot;rows&quot;: [" in section[:200] and "&quot;price&quot;: 1039" in section
    result = operator.get(browse(session, f"messages/{long_result.id}/")).content.decode()
    assert 'id="message-arguments"' not in result


def test_raw_pane_pages_by_index_and_filters_to_the_views_window(operator, built):
    session, turns, named, _fold_id = built
    snapshot = turns.views[-1]
    bound = snapshot.upper_bound
    page = operator.get(
        browse(session, f"snapshots/{snapshot.pk}/?raw_limit=4&raw_before={bound + 1}")
    ).content.decode()
    # The log's tail: the page ends at the turn's bound.
    assert f'id="r{bound}"' in page and f'id="r{bound - 3}"' in page
    assert f'id="r{bound - 4}"' not in page and f'id="r{bound + 1}"' not in page
    assert f"raw_before={bound - 3}" in page
    earlier = operator.get(
        browse(session, f"snapshots/{snapshot.pk}/?raw_limit=4&raw_before={bound - 3}")
    ).content.decode()
    assert f'id="r{bound - 4}"' in earlier and f'id="r{bound - 3}"' not in earlier
    only = operator.get(
        browse(session, f"snapshots/{snapshot.pk}/?raw_window=1&raw_limit=50")
    ).content.decode()
    indices = [int(i) for i in re.findall(r'<tr id="r(\d+)"', only)]
    assert named["main_call"].index not in indices and named["a_call"].index in indices


# ---------------------------------------------------------------- token breakdown


def test_token_breakdown_splits_the_view_by_part():
    messages = [
        {"role": "system", "kind": "system", "content": "s" * 400},
        {"role": "assistant", "kind": "context_header", "content": "h" * 100},
        {"role": "user", "kind": "input", "content": "u" * 40},
        {"role": "assistant", "kind": "context_fold", "content": "f" * 80},
        {"role": "tool", "kind": "tool_result", "content": "r" * 200, "toolCallId": "c1"},
        {"role": "assistant", "kind": "context_state", "content": "x" * 60},
    ]
    sources = [
        {"derivedType": "system"},
        {"derivedType": "context_header"},
        {"derivedType": "raw", "messageIds": ["m1"]},
        {"derivedType": "context_fold", "messageIds": ["m2", "m3"]},
        {"derivedType": "raw", "messageIds": ["m4"]},
        {"derivedType": "context_state"},
    ]
    tools = [{"name": "context_fold_create", "parameters": {"type": "object"}}] * 3
    request = {"messages": messages, "tools": tools}
    breakdown = ctx.token_breakdown(
        messages=messages,
        sources=sources,
        request=request,
        usage={"inputTokens": 999, "estimated": True},
    )
    each = [estimate_tokens(canonical_json(m)) for m in messages]
    assert breakdown.per_message == tuple(each)
    assert breakdown.tokens("system") == each[0]
    assert breakdown.tokens("header") == each[1]
    assert breakdown.tokens("history") == each[2] + each[4]
    assert breakdown.tokens("folds") == each[3]
    assert breakdown.tokens("state") == each[5]
    assert breakdown.tokens("tools") == estimate_tokens(canonical_json(tools))
    assert breakdown.total == sum(s.tokens for s in breakdown.segments)
    counts = {s.key: s.messages for s in breakdown.segments}
    assert counts == {"system": 1, "header": 1, "history": 2, "folds": 1, "state": 1, "tools": 3}
    assert breakdown.request_tokens == estimate_tokens(canonical_json(request))
    assert breakdown.reported == 999 and breakdown.reported_estimated
    assert abs(sum(float(s.share) for s in breakdown.segments) - 100) < 0.5


def test_snapshot_page_shows_the_breakdown_with_estimates_labelled(operator, built):
    session, turns, _named, _fold_id = built
    snapshot = turns.views[-1]
    breakdown = ctx.snapshot_breakdown(snapshot)
    html = operator.get(browse(session, f"snapshots/{snapshot.pk}/")).content.decode()
    assert "estimate: characters / 4" in html
    for segment in breakdown.segments:
        at = html.index(f'data-segment="{segment.key}"')
        row = html[at : html.index("</tr>", at)]
        assert f'class="num segment-tokens">{segment.tokens}<' in row
    assert f"<strong>{breakdown.total}</strong>" in html
    assert breakdown.tokens("tools") > 0 and breakdown.tokens("folds") > 0
    assert breakdown.tokens("state") > 0 and breakdown.tokens("header") > 0


# ---------------------------------------------------------------- diff of two turns


def test_diff_after_a_fold_removes_the_folded_messages_and_adds_the_fold(built):
    _session, turns, named, fold_id = built
    # views: ..., the view that wrote fold_create (before), the view after it (with the fold)
    after = next(v for v in turns.views if any(s.get("foldId") for s in v.sources))
    before = turns.views[turns.views.index(after) - 1]
    diff = snapshot_diff(before, after)
    removed = [r for r in diff.rows if r.op == "removed"]
    assert {r.first_index for r in removed} == {
        named[n].index for n in ("b_call", "b_result", "c_call", "c_result")
    }
    assert all(r.reason == f"folded into {fold_id}" for r in removed)
    added = {r.derived: r for r in diff.rows if r.op == "added"}
    assert "context_fold" in added and "new fold over" in added["context_fold"].reason
    # The fold_create call and its result are new since the turn before.
    assert "new since the turn before" in added["raw"].reason
    assert ("State revision", before.revision, after.revision) in diff.facts
    total = dict((label, delta) for label, _css, _b, _a, delta in diff.segments)
    assert total["History: folds"] == added["context_fold"].tokens_after
    raw_rows = [r for r in diff.rows if r.derived == "raw" and r.op in ("added", "removed")]
    assert total["History: raw messages"] == sum(r.tokens_after - r.tokens_before for r in raw_rows)
    assert diff.total_after - diff.total_before == sum(total.values())


def test_diff_after_a_checkpoint_says_compressed_and_after_a_switch_says_so(built):
    _session, turns, named, _fold_id = built
    before, after = turns.views[-2], turns.views[-1]
    diff = snapshot_diff(before, after)
    removed = {r.first_index: r.reason for r in diff.rows if r.op == "removed"}
    assert set(removed) == {named["a_call"].index, named["a_result"].index}
    assert all(
        reason.startswith("compressed: research's checkpoint") for reason in removed.values()
    )
    changed = [r for r in diff.rows if r.op == "changed"]
    assert {r.derived for r in changed} >= {"context_header", "context_state"}
    header = next(r for r in changed if r.derived == "context_header")
    assert any(op == "+" and "Laptop A costs 1300 EUR." in line for op, line in header.lines)
    # The window switch: main's lookup leaves with main.
    switch = next(i for i, v in enumerate(turns.views) if v.window_id == "research")
    diff = snapshot_diff(turns.views[switch - 1], turns.views[switch])
    main_rows = [r for r in diff.rows if r.op == "removed" and r.derived == "raw"]
    assert main_rows and all("left the view with window main" in r.reason for r in main_rows)
    assert ("Window", "main", "research") in diff.facts


def test_diff_page_compares_with_the_turn_before_and_handles_the_first(operator, built):
    session, turns, _named, _fold_id = built
    first, last = turns.views[0], turns.views[-1]
    html = operator.get(browse(session, f"snapshots/{first.pk}/diff/")).content.decode()
    assert 'id="no-diff"' in html
    html = operator.get(browse(session, f"snapshots/{last.pk}/diff/")).content.decode()
    assert 'data-op="removed"' in html and "compressed: research&#x27;s checkpoint" in html
    assert f"/browse/snapshots/{turns.views[-2].pk}/" in html  # the view before
    snapshots = operator.get(browse(session, "snapshots/")).content.decode()
    assert f"/browse/snapshots/{last.pk}/diff/" in snapshots


def test_the_range_counts_hold_when_the_log_is_archived(operator, built):
    """Compressed messages counted in the cold archive as in the hot table."""
    session, turns, named, _fold_id = built
    snapshot = turns.views[-1]
    hot = operator.get(browse(session, f"snapshots/{snapshot.pk}/?raw_limit=4")).content.decode()
    archive_session(session_id=session.id, keep_last=0, chunk_size=5)
    assert ArchiveChunk.objects.filter(session=session).count() == 3
    cold = operator.get(browse(session, f"snapshots/{snapshot.pk}/?raw_limit=4")).content.decode()
    assert legend_counts(cold) == legend_counts(hot)
    assert legend_counts(cold)["compressed"] == 2
    indices = [int(i) for i in re.findall(r'<tr id="r(\d+)"', cold)]
    assert indices[0] == named["input"].index
