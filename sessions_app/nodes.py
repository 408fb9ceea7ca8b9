"""Several nodes (contract §3): what each process carries, a Redis registry of live ones, skew.

Every API process and Celery worker writes one Redis key, `contextproto:node:<role>:<host>:
<pid>`, holding its role, host, pid, code version, catalog fingerprint and protocol
versions. The key expires after NODE_TTL_SECONDS and a daemon thread rewrites it every
NODE_REFRESH_SECONDS, so a dead process leaves the registry within one TTL. API processes
under uvicorn start that thread when the ASGI lifespan starts and delete their key when it
ends (contextproto.serving.with_node_registry: uvicorn's worker processes never run atexit
handlers); under other servers they start it on their first request. Workers start it on
`worker_ready` and delete their key on `worker_shutdown`. Without REDIS_URL everything runs
in one process: registering is a no-op and the registry is that process alone.

The worker side of the contract is `require_protocol`: a process asked to run a job for a
protocol version it does not carry refuses with `protocol_unknown_on_worker`, and the job
fails at once instead of running on a catalog that differs from the one that planned it.

What a process carries is the engine's catalog minus NODE_HIDE_PROTOCOLS. The filter lives
here, in the Django layer, because the engine never reads settings.
"""

from __future__ import annotations

import atexit
import functools
import importlib.metadata
import json
import logging
import os
import socket
import subprocess
import threading
from collections.abc import Iterable
from typing import Any

import redis
from celery.signals import worker_ready, worker_shutdown
from django.conf import settings
from django.core.signals import request_started
from django.utils import timezone

from contextproto.errors import PROTOCOL_UNKNOWN_ON_WORKER, ApplicationError
from contextproto.protocol import catalog

logger = logging.getLogger(__name__)

KEY_PREFIX = "contextproto:node:"
API = "api"
WORKER = "worker"


# ---------------------------------------------------------------- what this process carries


@functools.cache
def _described_version() -> str:
    # Once per process: a subprocess per health request would be wasteful, and the code
    # of a running process does not change under it.
    try:
        out = subprocess.run(
            ["git", "describe", "--tags", "--always", "--dirty"],
            cwd=settings.BASE_DIR,
            capture_output=True,
            text=True,
            timeout=3,
            check=True,
        )
        if out.stdout.strip():
            return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass  # no git, or not a checkout (an installed image): the package version then
    try:
        return importlib.metadata.version("contextproto")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def code_version() -> str:
    """Return this process's build: NODE_CODE_VERSION, else `git describe`, else the package's."""
    return settings.NODE_CODE_VERSION or _described_version()


def carried_versions() -> list[catalog.ProtocolVersion]:
    """Return the catalog entries this process carries (the catalog minus the hidden ones)."""
    hidden = set(settings.NODE_HIDE_PROTOCOLS)
    return [v for v in catalog.all_versions() if v.key not in hidden]


@functools.cache
def _fingerprint_of(keys: tuple[str, ...]) -> str:
    by_key = {v.key: v for v in catalog.all_versions()}
    return catalog.fingerprint_of(by_key[key] for key in keys)


def local_fingerprint() -> str:
    """Return the fingerprint of what this process carries (the catalog's if nothing is hidden)."""
    return _fingerprint_of(tuple(v.key for v in carried_versions()))


def require_protocol(protocol_id: str, version: int) -> catalog.ProtocolVersion:
    """Return the entry of `protocol_id@version` if this process carries it.

    Raises ApplicationError `protocol_unknown_on_worker` naming the version, this process's
    fingerprint and what it carries. Callers fail their job with it and do not retry: the
    failure is how the skew shows (contract §3), where a retry might hide it by luck.
    """
    wanted = f"{protocol_id}@{version}"
    for entry in carried_versions():
        if entry.key == wanted:
            return entry
    carried = [v.key for v in carried_versions()]
    fingerprint = local_fingerprint()
    raise ApplicationError(
        PROTOCOL_UNKNOWN_ON_WORKER,
        f"{wanted} is not in this worker's catalog (fingerprint {fingerprint[:12]}…, "
        f"carries {', '.join(carried) or 'nothing'}; node {node_name()})",
        {"protocol": wanted, "catalogFingerprint": fingerprint, "protocols": carried},
    )


def node_name() -> str:
    """Return `host:pid`, the name maintenance attempt logs give a worker."""
    return f"{socket.gethostname()}:{os.getpid()}"


def node_record(role: str) -> dict[str, Any]:
    """Return what this process reports about itself (the registry's value, camelCase)."""
    return {
        "role": role,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "codeVersion": code_version(),
        "catalogFingerprint": local_fingerprint(),
        "protocols": [v.key for v in carried_versions()],
        "seenAt": timezone.now().isoformat(),
    }


# ---------------------------------------------------------------- the Redis registry

_clients: dict[str, redis.Redis] = {}


def _client() -> redis.Redis | None:
    url = settings.REDIS_URL
    if not url:
        return None
    if url not in _clients:
        # Short timeouts: health and the heartbeat must answer even when Redis does not.
        _clients[url] = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    return _clients[url]


def _key(role: str) -> str:
    return f"{KEY_PREFIX}{role}:{socket.gethostname()}:{os.getpid()}"


