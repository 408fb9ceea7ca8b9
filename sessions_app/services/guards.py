"""Rules the API checks before it calls a write service, moved out of the views.

Interim home (issue 17): each belongs in the service that performs the write, and moves there
once the services are restructured; see each function's docstring. Reads nothing but what it
is given, writes nothing.
"""

from __future__ import annotations

from typing import Any

from contextproto.errors import MAINTAINER_NOT_BOUND, ApplicationError
from sessions_app.models import Session
from sessions_app.services import messages


def input_content_check(content: Any) -> None:
    """Refuse the content of a new user input unless it is text or valid parts (400).

    Checked before the idempotent write so a bad body is refused, not replayed. Belongs in
    `runs.run_start` (or a public `messages.content_check` it calls).
    """
    messages.content_check(content)


def maintainer_bound_check(session: Session) -> None:
    """Refuse built-in maintenance when no maintainer Agent is bound (400 maintainer_not_bound).

    Belongs in `maintenance.maintenance_request` for `trigger="api"`.
    """
    if session.agent_version.maintainer_agent_id is None:
        raise ApplicationError(
            MAINTAINER_NOT_BOUND,
            "No maintainer Agent is bound to this AgentVersion; bind one, or use the "
            "external maintainer endpoints (maintenance/plan/).",
        )
