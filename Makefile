# Two commands: `make demo` and `make test`. Both build the venv from Python 3.12 first.
SHELL := /bin/bash
# The port `make demo` and `make serve` listen on, on 127.0.0.1: `make demo PORT=8001`.
PORT ?= 8000
# These targets are development runs on the public dev SECRET_KEY, which production servers
# refuse with DEBUG off unless this is set (a real SECRET_KEY in the environment wins).
export ALLOW_DEV_SECRET_KEY ?= true
PYENV_ROOT ?= $(shell pyenv root 2>/dev/null || echo $$HOME/.pyenv)
PYTHON312 ?= $(PYENV_ROOT)/versions/3.12.1/bin/python
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv test test-fast lint demo serve worker bench bench-long load clean

$(STAMP): pyproject.toml
	@if [ ! -x "$(PYTHON312)" ]; then \
	  echo "error: Python 3.12 not found at $(PYTHON312) (Django 6 needs >= 3.12)." >&2; \
	  echo "Set PYTHON312=/path/to/python3.12." >&2; exit 1; fi
	@"$(PYTHON312)" -c 'import sys; assert sys.version_info[:2] >= (3, 12), sys.version' \
	  || { echo "error: $(PYTHON312) is not Python >= 3.12" >&2; exit 1; }
	"$(PYTHON312)" -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@$(PY) -c 'import django, sys; assert django.VERSION[:2] == (6, 1), django.get_version()'
	@touch $(STAMP)

venv: $(STAMP)

# mypy: the config in pyproject.toml (strict on the engine and cache economics, gradual
# elsewhere), then plain `mypy --strict` on both, so the strict promise holds whatever the
# overrides say.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) manage.py makemigrations --check --dry-run
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy --strict --no-warn-unused-configs --cache-dir var/mypy_cache_strict \
	  contextproto/protocol contextproto/economics

