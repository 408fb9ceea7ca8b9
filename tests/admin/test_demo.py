"""`manage.py demo`: the story's numbers, the worker's checkpoints, and the admin links.

One test, so the demo runs once. On a transactional database, as `make demo` runs it: the
dispatcher queues maintenance in on-commit callbacks, which a test transaction never fires.
"""

from __future__ import annotations

import io
import re
from contextlib import redirect_stdout

from django.contrib.auth import get_user_model
from django.core.management import call_command

from contextproto.tokens import tokenizer_label
from labs import scenario
from sessions_app.models import FoldRecord, GatewayExchange, MaintenanceJob, Message, Session

CACHED_ROW = re.compile(
    r"^(?P<view>unified@2|unified@4|prefix@2|full history) +(?P<tokens>[\d,]+)"
    r" +(?P<openai_hit>\d+)% +(?P<openai_cost>[\d,]+) +(?P<openai_share>\d+)%"
    r" +(?P<anthropic_hit>\d+)% +(?P<anthropic_cost>[\d,]+) +(?P<anthropic_share>\d+)%$"
)


def cached_rows(output: str) -> dict[str, dict[str, int]]:
    """The rows of the "Cost with prompt caching" table, by view, as numbers."""
    table = output.split("Cost with prompt caching", 1)[1]
    rows = {}
    for line in table.splitlines():
        found = CACHED_ROW.match(line)
        if found:
            rows[found["view"]] = {
                k: int(v.replace(",", "")) for k, v in found.groupdict().items() if k != "view"
            }
    return rows


