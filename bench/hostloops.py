"""Host loops over HTTP, the production server they drive, and the audit of their sessions.

Shared by `make load` (bench/load.py) and the fault tests (tests/reliability/): a loop drives
one session the way an external host does (contract §12, §5.2: a model turn is a projection and
the model's answer sent to `turns/`), retrying every request whose answer it did not get,
which is safe because a turn is keyed by its snapshot and body, each write carries a
clientMessageId and each dispatch is keyed by its toolCallId. `audit_sessions` then checks
each session in the database against the protocol's invariants and against what its host
was told.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MUTATING = ("context_task_memory_set", "context_window_open", "context_fold_create")
# Answers after which the same request is sent again: the rate limiter's 429, a 503 from a
# lost dependency (nothing written, or a write the retry replays), a proxy's 502/504.
RETRY_STATUSES = frozenset({429, 502, 503, 504})


# --------------------------------------------------------------------------- the server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_env(*, database_url: str, redis_url: str, var_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a production server: a real SECRET_KEY, no dev key, no autostart."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_VERSION", "DEBUG")}
    env.update(
        DATABASE_URL=database_url,
        REDIS_URL=redis_url,
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOW_DEV_SECRET_KEY="false",
        ALLOWED_HOSTS="127.0.0.1,localhost",
        VAR_DIR=str(var_dir),
        # External hosts drive these sessions; no Celery task is queued for a run.
        RUNTIME_AUTOSTART="false",
    )
    env.update(extra)
    return env


class Server:
    """uvicorn on contextproto.asgi:application with several workers, as `make serve` runs it.

    Started in its own process group so `kill()` takes the supervisor and every worker down
    at once, like a host losing the web container.
    """

    def __init__(self, *, env: dict[str, str], log_path: Path, workers: int, port: int = 0):
        self.env, self.log_path, self.workers = env, log_path, workers
        self.port = port or free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> Server:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "uvicorn", "contextproto.asgi:application"]
        command += ["--host", "127.0.0.1", "--port", str(self.port)]
        command += ["--workers", str(self.workers), "--no-access-log"]
        self.process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=self.env,
            stdout=self.log_path.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Return once the server answers HTTP (any status: it is up)."""
        deadline = time.monotonic() + timeout
        while True:
            connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
            try:
                connection.request("GET", "/api/v1/health/")
                connection.getresponse().read()
                return
            except (OSError, http.client.HTTPException):
                assert self.process is not None
                if self.process.poll() is not None or time.monotonic() > deadline:
                    tail = self.log_path.read_text(errors="replace")[-4000:]
                    raise RuntimeError(f"the server did not start:\n{tail}") from None
                time.sleep(0.2)
            finally:
                connection.close()

    def worker_pids(self) -> list[int]:
        """The worker processes under the uvicorn supervisor (children of its pid)."""
        assert self.process is not None
        children: list[int] = []
        for task in Path(f"/proc/{self.process.pid}/task").glob("*"):
            try:
                children += [int(p) for p in (task / "children").read_text().split()]
            except OSError:
                continue
        # multiprocessing also starts a resource tracker; workers are the spawned children.
        return sorted(pid for pid in children if b"spawn_main" in _cmdline(pid))

    def kill_worker(self) -> int:
        """SIGKILL one worker process (the supervisor starts a new one); return its pid."""
        pid = self.worker_pids()[0]
        os.kill(pid, signal.SIGKILL)
        return pid

    def kill(self) -> None:
        """SIGKILL the supervisor and every worker at once."""
        assert self.process is not None
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(15)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.kill()


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


# --------------------------------------------------------------------------- HTTP


@dataclass(frozen=True)
class Attempt:
    endpoint: str
    status: int | None  # None: no HTTP answer (refused, reset, timed out)
    seconds: float