# The suite on TEST_WORKERS processes (pytest-xdist; each has its own test database and Redis
# database, see tests/worker_redis.py). TEST_WORKERS=0 runs it in this process.
TEST_WORKERS ?= 2
test: $(STAMP) lint
	$(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

demo: $(STAMP)
	$(PY) manage.py migrate --noinput
	$(PY) manage.py collectstatic --noinput >/dev/null
	$(PY) manage.py demo --base-url http://127.0.0.1:$(PORT)
	@echo "Serving the admin at http://127.0.0.1:$(PORT)/admin/ and the gateway at" \
	  "http://127.0.0.1:$(PORT)/gateway/openai/v1 and /gateway/anthropic (Ctrl-C stops it)."
	$(PY) manage.py runserver 127.0.0.1:$(PORT)

# The production server (uvicorn, SERVE_WORKERS processes) on PostgreSQL + Redis: the API,
# the admin, static files and MCP at /mcp/. Run `make worker` beside it for maintenance.
SERVE_DATABASE_URL := postgres://postgres@127.0.0.1:5432/contextproto
SERVE_REDIS_URL := redis://127.0.0.1:6379/0
SERVE_HOST ?= 127.0.0.1
SERVE_PORT ?= $(PORT)
SERVE_WORKERS ?= 4
# Slow clients: headers within HEADER_READ_TIMEOUT_SECONDS (the h11 protocol of
# contextproto.serving; uvicorn has no header timeout), bodies within BODY_READ_TIMEOUT_SECONDS
# (the app), idle keep-alive connections closed after 5 s, and a stop that waits at most 20 s
# for open streams before the lifespan shutdown (which removes the node records) runs.
SERVE_LIMITS := --proxy-headers --http contextproto.serving:H11Protocol \
  --timeout-keep-alive 5 --timeout-graceful-shutdown 20
serve: $(STAMP)
	@set -euo pipefail; \
	export DATABASE_URL="$${DATABASE_URL:-$(SERVE_DATABASE_URL)}"; \
	export REDIS_URL="$${REDIS_URL:-$(SERVE_REDIS_URL)}"; \
	export DATABASE_POOL_SIZE="$${DATABASE_POOL_SIZE:-8}"; \
	if ! psql "$$DATABASE_URL" -Atqc 'SELECT 1' >/dev/null 2>&1; then \
	  createdb --maintenance-db="$${DATABASE_URL%/*}/postgres" "$${DATABASE_URL##*/}"; \
	fi; \
	$(PY) manage.py migrate --noinput; \
	$(PY) manage.py collectstatic --noinput >/dev/null; \
	exec $(VENV)/bin/uvicorn contextproto.asgi:application --host $(SERVE_HOST) \
	  --port $(SERVE_PORT) --workers $(SERVE_WORKERS) $(SERVE_LIMITS)

worker: $(STAMP)
	DATABASE_URL="$${DATABASE_URL:-$(SERVE_DATABASE_URL)}" \
	REDIS_URL="$${REDIS_URL:-$(SERVE_REDIS_URL)}" NODE_ROLE=worker \
	  $(VENV)/bin/celery -A contextproto worker -B -Q contextproto -l info

# PostgreSQL only: DATABASE_URL defaults to a local contextproto_bench database, created
# with createdb if missing and migrated first. Figures go to BENCHMARKS.md. The gateway
# section runs uvicorn and the LiteLLM proxy (installed once from pyproject's `bench` extra
# into var/bench-litellm). One section: make bench BENCH_ARGS="--only gateway --refresh".
BENCH_DATABASE_URL := postgres://postgres@127.0.0.1:5432/contextproto_bench
bench: $(STAMP)
	@set -euo pipefail; \
	export BENCH_STARTED="$$(date +%s.%N)"; \
	export DATABASE_URL="$${DATABASE_URL:-$(BENCH_DATABASE_URL)}"; \
	case "$$DATABASE_URL" in \
	  postgres://*|postgresql://*) ;; \
	  *) echo "error: make bench runs on PostgreSQL; DATABASE_URL=$$DATABASE_URL is not." >&2; \
	     echo "Unset it (default $(BENCH_DATABASE_URL)) or point it at PostgreSQL." >&2; \
	     exit 2;; \
	esac; \
	if ! psql "$$DATABASE_URL" -Atqc 'SELECT 1' >/dev/null 2>&1; then \
	  name="$${DATABASE_URL##*/}"; name="$${name%%\?*}"; \
	  echo "createdb $$name"; \
	  createdb --maintenance-db="$${DATABASE_URL%/*}/postgres" "$$name"; \
	fi; \
	$(PY) manage.py migrate --noinput; \
	env -u REDIS_URL $(PY) bench/run.py $(BENCH_ARGS)

# The token economy over 1000 turns at 128k (section 3c of BENCHMARKS.md, refreshed in place):
# too long for `make bench`'s 15 minutes on 2 cores.
bench-long: $(STAMP)
	@$(MAKE) --no-print-directory bench BENCH_ARGS="--only economy-long --refresh $(BENCH_ARGS)"

# Concurrent host loops over HTTP against uvicorn (several workers) on PostgreSQL + Redis,
# loopback only, then an integrity audit of every session (bench/load.py). Figures go to
# BENCHMARKS.md. DATABASE_URL defaults to a local contextproto_load database (created and
# migrated if missing), REDIS_URL to db 8 of the local Redis.
LOAD_DATABASE_URL := postgres://postgres@127.0.0.1:5432/contextproto_load
LOAD_REDIS_URL := redis://127.0.0.1:6379/8
load: $(STAMP)
	@set -euo pipefail; \
	export DATABASE_URL="$${DATABASE_URL:-$(LOAD_DATABASE_URL)}"; \
	export REDIS_URL="$${REDIS_URL:-$(LOAD_REDIS_URL)}"; \
	if ! psql "$$DATABASE_URL" -Atqc 'SELECT 1' >/dev/null 2>&1; then \
	  name="$${DATABASE_URL##*/}"; name="$${name%%\?*}"; \
	  echo "createdb $$name"; \
	  createdb --maintenance-db="$${DATABASE_URL%/*}/postgres" "$$name"; \
	fi; \
	$(PY) bench/load.py $(LOAD_ARGS)

clean:
	rm -rf $(VENV) var