def figures(output: str, label: str) -> tuple[int, ...]:
    """(unified@2, unified@4, prefix@2, full history) of the summary row `label` ("total",
    "/turn")."""
    line = next(line for line in output.splitlines() if line.strip().startswith(label))
    numbers = [int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*", line.split(label, 1)[1])]
    return tuple(numbers[-4:])  # the total row names its turn count first


def test_demo_tells_the_story_in_estimated_tokens_and_links_the_admin(
    transactional_db, client, live_server
):
    out = io.StringIO()
    call_command("demo", stdout=out)
    output = out.getvalue()

    # unified@2 costs less per turn than prefix@2 and than full history, labelled estimates.
    assert "Input tokens per turn (estimates: characters / 4" in output
    unified, unified4, prefix, full = figures(output, "/turn")
    assert unified < prefix < full, (unified, prefix, full)
    # unified@4 runs the same story turn for turn (its longer prompt, tools and state
    # message cost a few hundred tokens a turn; the folds leave its masking little to do).
    assert unified4 < prefix, (unified4, prefix)
    totals = figures(output, "total")
    assert totals[0] < totals[2] < totals[3] and totals[1] < totals[2], totals
    assert re.search(r"unified@2 sent \d+% fewer input tokens than prefix@2 and \d+% fewer", output)
    turns = len(re.findall(r"^  turn +\d+ ", output, re.M)) // 3
    change = round(100 * totals[1] / totals[0]) - 100
    more = f"{abs(change)}% {'more' if change > 0 else 'fewer'} than unified@2 (estimates)"
    assert f"unified@4 sent {totals[1]:,} input tokens over the same {turns} turns: {more}" in (
        output
    )

    # With prompt caching: tokens, hit ratio and effective cost under both providers' rules
    # for each agent and the full history; unified@2 pays less than the full history.
    assert f"Cost with prompt caching ({tokenizer_label()};" in output
    rows = cached_rows(output)
    assert set(rows) == {"unified@2", "unified@4", "prefix@2", "full history"}, rows
    for provider in ("openai", "anthropic"):
        assert rows["full history"][f"{provider}_share"] == 100
        assert rows["unified@2"][f"{provider}_cost"] < rows["full history"][f"{provider}_cost"]
        assert all(0 < row[f"{provider}_hit"] <= 100 for row in rows.values()), rows
        # A cached token costs less than a sent one: the cost is below the tokens.
        assert all(row[f"{provider}_cost"] < row["tokens"] for row in rows.values()), rows
    assert rows["unified@2"]["tokens"] < rows["prefix@2"]["tokens"] < rows["full history"]["tokens"]
    # Its header changes only at a task-memory write, a window switch or a checkpoint: the
    # window-memory writes that break unified@2's cache append to unified@4's, so it pays
    # less than unified@2 once cached although it sends more tokens.
    for provider in ("openai", "anthropic"):
        assert rows["unified@4"][f"{provider}_cost"] < rows["unified@2"][f"{provider}_cost"]
        assert rows["unified@4"][f"{provider}_hit"] > rows["unified@2"][f"{provider}_hit"]
    breaks4 = re.search(r"Cache breaks, unified@4 \(Anthropic rules[^:]*\): (.*)", output)
    assert breaks4 and "window switch" in breaks4[1] and "header" not in breaks4[1], breaks4
    # unified@4 beside unified@2 with caching: its share of unified@2's cost per provider,
    # the same figure the two rows give.
    found = re.search(
        r"unified@4 beside unified@2 with caching on: (\d+)% of its cost on OpenAI .* and "
        r"(\d+)% of its cost on Anthropic",
        output,
    )
    assert found, output
    for share, provider in zip(found.groups(), ("openai", "anthropic"), strict=True):
        u4, u2 = rows["unified@4"], rows["unified@2"]
        expected = 100 * u4[f"{provider}_cost"] / u2[f"{provider}_cost"]
        assert abs(int(share) - expected) <= 1, (share, expected)
    assert re.search(
        r"Cache breaks, unified@2 \(Anthropic rules; turn pairs, tokens re-billed\): .*"
        r"window switch \d+ \([\d,]+\)",
        output,
    )
    assert "Cache breaks, full history (Anthropic rules; turn pairs, tokens re-billed): none" in (
        output
    )

    # The story: five tasks, one window resumed, folds, and checkpoints by the worker, one
    # because a view crossed maintenanceTriggerRatio x maxInputTokens, one asked for.
    session = Session.objects.get(agent_version__agent__name="quote-assistant (unified@2)")
    # unified@2's script runs unchanged under unified@4: every call validates and succeeds.
    for label in ("unified@2", "unified@4"):
        agent = f"quote-assistant ({label})"
        refused = Message.objects.filter(
            session__agent_version__agent__name=agent, kind="tool_result", is_error=True
        )
        assert not refused.exists(), (label, [m.content for m in refused])
    # Five tasks for each of the two unified agents.
    assert len(re.findall(r"window main +tool context_window_open", output)) == 10
    assert FoldRecord.objects.filter(session=session).count() >= 5
    print(
        list(
            MaintenanceJob.objects.filter(session=session).values_list(
                "trigger", "status", "reason", "attempts"
            )
        )
    )
    jobs = MaintenanceJob.objects.filter(session=session, status="committed")
    assert {"input_tokens", "tool"} <= set(jobs.values_list("trigger", flat=True))
    assert all(job.attempts == 1 and job.attempt_log for job in jobs)
    assert "worker: checkpoint of delivery-acme committed" in output

    # One conversation went through the gateway with the official openai client: the model
    # noted the task with a protocol tool (run by the gateway), called the client's own tool,
    # and answered from its result; every request answered 200.
    gateway = Session.objects.get(agent_version__agent__name="gateway-desk")
    header = (
        f"== through the gateway: the official openai client, gateway-desk@1: session {gateway.id}"
    )
    assert header in output
    assert (
        '+ price_lookup {"product":"A-100"} (2 model turns; the gateway ran '
        "context_task_memory_set itself)" in output
    )
    assert f'  gateway -> "{scenario.GATEWAY_ANSWER}" (1 model turn)' in output
    kinds = list(
        Message.objects.filter(session=gateway).order_by("index").values_list("kind", "tool_name")
    )
    assert kinds == [
        ("input", None),
        ("tool_call", "context_task_memory_set"),
        ("tool_result", "context_task_memory_set"),
        ("tool_call", "price_lookup"),
        ("tool_result", "price_lookup"),
        ("text", None),
    ]
    assert [e.http_status for e in GatewayExchange.objects.filter(session=gateway)] == [200, 200]
    # It prints the gateway's base URL and a snippet that continues that conversation; pasted
    # against a running server (here the test's), it gets the script's next answer.
    assert (
        "Drop-in gateway, served with the admin: OpenAI Chat Completions at "
        "http://127.0.0.1:8000/gateway/openai/v1" in output
    )
    snippet = re.search(r"^from openai import OpenAI\n.*?^print\(reply.*?\)$", output, re.M | re.S)
    assert snippet is not None, output
    pasted = io.StringIO()
    with redirect_stdout(pasted):
        exec(snippet[0].replace("http://127.0.0.1:8000", live_server.url), {})
    assert pasted.getvalue() == scenario.GATEWAY_SPARE_ANSWERS[0] + "\n"
    assert Message.objects.filter(session=gateway).count() == len(kinds) + 2

    # The links it prints open, and the login stays the last thing it says.
    for label in (
        "input tokens chart",
        "a turn with a fold and a checkpoint",
        "the turn its fold was made (diff)",
        "the turn after a checkpoint (diff)",
    ):
        assert label in output
    client.force_login(get_user_model().objects.get(username="admin"))
    links = re.findall(r"http://127\.0\.0\.1:8000(/admin/\S+)", output)
    assert len(links) >= 6
    for link in links:
        assert client.get(link.split("#")[0]).status_code == 200, link
    assert output.rstrip().splitlines()[-1] == "Login: admin / contextproto-demo"