class Stats:
    """Every attempt of every loop (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.attempts: list[Attempt] = []
        self.requests = 0  # logical requests; attempts beyond them are retries

    def begin(self) -> None:
        with self._lock:
            self.requests += 1

    def add(self, attempt: Attempt) -> None:
        with self._lock:
            self.attempts.append(attempt)

    def statuses(self) -> Counter:
        return Counter("no answer" if a.status is None else a.status for a in self.attempts)

    def server_errors(self) -> int:
        return sum(1 for a in self.attempts if a.status is not None and a.status >= 500)


class RequestFailed(Exception):
    """A request got no usable answer within the retry window, or an unexpected status."""


class HttpClient:
    """One keep-alive connection with one bearer key; retries what may be retried.

    A request that got no answer (the connection was refused, reset or timed out) may or may
    not have been applied, so it is sent again unchanged: the loops only send requests whose
    repetition is a replay (clientMessageId, toolCallId) or harmless (a projection).
    """

    def __init__(
        self, base_url: str, key: str, stats: Stats, *, retry_seconds: float = 60.0
    ) -> None:
        parsed = urllib.parse.urlsplit(base_url)
        self.host, self.port = parsed.hostname or "127.0.0.1", parsed.port or 80
        self.key, self.stats, self.retry_seconds = key, stats, retry_seconds
        self._connection: http.client.HTTPConnection | None = None

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def request(
        self, method: str, path: str, body: Any = None, *, endpoint: str
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        """Send until an answer that is not worth retrying comes; return status, JSON, headers."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"}
        deadline = time.monotonic() + self.retry_seconds
        pause = 0.05
        self.stats.begin()
        while True:
            started = time.perf_counter()
            try:
                if self._connection is None:
                    self._connection = http.client.HTTPConnection(self.host, self.port, timeout=30)
                self._connection.request(method, "/api/v1/" + path, body=data, headers=headers)
                response = self._connection.getresponse()
                raw = response.read()
                status, answer_headers = response.status, dict(response.getheaders())
            except (OSError, http.client.HTTPException) as exc:
                self.stats.add(Attempt(endpoint, None, time.perf_counter() - started))
                self.close()
                failure = f"{method} {path}: no answer ({exc.__class__.__name__}: {exc})"
            else:
                self.stats.add(Attempt(endpoint, status, time.perf_counter() - started))
                if status not in RETRY_STATUSES:
                    return status, json.loads(raw or b"{}"), answer_headers
                failure = f"{method} {path}: {status} {raw[:300]!r}"
                wait = answer_headers.get("Retry-After")
                if wait and wait.isdigit():
                    pause = max(pause, float(wait))
            if time.monotonic() + pause > deadline:
                raise RequestFailed(failure)
            time.sleep(pause)
            pause = min(pause * 2, 1.0)

    def expect(
        self, method: str, path: str, body: Any = None, *, endpoint: str, ok: tuple[int, ...]
    ) -> dict[str, Any]:
        status, answer, _ = self.request(method, path, body, endpoint=endpoint)
        if status not in ok:
            raise RequestFailed(f"{method} {path}: {status} {json.dumps(answer)[:400]}")
        return answer


# --------------------------------------------------------------------------- host loops


@dataclass
class CallRecord:
    """A protocol call as its host saw it: the receipt it got back."""

    tool_call_id: str
    tool: str
    success: bool
    state_revision: int
    result: dict[str, Any]
    result_message_id: str


@dataclass
class SessionRun:
    """One session's loop and everything the server acknowledged to it."""

    session_id: str
    key: str
    turns_done: int = 0
    acknowledged: dict[int, str] = field(default_factory=dict)  # index -> message id
    inputs: int = 0
    calls: list[CallRecord] = field(default_factory=list)
    host_calls: list[str] = field(default_factory=list)
    task_memory: str | None = None
    windows: list[str] = field(default_factory=list)
    folds: list[str] = field(default_factory=list)
    active_window: str = "main"
    last_host_exchange: tuple[int, int] | None = None
    # Each turn's body and the answer the host got for it.
    turns_sent: list[tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=list)
    replayed_writes: int = 0
    replayed_dispatches: int = 0
    error: str | None = None