def node_register(role: str) -> bool:
    """Write this process's record with its expiry; False without REDIS_URL (a no-op).

    Raises redis errors; the heartbeat logs them and tries again at its next beat.
    """
    client = _client()
    if client is None:
        return False
    client.set(_key(role), json.dumps(node_record(role)), ex=settings.NODE_TTL_SECONDS)
    return True


def node_unregister(role: str) -> None:
    """Remove this process's record at once (a clean shutdown), instead of waiting a TTL."""
    client = _client()
    if client is not None:
        client.delete(_key(role))


def live_nodes() -> list[dict[str, Any]]:
    """Return the records of the live nodes, ordered by role, host and pid.

    Without REDIS_URL, this process alone (with the role NODE_ROLE). Raises redis errors.
    """
    client = _client()
    if client is None:
        return [node_record(settings.NODE_ROLE)]
    keys = list(client.scan_iter(match=f"{KEY_PREFIX}*", count=500))
    records = []
    for raw in client.mget(keys) if keys else []:
        if raw is None:
            continue  # expired between SCAN and MGET
        try:
            records.append(json.loads(raw))
        except ValueError:
            logger.warning("ignoring an unreadable node record: %r", raw[:200])
    return sorted(records, key=lambda r: (str(r.get("role")), str(r.get("host")), r.get("pid")))


def skew_of(nodes: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Group `nodes` by catalog fingerprint; `skew` when they do not all carry the same one."""
    groups: dict[str, dict[str, Any]] = {}
    code_versions = set()
    for node in nodes:
        fingerprint = str(node.get("catalogFingerprint"))
        group = groups.setdefault(
            fingerprint,
            {"catalogFingerprint": fingerprint, "protocols": node.get("protocols"), "nodes": []},
        )
        group["nodes"].append(f"{node.get('role')} {node.get('host')}:{node.get('pid')}")
        code_versions.add(str(node.get("codeVersion")))
    return {
        "skew": len(groups) > 1,
        "codeSkew": len(code_versions) > 1,
        "fingerprints": sorted(groups.values(), key=lambda g: g["catalogFingerprint"]),
    }


def registry_report() -> dict[str, Any]:
    """Return the live nodes and their skew, for `health/` and the admin.

    Never raises: with Redis unreachable it reports this process alone and the error under
    `registry`. This process is always listed, even before its heartbeat first wrote.
    """
    role = settings.NODE_ROLE
    registry = "redis" if settings.REDIS_URL else "off"
    try:
        nodes = live_nodes()
    except redis.RedisError as exc:
        registry = f"error: {exc.__class__.__name__}"
        nodes = []
    me = (socket.gethostname(), os.getpid())
    if not any((n.get("host"), n.get("pid")) == me for n in nodes):
        nodes.append(node_record(role))
    return {"registry": registry, "nodes": nodes, **skew_of(nodes)}


# ---------------------------------------------------------------- the heartbeat


class _Heartbeat:
    """Rewrite this process's record every NODE_REFRESH_SECONDS from a daemon thread."""

    def __init__(self, role: str) -> None:
        self.role = role
        self.stopped = threading.Event()
        self.failing = False
        self.thread = threading.Thread(target=self._run, name=f"node-heartbeat-{role}", daemon=True)

    def _beat(self) -> None:
        try:
            node_register(self.role)
        except redis.RedisError as exc:
            if not self.failing:  # log the transition, not every beat of an outage
                logger.warning("node registry: cannot register in Redis: %s", exc)
            self.failing = True
        else:
            self.failing = False

    def _run(self) -> None:
        while True:
            self._beat()
            if self.stopped.wait(settings.NODE_REFRESH_SECONDS):
                return

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)
        try:
            node_unregister(self.role)
        except redis.RedisError:
            pass  # the key expires on its own


_heartbeat: _Heartbeat | None = None
_heartbeat_lock = threading.Lock()


def heartbeat_start(role: str) -> bool:
    """Start this process's heartbeat once; False (nothing started) without REDIS_URL."""
    global _heartbeat
    if not settings.REDIS_URL:
        return False
    with _heartbeat_lock:
        if _heartbeat is None:
            _heartbeat = _Heartbeat(role)
            _heartbeat.thread.start()
            # A process that exits cleanly (a server restart, a rolling deploy) leaves the
            # registry at once instead of showing as live for one more TTL.
            atexit.register(heartbeat_stop)
    return True


def heartbeat_stop() -> None:
    """Stop the heartbeat and remove this process's record."""
    global _heartbeat
    with _heartbeat_lock:
        beat, _heartbeat = _heartbeat, None
    if beat is not None:
        beat.stop()


def _start_api_heartbeat(**_: object) -> None:
    # Lazily, on the first request: importing Django (manage.py commands, the beat process)
    # must not register a node; a process serving requests is an API node.
    if _heartbeat is None:
        heartbeat_start(settings.NODE_ROLE)


def _start_worker_heartbeat(**_: object) -> None:
    heartbeat_start(WORKER)


def _stop_worker_heartbeat(**_: object) -> None:
    heartbeat_stop()


request_started.connect(_start_api_heartbeat, dispatch_uid="sessions_app.nodes.api")
worker_ready.connect(_start_worker_heartbeat, dispatch_uid="sessions_app.nodes.worker")
worker_shutdown.connect(_stop_worker_heartbeat, dispatch_uid="sessions_app.nodes.worker_stop")
