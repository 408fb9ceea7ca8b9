"""Tenants (Applications), their API keys, host tools, gateway settings, Agents and AgentVersions
(contract §2.1, §14)."""

from __future__ import annotations

import hashlib
import uuid

from django.conf import settings
from django.db import models


def hash_key(raw_key: str) -> str:
    """Keys are long random tokens, so a plain SHA-256 is enough to store them safely."""
    return hashlib.sha256(raw_key.encode()).hexdigest()


class Application(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200, unique=True)
    # Staff users who may see this Application's objects in the admin.
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="applications"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ApiKey(models.Model):
    application = models.ForeignKey(Application, on_delete=models.CASCADE, related_name="api_keys")
    key_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=16, help_text="First characters, to recognise a key.")
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.application})"


class Tool(models.Model):
    """A host tool of an Application: executed by the host, results written through the API.

    Written only through agents.services_tools (contract §11), which checks the name and the
    input schema; the unique constraint backs "one name per Application" under concurrency.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    application = models.ForeignKey(Application, on_delete=models.CASCADE, related_name="tools")
    name = models.CharField(max_length=64)
    description = models.TextField(blank=True)
    input_schema = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["application", "name"], name="tool_unique_name")
        ]

    def __str__(self) -> str:
        return self.name


class Agent(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    application = models.ForeignKey(Application, on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["application", "name"]
        constraints = [
            models.UniqueConstraint(fields=["application", "name"], name="agent_unique_name")
        ]

    def __str__(self) -> str:
        return self.name


class AgentVersion(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft"
        PUBLISHED = "published"
        ARCHIVED = "archived"

    class Provider(models.TextChoices):
        SCRIPTED = "scripted"
        OPENAI = "openai"
        ANTHROPIC = "anthropic"
        EXTERNAL = "external"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT)
    system_prompt = models.TextField(blank=True)
    context_protocol_id = models.CharField(max_length=64)
    context_protocol_version = models.PositiveIntegerField()
    options = models.JSONField(default=dict, blank=True)
    model_provider = models.CharField(max_length=16, choices=Provider.choices, blank=True)
    model_name = models.CharField(max_length=200, blank=True)
    max_input_tokens = models.PositiveIntegerField(null=True, blank=True)
    maintenance_trigger_ratio = models.FloatField(default=0.75)
    # Scripted model steps or provider-specific settings (contract §7).
    model_config = models.JSONField(default=dict, blank=True)
    # contract §8: `model.promptCache` ({mode, ttl}; {} = the defaults) and `model.prices`
    # (currency units per million tokens: input, cacheRead, cacheWrite, output; null = none).
    prompt_cache = models.JSONField(default=dict, blank=True)
    prices = models.JSONField(null=True, blank=True)
    tools = models.ManyToManyField(Tool, blank=True, related_name="agent_versions")
    maintainer_agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.PROTECT, related_name="maintained_versions"
    )
    max_turns_per_run = models.PositiveIntegerField(default=50)
    created_at = models.DateTimeField(auto_now_add=True)
    published_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["agent", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["agent", "number"], name="agentversion_unique_number")
        ]

    def __str__(self) -> str:
        return f"{self.agent.name} v{self.number}"

    @property
    def protocol_key(self) -> str:
        return f"{self.context_protocol_id}@{self.context_protocol_version}"


class GatewaySettings(models.Model):
    """An Application's gateway settings (contract §14): its model aliases and side models.

    One row per Application, created by the first `PUT gateway-settings/` or admin save; no
    row means no aliases and the default side models. Written only through
    agents.services_gateway, which checks every entry; the gateway reads them through
    agents.selectors (`gateway_version_for_model`, `is_side_model`).
    """

    application = models.OneToOneField(
        Application, on_delete=models.CASCADE, primary_key=True, related_name="gateway_settings"
    )
    # [{"pattern": "claude-*", "agentVersion": "helper@2"}, …] in the operator's order: the
    # first glob that matches wins (an exact pattern before any glob).
    model_aliases = models.JSONField(default=list, blank=True)
    # Globs of model names used only for background requests; null: the service's default
    # (contextproto.protocol.gateway.model_names.DEFAULT_SIDE_MODELS).
    side_models = models.JSONField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "gateway settings"
        verbose_name_plural = "gateway settings"

    def __str__(self) -> str:
        return f"Gateway settings of {self.application}"