LOOKUP_TOOL = {
    "name": "lookup",
    "description": "Look up the figures of a turn.",
    "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
}


def setup_agent_version(client: HttpClient, *, name: str = "load") -> str:
    """Create and publish an external-host unified@2 AgentVersion with the host tool
    `lookup` bound; return its id."""
    agent = client.expect("POST", "agents/", {"name": name}, endpoint="setup", ok=(201,))
    # Registering is idempotent: the same tool again answers 200.
    tool = client.expect("POST", "tools/", LOOKUP_TOOL, endpoint="setup", ok=(200, 201))
    draft = client.expect(
        "POST",
        f"agents/{agent['id']}/versions/",
        {
            "systemPrompt": "You are a load-test agent.\n{{context_protocol}}",
            "contextProtocolId": "unified",
            "contextProtocolVersion": 2,
            "options": {},
            "model": {"provider": "external", "name": "host-model", "maxInputTokens": 100000},
            "tools": [tool["id"]],
        },
        endpoint="setup",
        ok=(201,),
    )
    client.expect("POST", f"agent-versions/{draft['id']}/publish/", endpoint="setup", ok=(200,))
    return draft["id"]


def create_session(client: HttpClient, version_id: str) -> SessionRun:
    """Start a session. Not retried blindly: a lost answer would leave an unknown session."""
    status, body, _ = client.request(
        "POST", "sessions/", {"agentVersionId": version_id, "inputs": {}}, endpoint="sessions"
    )
    if status != 201:
        raise RequestFailed(f"POST sessions/: {status} {body}")
    return SessionRun(session_id=body["id"], key=body["sessionKey"])


def _write(client: HttpClient, run: SessionRun, path: str, body: dict, endpoint: str) -> dict:
    status, answer, headers = client.request(
        "POST", f"sessions/{run.session_id}/{path}", body, endpoint=endpoint
    )
    if status not in (200, 201):
        raise RequestFailed(f"POST {path} ({endpoint}): {status} {json.dumps(answer)[:400]}")
    if status == 200 and headers.get("Idempotent-Replayed") == "true":
        run.replayed_writes += 1
    message = answer.get("message", answer)
    run.acknowledged[message["index"]] = message["id"]
    return answer


def completion(turn: int, call_id: str, tool: str, arguments: dict[str, Any]) -> dict:
    """The model's answer as the OpenAI SDK returns it (`ChatCompletion.model_dump()`): one
    call, its arguments as JSON text, the reply's usage."""
    return {
        "id": f"chatcmpl-{call_id}",
        "object": "chat.completion",
        "created": 1767000000 + turn,
        "model": "host-model",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "logprobs": None,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "refusal": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": tool, "arguments": json.dumps(arguments)},
                        }
                    ],
                },
            }
        ],
        "usage": {
            "prompt_tokens": 2000 + 40 * turn,
            "completion_tokens": 30,
            "total_tokens": 2030 + 40 * turn,
            "prompt_tokens_details": {"cached_tokens": 1024},
        },
    }


def _turn(client: HttpClient, run: SessionRun, view: dict, answer: dict) -> dict:
    """Record the model's answer to `view` (retry-safe: the same body replays)."""
    sent = {"snapshotId": view["snapshotId"], "answer": answer}
    status, body, _ = client.request(
        "POST", f"sessions/{run.session_id}/turns/", sent, endpoint="turns"
    )
    if status not in (200, 201):
        raise RequestFailed(f"POST turns/: {status} {json.dumps(body)[:400]}")
    if body["replayed"]:
        run.replayed_writes += 1
    for message in body["messages"]:
        run.acknowledged[message["index"]] = message["id"]
    run.turns_sent.append((sent, body))
    return body


