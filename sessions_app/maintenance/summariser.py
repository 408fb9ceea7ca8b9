"""The built-in summariser: the maintainer Agent's version, the prompt and the provider call
that turns a job's pages into a checkpoint (retried once, shorter, when it is too long).
"""

from __future__ import annotations

from typing import Any

from django.db.models import F, Sum

from agents.models import AgentVersion
from agents.selectors import effective_options, protocol_of
from contextproto import telemetry
from contextproto.protocol import checkpoints
from contextproto.protocol import maintenance as planning
from contextproto.protocol.adapters import WireFormat
from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.messages import RawMessage
from contextproto.telemetry.genai import output_message
from contextproto.telemetry.spans import TURN_SOURCE
from contextproto.usage import tokens_of
from sessions_app import providers
from sessions_app.maintenance.jobs import JobFailed, save_fenced
from sessions_app.models import MaintenanceJob, Session
from sessions_app.reads import raw_log, trace_facts


def _maintainer_version(session: Session) -> AgentVersion:
    agent_id = session.agent_version.maintainer_agent_id
    if agent_id is None:
        raise JobFailed("no maintainer Agent is bound to this AgentVersion")
    version = (
        AgentVersion.objects.filter(agent_id=agent_id, status=AgentVersion.Status.PUBLISHED)
        .order_by("-number")
        .first()
    )
    if version is None:
        raise JobFailed("the bound maintainer Agent has no published version")
    return version


def summary_request(wire_format: str, prompt: list[dict[str, str]]) -> dict[str, Any]:
    """The summary prompt as a request body of the maintainer's wire format."""
    system = "\n\n".join(m["content"] for m in prompt if m["role"] == "system")
    rest = [m for m in prompt if m["role"] != "system"]
    if wire_format == WireFormat.ANTHROPIC_MESSAGES:
        return {"system": system, "messages": rest}
    if wire_format == WireFormat.OPENAI_RESPONSES:
        # Input messages with text content; the provider keeps nothing of a summary call.
        items = [{"type": "message", "role": m["role"], "content": m["content"]} for m in rest]
        return {"instructions": system, "input": items, "store": False}
    return {"messages": prompt}


def summarise(
    job: MaintenanceJob, plan: planning.MaintenancePlan, pages: list[list[RawMessage]]
) -> str:
    """Ask the maintainer model for the checkpoint; one shorter retry if it is too long."""
    session = Session.objects.select_related("agent_version").get(pk=job.session_id)
    maintainer = _maintainer_version(session)
    try:
        protocol = protocol_of(session.agent_version)
    except ProtocolError as exc:
        raise JobFailed(f"protocol_unknown_on_worker: {exc.message}") from exc
    limit = effective_options(session.agent_version, protocol)["checkpointMaxCharacters"]
    goal = raw_log.kv_values(session.id, [f"window/{job.window_id}"]).get(
        f"window/{job.window_id}", {}
    )
    provider = providers.provider_for(maintainer.model_provider, maintainer.model_config or {})
    prompt = checkpoints.summariser_prompt(
        previous_checkpoint=plan.previous_checkpoint,
        pages_text=[checkpoints.render_page_text(page) for page in pages],
        max_characters=limit,
        window_goal=str(goal.get("goal", "")) if isinstance(goal, dict) else "",
    )
    facts = trace_facts.maintainer_facts(session, maintainer, window_id=job.window_id)
    with telemetry.agent_span(facts, attributes={TURN_SOURCE: "maintenance"}):
        return _summarise(job, provider, maintainer, prompt, limit, facts)


def _summarise(
    job: MaintenanceJob,
    provider: providers.ModelProvider,
    maintainer: AgentVersion,
    prompt: list[dict[str, str]],
    limit: int,
    facts: telemetry.SessionFacts | None,
) -> str:
    usage_total = {"inputTokens": 0, "outputTokens": 0, "calls": 0}
    for attempt in range(2):
        step = (
            MaintenanceJob.objects.filter(session_id=job.session_id).aggregate(
                n=Sum("summary_calls")
            )["n"]
            or 0
        )
        with telemetry.chat_span(facts, attributes={TURN_SOURCE: "maintenance"}) as chat:
            reply = provider.complete(
                summary_request(provider.wire_format, prompt),
                model=maintainer.model_name,
                step=step,
            )
            _traced_reply(chat, reply, prompt)
        MaintenanceJob.objects.filter(pk=job.pk).update(summary_calls=F("summary_calls") + 1)
        job.summary_calls += 1
        for key in ("inputTokens", "outputTokens"):
            usage_total[key] += int(reply.usage.get(key, 0) or 0)
        usage_total["calls"] += 1
        job.summarizer_usage = usage_total
        save_fenced(job, ["summarizer_usage"])
        answer = (reply.text or "").strip()
        if reply.tool_calls and not answer:
            raise JobFailed("the maintainer answered with a tool call instead of a checkpoint")
        try:
            return checkpoints.validate_checkpoint(answer, limit)
        except ProtocolError as exc:
            if exc.code != "checkpoint_too_long" or attempt == 1:
                raise JobFailed(f"{exc.code}: {exc.message}") from exc
            prompt = checkpoints.shorter_retry_prompt(prompt, answer, limit)
    raise JobFailed("unreachable")  # pragma: no cover


def _traced_reply(
    span: telemetry.Span, reply: providers.ModelReply, prompt: list[dict[str, str]]
) -> None:
    """What the maintainer's model answered, on its chat span."""
    raw = reply.raw if isinstance(reply.raw, dict) else {}
    model, response_id = raw.get("model"), raw.get("id")
    telemetry.chat_result(
        span,
        response_model=model if isinstance(model, str) else None,
        response_id=response_id if isinstance(response_id, str) else None,
        finish_reasons=[reply.stop_reason] if reply.stop_reason else (),
        usage=tokens_of(reply.usage),
    )
    if telemetry.capture_content():
        view = [{"role": m["role"], "kind": m["role"], "content": m["content"]} for m in prompt]
        telemetry.chat_content(span, view=view, output=[output_message(reply.text)])
