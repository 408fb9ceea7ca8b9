"""Fixtures for the operator admin: users, tenants and sessions built through the services."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User

from agents.models import Application
from agents.services import (
    agent_create,
    agent_version_create,
    agent_version_publish,
    application_create,
)
from tests.builders.sessions import SYSTEM_PROMPT


@pytest.fixture
def published_version(db):
    """A published unified@2 version built through the services, in a fresh Application."""

    def build(app_name: str = "Acme", version: int = 2, **fields):
        application = Application.objects.filter(name=app_name).first()
        if application is None:
            application, _ = application_create(name=app_name)
        agent = agent_create(application=application, name=fields.pop("agent_name", "assistant"))
        draft = agent_version_create(
            agent=agent,
            fields={
                "system_prompt": SYSTEM_PROMPT,
                "context_protocol_id": "unified",
                "context_protocol_version": version,
                "options": fields.pop("options", {}),
                "model_provider": "external",
                "model_name": "host-model",
                "max_input_tokens": 8000,
                **fields,
            },
        )
        return agent_version_publish(version=draft)

    return build


@pytest.fixture
def superuser(db):
    return User.objects.create_superuser("root", "root@example.com", "pw")


@pytest.fixture
def admin_client_for(client):
    """A Django test client logged in as the given user."""

    def login(user):
        client.force_login(user)
        return client

    return login


VIEW_MODELS = (
    "application",
    "agent",
    "agentversion",
    "tool",
    "session",
    "run",
    "message",
    "kventry",
    "toolreceipt",
    "projectionsnapshot",
    "maintenancejob",
)


@pytest.fixture
def staff_member(db):
    """A non-superuser staff user with view rights everywhere and agent write rights."""

    def build(username: str, *applications):
        user = User.objects.create_user(username, f"{username}@example.com", "pw", is_staff=True)
        codenames = [f"view_{m}" for m in VIEW_MODELS] + [
            "add_agent",
            "add_agentversion",
            "change_agentversion",
        ]
        user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
        for application in applications:
            application.members.add(user)
        return User.objects.get(pk=user.pk)

    return build