def _protocol_call(run: SessionRun, turn: int) -> tuple[str, dict[str, Any]]:
    """The model's protocol tool call for this turn: memory, a new window, or a fold."""
    kind = turn % 3
    if kind == 2 and run.last_host_exchange is None:
        kind = 0
    if kind == 0:
        memory = f"goal: finish the load run; progress: turn {turn} of session {run.session_id}"
        return "context_task_memory_set", {"purpose": "keep progress", "memory": memory}
    if kind == 1:
        return "context_window_open", {
            "purpose": "a sub-task",
            "windowId": f"task-{turn}",
            "goal": f"sub-task of turn {turn}",
            "input": f"look up the figures for turn {turn}, then report",
            "expectedWindowId": run.active_window,
        }
    assert run.last_host_exchange is not None
    first, last = run.last_host_exchange
    return "context_fold_create", {
        "purpose": "the lookup is done",
        "fromIndex": first,
        "throughIndex": last,
        "summary": f"looked up the figures (#{first}-#{last})",
        "expectedWindowId": run.active_window,
    }


def host_turn(client: HttpClient, run: SessionRun, turn: int) -> None:
    """One host turn: an input, then two model turns of two requests each (the view, the
    answer): a protocol call the service runs, a host call the host runs and answers. Each
    request may be repeated."""
    base = f"sessions/{run.session_id}/"
    _write(
        client,
        run,
        "inputs/",
        {"content": f"turn {turn}: next step please", "clientMessageId": f"input-{turn}"},
        "inputs",
    )
    run.inputs += 1
    view = client.expect(
        "POST", base + "projection/", {"provider": "openai-chat"}, endpoint="projection", ok=(201,)
    )
    run.active_window = view["windowId"]
    tool, arguments = _protocol_call(run, turn)
    call_id = f"call-{turn}-{tool.removeprefix('context_')}"
    answered = _turn(client, run, view, completion(turn, call_id, tool, arguments))
    receipt = answered["receipt"]
    if receipt["replayed"]:
        run.replayed_dispatches += 1
    result = receipt["result"]
    run.calls.append(
        CallRecord(
            receipt["toolCallId"],
            tool,
            bool(result.get("success")),
            receipt["stateRevision"],
            result,
            receipt["resultMessage"]["id"],
        )
    )
    if result.get("success"):
        if tool == "context_task_memory_set":
            run.task_memory = arguments["memory"]
        elif tool == "context_window_open":
            run.windows.append(arguments["windowId"])
        else:
            run.folds.append(result["foldId"])
    view = client.expect(
        "POST", base + "projection/", {"provider": "openai-chat"}, endpoint="projection", ok=(201,)
    )
    run.active_window = view["windowId"]
    answered = _turn(
        client, run, view, completion(turn, f"lookup-{turn}", "lookup", {"q": f"figures {turn}"})
    )
    host_call = answered["hostCall"]
    if host_call is None:
        raise RequestFailed(f"turn {turn}: the lookup call was not handed to the host: {answered}")
    host_id = host_call["toolCallId"]
    answer = _write(
        client,
        run,
        "messages/",
        {
            "role": "tool",
            "kind": "tool_result",
            "content": f"figures for turn {turn}: " + "4200 " * 40,
            "toolCallId": host_id,
            "clientMessageId": f"host-result-{turn}",
        },
        "messages (tool_result)",
    )
    run.host_calls.append(host_id)
    run.last_host_exchange = (answered["messages"][0]["index"], answer["index"])
    run.turns_done += 1


def host_loop(
    client: HttpClient,
    run: SessionRun,
    *,
    turns: int,
    deadline: float,
    stop: threading.Event | None = None,
) -> None:
    """Drive `run` for `turns` turns or until `deadline` (monotonic) or `stop`; never raises."""
    try:
        for turn in range(run.turns_done, turns):
            if time.monotonic() > deadline or (stop is not None and stop.is_set()):
                return
            host_turn(client, run, turn)
    except Exception as exc:  # reported by the audit: a loop that failed is a finding
        run.error = f"turn {run.turns_done}: {exc.__class__.__name__}: {exc}"
    finally:
        client.close()


