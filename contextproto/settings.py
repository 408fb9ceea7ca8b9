"""Settings, read from the environment once, failing loudly on bad values.

DATABASE_URL absent → an SQLite file under var/ so a checkout just works.
REDIS_URL absent → local-memory cache and Celery tasks run in-process (eager).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from exc


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in ("1", "true", "yes", "on"):
        return True
    if raw.lower() in ("0", "false", "no", "off"):
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (true/false), got {raw!r}")


DEBUG = env_bool("DEBUG", False)
DEV_SECRET_KEY = "dev-only-insecure-secret-key-change-me"
SECRET_KEY = env_str("SECRET_KEY") or DEV_SECRET_KEY
# The dev key is public. Management commands (create_application, migrate, ...) and the dev
# server still run on it, but `check --deploy` fails and the production entry points
# (contextproto.asgi / contextproto.wsgi under a real server) refuse to serve with it while
# DEBUG is off, unless ALLOW_DEV_SECRET_KEY=true (see contextproto.checks).
ALLOW_DEV_SECRET_KEY = env_bool("ALLOW_DEV_SECRET_KEY", False)
ALLOWED_HOSTS = [
    h for h in env_str("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",") if h
]

# Served over TLS (HTTPS=true): redirect plain HTTP, send HSTS, keep cookies off plain HTTP.
# Behind a proxy that terminates TLS also set TRUST_X_FORWARDED_PROTO=true, or every request
# looks like plain HTTP and the redirect loops.
HTTPS = env_bool("HTTPS", False)
SECURE_SSL_REDIRECT = HTTPS
SESSION_COOKIE_SECURE = HTTPS
CSRF_COOKIE_SECURE = HTTPS
SECURE_HSTS_SECONDS = env_int("HSTS_SECONDS", 365 * 24 * 3600) if HTTPS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = HTTPS and env_bool("HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = HTTPS and env_bool("HSTS_PRELOAD", True)
if env_bool("TRUST_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

INSTALLED_APPS = [
    "contextproto.apps.ConsoleAdminConfig",  # django.contrib.admin with our site
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "agents",
    "sessions_app",
    "labs",  # the research harness; after sessions_app, whose admin it extends
]

MIDDLEWARE = [
    "contextproto.middleware.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Static files (the admin's CSS and JS) from every server, runserver with DEBUG off and
    # uvicorn included; without it the admin renders unstyled.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "contextproto.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "contextproto.wsgi.application"
ASGI_APPLICATION = "contextproto.asgi.application"

VAR_DIR = Path(env_str("VAR_DIR", str(BASE_DIR / "var")))
DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'contextproto.sqlite3'}")
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=0)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    # WAL + a busy timeout let the runtime's worker thread and the admin share the file.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 20, "init_command": "PRAGMA journal_mode=WAL;", "transaction_mode": "IMMEDIATE"}
    )
# A process-wide pool of PostgreSQL connections (psycopg_pool): a request takes a connection
# instead of opening one, which under ASGI cost more than the request's own statements.
DATABASE_POOL_SIZE = env_int("DATABASE_POOL_SIZE", 0)
if DATABASE_POOL_SIZE and DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": DATABASE_POOL_SIZE,
        "timeout": 10,
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_str("REDIS_URL")
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

AUTH_PASSWORD_VALIDATORS: list[dict[str, str]] = []
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
# Timestamps with seconds on every operator page (contextproto/formats/en/formats.py).
FORMAT_MODULE_PATH = ["contextproto.formats"]
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
# Serve straight from the apps' static folders too, so a checkout works before (or without)
# collectstatic; `make serve` collects them into STATIC_ROOT, which WhiteNoise serves first.
WHITENOISE_USE_FINDERS = True
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns about a missing root
# Hashed, compressed names (cached for a year) once collectstatic wrote the manifest: make
# demo, make serve and the production command collect first. Tests render pages without
# collecting, so they keep plain names whatever a developer's var/static holds.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if "PYTEST_VERSION" in os.environ
        else "contextproto.staticfiles.ManifestStaticFilesStorage"
    },
}

# Bodies above this are refused with 413 (see contextproto.api_errors; under uvicorn, from
# the Content-Length header before the body is read: contextproto.serving).
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("MAX_BODY_BYTES", 2 * 1024 * 1024)
# Under uvicorn (contextproto.serving): a request's headers and its body must each arrive
# within these many seconds, or the server answers 408 and closes the connection, so slow
# clients cannot hold connections open. 0 turns a bound off.
HEADER_READ_TIMEOUT_SECONDS = env_int("HEADER_READ_TIMEOUT_SECONDS", 10)
BODY_READ_TIMEOUT_SECONDS = env_int("BODY_READ_TIMEOUT_SECONDS", 30)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["sessions_app.auth.BearerKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": [],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["contextproto.parsers.StoredJSONParser"],
    "EXCEPTION_HANDLER": "contextproto.api_errors.api_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "contextproto.api_schema.AutoSchema",
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_THROTTLE_CLASSES": [
        "contextproto.throttles.ApplicationRateThrottle",
        "contextproto.throttles.SessionRateThrottle",
    ],
}


# Requests per second ("N/s", "N/m", ...; "off" for none) per Application and per session
# key; over the rate: 429 with Retry-After (contextproto.throttles).
def env_rate(name: str, default: str) -> str | None:
    raw = env_str(name, default).strip()
    if raw.lower() == "off":
        return None
    count, _, period = raw.partition("/")
    if not (count.isdigit() and int(count) > 0 and period[:1] in ("s", "m", "h", "d")):
        raise ImproperlyConfigured(f"{name} must look like 50/s, 3000/m or off, got {raw!r}")
    return raw


# /metrics answers only this bearer token; unset, the endpoint does not exist (404).
METRICS_TOKEN = env_str("METRICS_TOKEN")
# Token and cost counters are labelled by agent version; a process labels at most this many
# versions and counts the rest under "other", so the series stay bounded.
METRICS_AGENT_VERSION_LABELS = env_int("METRICS_AGENT_VERSION_LABELS", 200)


def otel_traces_endpoint() -> str:
    """The OTLP/HTTP endpoint traces go to, by the standard variables; "" when off.

    The SDK reads the rest of OTEL_* itself (headers, timeout, compression, service name,
    sampler, OTEL_BSP_* queue sizes). Only http/protobuf is shipped: a gRPC endpoint would
    silently receive nothing, so it is refused here.
    """
    if env_bool("OTEL_SDK_DISABLED", False) or env_str("OTEL_TRACES_EXPORTER") == "none":
        return ""
    for name in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        protocol = env_str(name)
        if protocol:
            if protocol != "http/protobuf":
                raise ImproperlyConfigured(
                    f"{name}={protocol!r}: this service exports traces over OTLP/HTTP only "
                    "(http/protobuf); point the endpoint at the collector's HTTP port (4318)."
                )
            break
    return env_str("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env_str("OTEL_EXPORTER_OTLP_ENDPOINT")


# Traces (contract §22): OpenTelemetry GenAI spans over OTLP/HTTP, off unless an endpoint is
# set (contextproto/telemetry/). Message contents only with the opt-in variable.
OTEL_TRACES_ENDPOINT = otel_traces_endpoint()
OTEL_CAPTURE_MESSAGE_CONTENT = env_bool("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", False)

API_THROTTLE_RATES = {
    "application": env_rate("THROTTLE_APPLICATION_RATE", "1000/s"),
    "session": env_rate("THROTTLE_SESSION_RATE", "300/s"),
}
SPECTACULAR_SETTINGS = {
    "TITLE": "contextproto API",
    "DESCRIPTION": "Context protocol service: agents, sessions, projections, protocol tools.",
    "VERSION": "1",
    # Enum values are their own description; no "* `x` - x" lists in every field.
    "ENUM_GENERATE_CHOICE_DESCRIPTION": False,
    # One named enum per vocabulary (generated clients get one type each, not one per field).
    "ENUM_NAME_OVERRIDES": {
        "ErrorCode": "contextproto.api_schema.ERROR_CODES",
        "ToolResultCode": "contextproto.api_schema.TOOL_RESULT_CODES",
        "MessageRole": "contextproto.api_schema.MESSAGE_ROLES",
        "ViewRole": "contextproto.api_schema.VIEW_ROLES",
        "MessageKind": "contextproto.api_schema.MESSAGE_KINDS",
        "WritableMessageKind": "contextproto.api_schema.WRITABLE_KINDS",
        "ViewMessageKind": "contextproto.api_schema.VIEW_KINDS",
        "DerivedType": "contextproto.api_schema.DERIVED_TYPES",
        "WireFormat": "contextproto.api_schema.WIRE_FORMATS",
        "ModelProvider": "agents.apis_shapes.MODEL_PROVIDERS",
        # The name generated clients have known since before publish answered its own shape
        # (AgentVersionPublished repeats AgentVersion's status).
        "AgentVersionStatusEnum": "agents.apis_shapes.AGENT_VERSION_STATUSES",
        "RunStatus": "contextproto.api_schema.RUN_STATUSES",
    },
    "SERVE_INCLUDE_SCHEMA": False,
    # drf-spectacular's default hook, then the error-code table at the end of the description
    # (for the served schema and `manage.py spectacular` alike).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "contextproto.api_schema.error_codes_hook",
        "contextproto.api_schema.open_components_hook",
    ],
}

# Protocol host settings (contract §3, §4.4).
KV_MAX_KEYS_PER_SESSION = env_int("KV_MAX_KEYS_PER_SESSION", 4096)
KV_MAX_VALUE_BYTES = env_int("KV_MAX_VALUE_BYTES", 64 * 1024)
TOOL_RESULT_PREVIEW_CHARS = env_int("TOOL_RESULT_PREVIEW_CHARS", 16000)

# Celery: late acks and a re-queue on worker loss, so a killed worker's task is delivered
# again (docs/decisions.md, "Celery: late acks, a task re-queued when its worker is lost").
CELERY_BROKER_URL = REDIS_URL or "memory://localhost/"
CELERY_RESULT_BACKEND = None
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 600)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 540)
# The visibility timeout must exceed the task time limit, or Redis re-delivers live tasks.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600)}
CELERY_TASK_DEFAULT_QUEUE = "contextproto"
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# The beat schedule file lives under VAR_DIR (which exists: STATIC_ROOT is made under it
# above), never in the directory the worker happens to start in.
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# Cold archive (contract §2.3): what the periodic sweep moves into compressed chunks.
ARCHIVE_OLDER_THAN_SECONDS = env_int("ARCHIVE_OLDER_THAN_SECONDS", 7 * 24 * 3600)
ARCHIVE_KEEP_LAST = env_int("ARCHIVE_KEEP_LAST", 2000)
ARCHIVE_CHUNK_SIZE = env_int("ARCHIVE_CHUNK_SIZE", 500)
ARCHIVE_SESSIONS_PER_SWEEP = env_int("ARCHIVE_SESSIONS_PER_SWEEP", 100)
CELERY_BEAT_SCHEDULE = {
    "archive-sweep": {
        "task": "sessions_app.tasks_archive.archive_sweep",
        "schedule": float(env_int("ARCHIVE_SWEEP_SECONDS", 3600)),
    },
    "maintenance-sweep": {
        "task": "sessions_app.tasks.maintenance_sweep",
        "schedule": float(env_int("MAINTENANCE_SWEEP_SECONDS", 60)),
    },
    "run-sweep": {
        "task": "sessions_app.tasks.run_sweep",
        "schedule": float(env_int("RUN_SWEEP_SECONDS", 60)),
    },
    "snapshot-body-sweep": {
        "task": "sessions_app.tasks.snapshot_body_sweep",
        "schedule": float(env_int("SNAPSHOT_BODY_SWEEP_SECONDS", 300)),
    },
}

# Snapshot bodies (issues 33 and 42, contract §4.6a; sessions_app/store/body_writer.py): a
# turn writes its snapshot's row and its body (a delta or a keyframe) in its own transactions.
#
# A keyframe (a whole body) at least every this many snapshots of a session, so reading one
# decodes at most this many minus one deltas. 1: every body whole.
SNAPSHOT_KEYFRAME_INTERVAL = env_int("SNAPSHOT_KEYFRAME_INTERVAL", 16)
if SNAPSHOT_KEYFRAME_INTERVAL < 1:
    raise ImproperlyConfigured("SNAPSHOT_KEYFRAME_INTERVAL must be at least 1")
# A body still not written this many seconds after its row is taken as lost (its process
# died between the turn's two commits) and the sweeper writes it rebuilt. Readers never wait
# for a body: they rebuild a missing one at once. Longer than any model call, since a turn
# that calls a model stores its body after the call.
SNAPSHOT_BODY_GRACE_SECONDS = env_int("SNAPSHOT_BODY_GRACE_SECONDS", 900)
# Bodies older than this many days are dropped by the sweeper and rebuilt on read from the
# state at R and the log through U (unset or empty: kept forever).
SNAPSHOT_BODY_RETENTION_DAYS: int | None = (
    env_int("SNAPSHOT_BODY_RETENTION_DAYS", 0)
    if os.environ.get("SNAPSHOT_BODY_RETENTION_DAYS")
    else None
)
if SNAPSHOT_BODY_RETENTION_DAYS is not None and SNAPSHOT_BODY_RETENTION_DAYS < 1:
    raise ImproperlyConfigured("SNAPSHOT_BODY_RETENTION_DAYS must be at least 1 (or unset)")

NODE_ROLE = env_str("NODE_ROLE", "api")
# Several nodes (contract §3, sessions_app.nodes): each process registers in Redis for
# NODE_TTL_SECONDS, refreshed every NODE_REFRESH_SECONDS. NODE_CODE_VERSION names the build
# (unset: `git describe`, else the package version).
NODE_TTL_SECONDS = env_int("NODE_TTL_SECONDS", 30)
NODE_REFRESH_SECONDS = env_int("NODE_REFRESH_SECONDS", 10)
if not 0 < NODE_REFRESH_SECONDS < NODE_TTL_SECONDS:
    raise ImproperlyConfigured("NODE_REFRESH_SECONDS must be above 0 and below NODE_TTL_SECONDS")
NODE_CODE_VERSION = env_str("NODE_CODE_VERSION")
# Protocol versions this process does not carry ("unified@3,prefix@2"): it reports a smaller
# catalog and, as a worker, fails their jobs with protocol_unknown_on_worker. For skew tests,
# and to keep a version (say the experimental unified@3) off a pool of workers.
NODE_HIDE_PROTOCOLS = tuple(
    key.strip() for key in env_str("NODE_HIDE_PROTOCOLS").split(",") if key.strip()
)
for _key in NODE_HIDE_PROTOCOLS:
    if not re.fullmatch(r"[a-z][a-z0-9_]*@[1-9][0-9]*", _key):
        raise ImproperlyConfigured(f"NODE_HIDE_PROTOCOLS: {_key!r} is not id@version")

# Maintenance (contract §6): attempts per job, backoff between them, the lease a worker holds.
MAINTENANCE_MAX_ATTEMPTS = env_int("MAINTENANCE_MAX_ATTEMPTS", 5)
MAINTENANCE_RETRY_BASE_SECONDS = env_int("MAINTENANCE_RETRY_BASE_SECONDS", 5)
# Short, because a running worker renews it (every third of it) until the task time limit.
MAINTENANCE_LEASE_SECONDS = env_int("MAINTENANCE_LEASE_SECONDS", 60)
MAINTENANCE_SWEEP_SECONDS = env_int("MAINTENANCE_SWEEP_SECONDS", 60)
# An external maintainer's job that sees no request for this long fails as expired.
MAINTENANCE_EXTERNAL_JOB_TTL_SECONDS = env_int("MAINTENANCE_EXTERNAL_JOB_TTL_SECONDS", 600)

# Runtime: queue a Celery task for each runnable run (off: the caller advances runs itself).
RUNTIME_AUTOSTART = env_bool("RUNTIME_AUTOSTART", True)
RUN_LEASE_SECONDS = env_int("RUN_LEASE_SECONDS", 300)
# Transient provider errors (5xx, 429, timeouts) re-queue the run this many times.
RUN_PROVIDER_RETRIES = env_int("RUN_PROVIDER_RETRIES", 3)
# The gateway (contract §14): how long a request waits for its upstream model's answer (then
# 504), and its lease on the session's run, renewed every third of it while it waits, so a
# session whose serving process died is free again within this many seconds.
GATEWAY_UPSTREAM_TIMEOUT_SECONDS = env_int("GATEWAY_UPSTREAM_TIMEOUT_SECONDS", 120)
GATEWAY_LEASE_SECONDS = env_int("GATEWAY_LEASE_SECONDS", 20)
# A streamed gateway reply sends a keep-alive after this many seconds without an event.
GATEWAY_KEEPALIVE_SECONDS = float(env_str("GATEWAY_KEEPALIVE_SECONDS", "10"))
# Share of maxInputTokens that maintenance leaves uncompressed at the recent end (contract §6).
MAINTENANCE_TAIL_SHARE = float(env_str("MAINTENANCE_TAIL_SHARE", "0.25"))

# Model providers (contract §7): OpenAI-compatible and Anthropic endpoints and keys.
OPENAI_BASE_URL = env_str("OPENAI_BASE_URL") or None
OPENAI_API_KEY = env_str("OPENAI_API_KEY") or None
ANTHROPIC_BASE_URL = env_str("ANTHROPIC_BASE_URL") or None
ANTHROPIC_API_KEY = env_str("ANTHROPIC_API_KEY") or None

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "WARNING")},
    # One line per API request and per job (contextproto.middleware, sessions_app.tasks).
    "loggers": {
        name: {"level": env_str("REQUEST_LOG_LEVEL", "INFO")}
        for name in ("contextproto.requests", "contextproto.jobs")
    },
}
