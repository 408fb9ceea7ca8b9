"""Where a gateway request's time goes: py-spy on one uvicorn worker under the bench's requests.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/contextproto_bench \\
        .venv/bin/python bench/gateway_profile.py [--path 1k|100k-view] [--seconds 30]

Starts the gateway section's fake model and one gateway worker (uvicorn, tracing off), a
session like the section's (`1k`: bench_data's 1k-message session; `100k-view`: a whole
100k-token conversation), then sends incremental requests one after another while `py-spy
record` samples the worker (`--rate` per second, idle threads left out), and prints the
functions that held the most samples: inclusive (the function and what it called) and self.
Needs py-spy (`pip install py-spy`; not a dependency of the project or of `make bench`). The
figures of BENCHMARKS.md's "Where the time goes" came from this script.
"""

from __future__ import annotations

import argparse
import collections
import secrets
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchlib
from gateway_overhead import user
from gateway_sessions import GatewaySession, conversation, view_name
from gateway_setup import (
    APPLICATION,
    FIXED_DELAY,
    GATEWAY_PATH,
    SIZES,
    VAR,
    Client,
    GatewaySpec,
    fake_upstream,
    gateway_servers,
    otlp_sink,
    servers_ready,
)

ROOTS = ("contextproto", "sessions_app", "agents", "django", "psycopg", "asgiref", "uvicorn")


def _session(path: str, fake_base: str, server: Any, key: str) -> str:
    """A session for the profiled path (module docstring)."""
    import bench_data
    from django.utils import timezone

    from agents.models import AgentVersion
    from agents.selectors import gateway_model_name
    from sessions_app.models import Run
    from sessions_app.services.runs import runs_driven_here

    config = {"baseUrl": fake_base + "/v1"}
    if path == "1k":
        version = bench_data.bench_version(APPLICATION, "overhead", provider="openai")
        AgentVersion.objects.filter(pk=version.pk).update(model_config=config)
        with runs_driven_here():
            built = bench_data.build_session(
                version, SIZES[0], nonce=f"profile-{secrets.token_hex(4)}", analyze=False
            )
        Run.objects.filter(session_id=built.session_id, status=Run.Status.QUEUED).update(
            status=Run.Status.COMPLETED, finished_at=timezone.now()
        )
        return str(built.session_id)
    version = bench_data.bench_version(APPLICATION, "views", provider="openai")
    AgentVersion.objects.filter(pk=version.pk).update(
        model_config=config, max_input_tokens=1_000_000
    )
    version.refresh_from_db()
    client = Client(server.base, {"Authorization": f"Bearer {key}"})
    messages = conversation(100_000)
    status, headers, raw = client.request(
        "POST",
        GATEWAY_PATH,
        {"model": gateway_model_name(version), "messages": [*messages, user(0, "profile")]},
        timeout=120,
    )
    if status != 200:
        raise RuntimeError(f"the {view_name(100_000)} session did not start: {raw[:300]!r}")
    return headers["x-contextproto-session"]


def _frame(line: str) -> str:
    """`function (path/to/module.py:line)` as module:function, the path from its package."""
    name, _, where = line.partition(" (")
    where = where.rstrip(")").rsplit(":", 1)[0]
    parts = Path(where).with_suffix("").parts
    for n, part in enumerate(parts):
        if part in ROOTS:
            return ".".join(parts[n:]) + ":" + name
    return Path(where).stem + ":" + name


def summarize(raw: str, top: int, rate: int, requests: int) -> str:
    """Per function, the milliseconds per request that py-spy's raw (collapsed) stacks put
    in it and in what it called (inclusive) and in it alone (self), for the two threads a
    request runs on: the event loop, and the thread that runs its database work
    (asgiref's SyncToAsync, thread-sensitive). Samples of waiting threads (the pool's
    workers, an idle executor) are left out."""
    per = 1000 / rate / max(requests, 1)
    inclusive: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    own: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [_frame(f) for f in stack.split(";") if f and not f.startswith("process ")]
        frames = [f for f in frames if not f.startswith("thread ")]
        if any("SyncToAsync.thread_handler" in f for f in frames):
            where = "request's database thread"
        elif any("BaseEventLoop.run_forever" in f for f in frames):
            where = "event loop"
        else:
            continue
        if frames[-1].startswith(("selectors:", "threading:")):
            continue  # waiting for work, not doing it
        for frame in set(frames):
            inclusive[where][frame] += int(count)
        own[where][frames[-1]] += int(count)
    lines = []
    for where in ("request's database thread", "event loop"):
        total = sum(own[where].values())
        lines.append(f"\n{where}: {total * per:.1f} ms per request")
        for title, counter in (("inclusive", inclusive[where]), ("self", own[where])):
            lines.append(f"  {title}:")
            for frame, count in counter.most_common(top):
                lines.append(f"    {count * per:6.2f} ms  {frame}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", choices=("1k", "100k-view"), default="1k")
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--rate", type=int, default=250)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--gil", action="store_true", help="only samples holding the GIL")
    parser.add_argument("--tracing", action="store_true", help="tracing on, to bench/otlp_sink.py")
    args = parser.parse_args()
    benchlib.refuse_unless_postgres()
    benchlib.django_setup()
    from agents.models import Application
    from agents.services import application_key_issue

    VAR.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(16)
    with ExitStack() as stack:
        fake = stack.enter_context(fake_upstream(FIXED_DELAY))
        sink = stack.enter_context(otlp_sink()) if args.tracing else None
        spec = GatewaySpec("profile", otlp_endpoint=sink.base if sink else None)
        servers = stack.enter_context(gateway_servers(token, [spec]))
        servers_ready(servers, [spec])
        server = servers["profile"]
        application, _ = Application.objects.get_or_create(name=APPLICATION)
        key = application_key_issue(application=application)
        session = GatewaySession(_session(args.path, fake.base, server, key))
        client = Client(
            server.base,
            {"Authorization": f"Bearer {key}", "X-Contextproto-Session": str(session.session_id)},
        )
        for n in range(5):  # warm up
            client.request("POST", GATEWAY_PATH, {"model": "x", "messages": [user(n, "warm")]})
        out = VAR / f"profile-{args.path}{'-traced' if args.tracing else ''}.txt"
        spy = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "py-spy"),
                "record",
                "--pid",
                str(server.process.pid),
                "--rate",
                str(args.rate),
                "--duration",
                str(args.seconds),
                "--format",
                "raw",
                "--output",
                str(out),
                *(["--gil"] if args.gil else []),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        done = threading.Event()
        latencies: list[float] = []

        def load() -> None:
            n = 100
            while not done.is_set():
                n += 1
                body = {"model": "x", "messages": [user(n, "profiled")]}
                status, _headers, _raw = client.request("POST", GATEWAY_PATH, body)
                if status == 200:
                    latencies.append((client.elapsed - FIXED_DELAY) * 1000)

        thread = threading.Thread(target=load, daemon=True)
        time.sleep(0.5)  # py-spy attaches
        thread.start()
        _out, err = spy.communicate(timeout=args.seconds + 60)
        done.set()
        thread.join(30)
        if spy.returncode != 0:
            raise RuntimeError(f"py-spy failed: {err.decode(errors='replace')[-2000:]}")
    print(
        f"{args.path}: {len(latencies)} requests, overhead p50 {benchlib.median(latencies):.1f} "
        f"ms, p95 {benchlib.p95(latencies):.1f} ms (profiled, {args.rate} samples/s)"
    )
    print(summarize(out.read_text(), args.top, args.rate, len(latencies)))


if __name__ == "__main__":
    main()
