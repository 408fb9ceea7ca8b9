"""The catalog's vocabulary: protocol ids, statuses, tool names, placements and limits.

Plain values only, so any engine module (projection, tools, the schema builders) can name
them without importing the catalog's definitions.
"""

from __future__ import annotations

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

PREFIX = "prefix"
UNIFIED = "unified"

STABLE = "stable"
EXPERIMENTAL = "experimental"

# Where a system prompt takes the protocol prompt (contract §4).
SYSTEM_PLACEHOLDER = "{{context_protocol}}"
# Where a gateway client's own system text goes (contract §14); "" when it sent none.
CLIENT_SYSTEM_PLACEHOLDER = "{{client_system}}"

# Argument the dispatcher checks itself (contract §5.2), after the schema check.
EXPECTED_WINDOW_ARG = "expectedWindowId"

PLACEMENT_TRAILING_ASSISTANT = "trailing_assistant"
PLACEMENT_BEFORE_HISTORY_ASSISTANT = "before_history_assistant"
PLACEMENT_TRAILING_USER = "trailing_user"
STATE_MESSAGE_PLACEMENTS = (
    PLACEMENT_TRAILING_ASSISTANT,
    PLACEMENT_BEFORE_HISTORY_ASSISTANT,
    PLACEMENT_TRAILING_USER,
)

HISTORY_LIST = "context_history_list"
HISTORY_READ = "context_history_read"  # unified@4+
FOLD_CREATE = "context_fold_create"
FOLD_LIST = "context_fold_list"
FOLD_READ = "context_fold_read"
WINDOW_OPEN = "context_window_open"
WINDOW_MEMORY_SET = "context_window_memory_set"
WINDOW_COMPLETE = "context_window_complete"
WINDOW_LIST = "context_window_list"
WINDOW_SEARCH = "context_window_search"
WINDOW_READ = "context_window_read"
TASK_MEMORY_GET = "context_task_memory_get"
TASK_MEMORY_SET = "context_task_memory_set"
MAINTAINER_RUN = "context_maintainer_run"

UNIFIED_TOOL_ORDER = (
    HISTORY_LIST,
    FOLD_CREATE,
    FOLD_LIST,
    FOLD_READ,
    WINDOW_OPEN,
    WINDOW_MEMORY_SET,
    WINDOW_COMPLETE,
    WINDOW_LIST,
    WINDOW_SEARCH,
    WINDOW_READ,
    TASK_MEMORY_GET,
    TASK_MEMORY_SET,
    MAINTAINER_RUN,
)
# Tools that came with a later version, by the version that added them; they are not in
# UNIFIED_TOOL_ORDER so that the tool lists of earlier versions stay exactly as they were.
TOOLS_SINCE: dict[str, int] = {HISTORY_READ: 4}
PROTOCOL_TOOL_NAMES: frozenset[str] = frozenset(UNIFIED_TOOL_ORDER) | frozenset(TOOLS_SINCE)

MUTATING_TOOLS = frozenset(
    {FOLD_CREATE, WINDOW_OPEN, WINDOW_MEMORY_SET, WINDOW_COMPLETE, TASK_MEMORY_SET}
)
# v2+: tools whose call must state the window the model believes it is in.
V2_EXPECTED_WINDOW_TOOLS = frozenset(
    {WINDOW_OPEN, WINDOW_MEMORY_SET, WINDOW_COMPLETE, FOLD_CREATE, MAINTAINER_RUN}
)

PAGE_LIMIT_MAX = 50

# Option names of unified@4's masking tier (contract §9).
MASK_KEEP_RECENT = "maskKeepRecent"
MASK_MIN_CHARS = "maskMinChars"
MASK_STEP = "maskStep"
MEMORY_MAX = 16000

# The largest integer every JSON reader keeps exact; every integer argument is bounded by it.
JSON_INTEGER_MAX = 2**53 - 1