def run_loops(
    base_url: str,
    runs: list[SessionRun],
    stats: Stats,
    *,
    turns: int,
    seconds: float,
    stop: threading.Event | None = None,
) -> float:
    """Run one thread per session at once; return the wall time in seconds."""
    deadline = time.monotonic() + seconds
    threads = [
        threading.Thread(
            target=host_loop,
            args=(HttpClient(base_url, run.key, stats), run),
            kwargs={"turns": turns, "deadline": deadline, "stop": stop},
            name=f"host-{n}",
        )
        for n, run in enumerate(runs)
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started


# --------------------------------------------------------------------------- the audit


@dataclass
class Audit:
    sessions: int = 0
    messages: int = 0
    calls: int = 0
    receipts: int = 0
    gaps: int = 0
    duplicates: int = 0
    lost: int = 0
    revision_mismatches: int = 0
    replays_checked: int = 0
    replay_mismatches: int = 0
    turn_replays_checked: int = 0
    turn_replay_mismatches: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.problems

    def problem(self, session_id: str, what: str) -> None:
        self.problems.append(f"session {session_id}: {what}")


def audit_sessions(runs: list[SessionRun]) -> Audit:
    """Check each session in the database against the protocol's invariants and its host.

    Needs Django set up on the server's database. Gaps: indices not exactly 1..N (N the
    session's counter). Duplicates: a call, result or receipt twice, or more inputs or host
    results than the host got acknowledged. Lost: an acknowledged message missing or
    changed, a call without its result, a protocol call without its receipt, a receipt the
    host saw that differs from the stored one, KV effects of successful calls missing.
    """
    from sessions_app.models import KVEntry, Message, Session, ToolReceipt

    audit = Audit()
    for run in runs:
        sid = run.session_id
        audit.sessions += 1
        session = Session.objects.get(pk=sid)
        rows = list(
            Message.objects.filter(session_id=sid)
            .order_by("index")
            .values_list("index", "id", "kind", "tool_call_id", "tool_name")
        )
        audit.messages += len(rows)
        indices = [r[0] for r in rows]
        expected = list(range(1, session.next_message_index))
        if indices != expected:
            missing = len(set(expected) - set(indices))
            audit.gaps += max(missing, 1)
            audit.problem(sid, f"indices are not 1..{len(expected)} ({missing} missing)")
        by_index = {r[0]: str(r[1]) for r in rows}
        for index, message_id in run.acknowledged.items():
            if by_index.get(index) != message_id:
                audit.lost += 1
                audit.problem(sid, f"acknowledged message #{index} {message_id} is not stored")
        kinds = Counter((r[2], r[3]) for r in rows if r[2] in ("tool_call", "tool_result"))
        for (kind, call_id), count in kinds.items():
            if count > 1:
                audit.duplicates += count - 1
                audit.problem(sid, f"{kind} {call_id} written {count} times")
        calls = {r[3]: r[4] for r in rows if r[2] == "tool_call"}
        audit.calls += len(calls)
        for call_id in calls:
            if ("tool_result", call_id) not in kinds:
                audit.lost += 1
                audit.problem(sid, f"call {call_id} has no result")
        receipts = list(
            ToolReceipt.objects.filter(session_id=sid).values_list(
                "tool_call_id", "tool_name", "success", "state_revision", "result"
            )
        )
        audit.receipts += len(receipts)
        per_call = Counter(r[0] for r in receipts)
        for call_id, count in per_call.items():
            if count > 1:
                audit.duplicates += count - 1
                audit.problem(sid, f"{count} receipts for {call_id}")
        for call_id, tool in calls.items():
            if tool.startswith("context_") and call_id not in per_call:
                audit.lost += 1
                audit.problem(sid, f"protocol call {call_id} has no receipt")
        stored = {r[0]: r for r in receipts}
        for call in run.calls:
            row = stored.get(call.tool_call_id)
            if row is None or (row[2], row[3], row[4]) != (
                call.success,
                call.state_revision,
                call.result,
            ):
                audit.lost += 1
                audit.problem(sid, f"the receipt of {call.tool_call_id} differs from the host's")
        inputs = sum(1 for r in rows if r[2] == "input")
        host_results = sum(1 for r in rows if r[2] == "tool_result" and r[3] in run.host_calls)
        for what, stored_count, acked in (
            ("inputs", inputs, run.inputs),
            ("host results", host_results, len(run.host_calls)),
        ):
            if stored_count > acked:
                audit.duplicates += stored_count - acked
                audit.problem(sid, f"{stored_count} {what} stored, {acked} acknowledged")
        # Every committed KV transaction bumps the revision by one. These sessions have one
        # at creation (the initial KV) and one per successful mutating receipt.
        mutations = 1 + sum(1 for r in receipts if r[2] and r[1] in MUTATING)
        host_mutations = 1 + sum(1 for c in run.calls if c.success and c.tool in MUTATING)
        kv = dict(KVEntry.objects.filter(session_id=sid).values_list("key", "value"))
        top = KVEntry.objects.filter(session_id=sid).order_by("-revision").first()
        if not (
            session.state_revision == mutations == host_mutations
            and (top.revision if top else 0) == session.state_revision
        ):
            audit.revision_mismatches += 1
            audit.problem(
                sid,
                f"revision {session.state_revision}, KV transactions by the receipts "
                f"{mutations}, by the host's receipts {host_mutations}, newest KV revision "
                f"{top.revision if top else 0}",
            )
        effects = [("taskMemory", run.task_memory)] if run.task_memory is not None else []
        effects += [(f"window/{w}", ...) for w in run.windows]
        effects += [(f"fold/{f}", ...) for f in run.folds]
        for key, value in effects:
            if key not in kv or (value is not ... and kv[key] != value):
                audit.lost += 1
                audit.problem(sid, f"KV {key} lost")
    return audit


def _turn_seen(body: dict[str, Any]) -> tuple[Any, ...]:
    receipt = body["receipt"] or {}
    return (
        body["messages"],
        body["hostCall"],
        body["runStatus"],
        receipt.get("result"),
        receipt.get("stateRevision"),
    )


def verify_replays(base_url: str, runs: list[SessionRun], stats: Stats, audit: Audit) -> None:
    """Dispatch every call again, and send every turn again: each must replay what its host
    first got (the receipt; the turn's messages, host call and result)."""
    for run in runs:
        client = HttpClient(base_url, run.key, stats)
        try:
            for call in run.calls:
                receipt = client.expect(
                    "POST",
                    f"sessions/{run.session_id}/tool-calls/{call.tool_call_id}/dispatch/",
                    endpoint="dispatch (replay)",
                    ok=(200,),
                )
                audit.replays_checked += 1
                if not receipt["replayed"] or (
                    receipt["stateRevision"],
                    receipt["result"],
                    receipt["resultMessage"]["id"],
                ) != (call.state_revision, call.result, call.result_message_id):
                    audit.replay_mismatches += 1
                    audit.problem(run.session_id, f"{call.tool_call_id} did not replay")
            for sent, seen in run.turns_sent:
                again = client.expect(
                    "POST",
                    f"sessions/{run.session_id}/turns/",
                    sent,
                    endpoint="turns (replay)",
                    ok=(200,),
                )
                audit.turn_replays_checked += 1
                if not again["replayed"] or _turn_seen(again) != _turn_seen(seen):
                    audit.turn_replay_mismatches += 1
                    audit.problem(run.session_id, f"the turn of {sent['snapshotId']} differs")
        finally:
            client.close()
