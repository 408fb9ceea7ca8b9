"""Operator admin for Applications, Agents and AgentVersions (docs/architecture.md: Admin).

Every write goes through `agents.services`: a draft is created and edited with
agent_version_create / agent_version_update_draft, published with agent_version_publish and
copied with agent_version_duplicate. Published and archived versions are read-only.

Option fields are generated from the catalog's option schema of one protocol version: the
saved protocol on a change page, `?protocol=id@version` (or unified@2) on the add page.
Picking another protocol and saving stores the options that carry over and reloads the
form with the new protocol's fields.

The package, one module per page group: `applications` (Applications and API keys), `agent`
(Agents), `versions` (AgentVersions: saving through the services, publish, duplicate,
archive, the catalog page) with `version_forms` (which form) and `version_columns` (columns
and read-only tables), `tools` (host tools). Importing the package registers them all.
"""

from agents.admin.agent import AgentAdmin
from agents.admin.applications import ApiKeyAdmin, ApplicationAdmin
from agents.admin.tools import ToolAdmin
from agents.admin.versions import AgentVersionAdmin, add_change_form_context

__all__ = [
    "AgentAdmin",
    "AgentVersionAdmin",
    "ApiKeyAdmin",
    "ApplicationAdmin",
    "ToolAdmin",
    "add_change_form_context",
]
