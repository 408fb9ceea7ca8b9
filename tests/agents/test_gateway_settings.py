"""An Application's model aliases and side models (contract §14): what they resolve and what
they refuse, through the selectors and the service the API and the admin call."""

from __future__ import annotations

import pytest

from agents.models import AgentVersion, GatewaySettings
from agents.selectors import gateway_settings_of, gateway_version_for_model, is_side_model
from agents.services_gateway import gateway_settings_problems, gateway_settings_set
from contextproto.errors import ApplicationError
from contextproto.protocol.gateway.model_names import DEFAULT_SIDE_MODELS


@pytest.fixture
def app(tenant, make_version):
    """An Application with helper@1, helper@2 (scripted), codex@1 (openai), host@1 (external)."""
    application, _client = tenant()
    make_version(application, name="helper", provider="scripted")
    make_version(application, name="helper", provider="scripted")
    make_version(application, name="codex", provider="openai")
    make_version(application, name="host", provider="external")
    return application


def aliases(application, *pairs, side=None):
    return gateway_settings_set(
        application=application,
        model_aliases=[{"pattern": p, "agentVersion": v} for p, v in pairs],
        side_models=side,
    )


def version_name(version: AgentVersion) -> str:
    return f"{version.agent.name}@{version.number}"


def refusal(application, model) -> ApplicationError:
    with pytest.raises(ApplicationError) as caught:
        gateway_version_for_model(application=application, model=model)
    return caught.value


def test_a_model_name_takes_its_alias_exact_before_globs_then_list_order(app):
    aliases(app, ("claude-*", "helper@1"), ("*opus*", "codex@1"), ("claude-opus-5-5", "helper"))
    resolve = lambda model: version_name(  # noqa: E731
        gateway_version_for_model(application=app, model=model)
    )
    assert resolve("claude-opus-5-5") == "helper@2"  # exact; `helper` is its newest version
    assert resolve("claude-opus-4-8") == "helper@1"  # first glob in the list
    assert resolve("open-opus") == "codex@1"


def test_a_version_name_is_never_taken_by_an_alias(app):
    aliases(app, ("*", "codex@1"))
    for name, expected in (("helper@1", "helper@1"), ("helper", "helper@2")):
        found = gateway_version_for_model(application=app, model=name)
        assert version_name(found) == expected
    by_id = AgentVersion.objects.get(agent__name="helper", number=1)
    assert gateway_version_for_model(application=app, model=str(by_id.id)) == by_id
    # Anything else goes to the catch-all.
    assert version_name(gateway_version_for_model(application=app, model="gpt-5.5")) == "codex@1"


def test_an_unmatched_name_is_404_and_says_where_to_set_an_alias(app):
    aliases(app, ("gpt-*", "codex@1"))
    error = refusal(app, "claude-opus-5-5")
    assert (error.code, error.status) == ("gateway_model_not_found", 404)
    assert error.details == {"model": "claude-opus-5-5"}
    assert "Gateway settings" in error.message and app.name in error.message
    assert "PUT /api/v1/gateway-settings/" in error.message
    # Without settings at all, the same answer.
    GatewaySettings.objects.all().delete()
    assert refusal(app, "claude-opus-5-5").details == {"model": "claude-opus-5-5"}
    assert refusal(app, None).code == "gateway_model_not_found"


def test_an_alias_whose_version_went_away_is_refused_naming_the_alias(app):
    aliases(app, ("claude-*", "helper@1"), ("gpt-*", "codex@1"))
    AgentVersion.objects.filter(agent__name="helper", number=1).update(status="archived")
    archived = refusal(app, "claude-opus-5-5")
    assert (archived.code, archived.status) == ("agent_version_archived", 409)
    assert "'claude-*'" in archived.message
    assert archived.details["aliasPattern"] == "claude-*"
    AgentVersion.objects.filter(agent__name="codex").update(model_provider="external")
    assert refusal(app, "gpt-5.5").code == "gateway_model_not_runnable"
    AgentVersion.objects.filter(agent__name="codex").delete()
    gone = refusal(app, "gpt-5.5")
    assert (gone.code, gone.details["agentVersion"]) == ("gateway_model_not_found", "codex@1")
    assert "change the alias" in gone.message


def test_resolving_an_alias_costs_four_queries_at_most(app, django_assert_max_num_queries):
    aliases(app, ("claude-*", "helper"))
    with django_assert_max_num_queries(4):
        gateway_version_for_model(application=app, model="claude-opus-5-5")
    with django_assert_max_num_queries(1):
        gateway_version_for_model(application=app, model="helper@1")


def test_side_models_are_the_default_list_until_the_application_sets_its_own(app):
    settings = gateway_settings_of(app)
    assert (settings.side_models, settings.side_models_default) == (DEFAULT_SIDE_MODELS, True)
    assert is_side_model(app, "claude-haiku-4-5-20251001")
    assert not is_side_model(app, "claude-opus-5-5")
    assert not is_side_model(app, None)
    aliases(app, side=["*-mini", "title-model"])
    assert is_side_model(app, "gpt-5-mini") and is_side_model(app, "title-model")
    assert not is_side_model(app, "claude-haiku-4-5")
    aliases(app, side=[])  # none at all
    assert not is_side_model(app, "claude-haiku-4-5")
    assert gateway_settings_of(app).side_models_default is False
    aliases(app, side=None)  # the default again
    assert is_side_model(app, "claude-haiku-4-5")


def test_every_problem_is_listed_at_once_with_its_field_path(app, tenant, make_version):
    other, _ = tenant("Other")
    foreign = make_version(other, name="theirs", provider="scripted")
    AgentVersion.objects.filter(agent__name="helper", number=1).update(status="archived")
    draft = make_version(app, name="drafty", provider="scripted")
    AgentVersion.objects.filter(pk=draft.pk).update(status="draft")
    problems = gateway_settings_problems(
        application=app,
        model_aliases=[
            {"pattern": "claude-*", "agentVersion": "helper@2"},  # fine
            {"pattern": "claude-*", "agentVersion": "helper@2"},
            {"pattern": "has space", "agentVersion": "helper@1"},
            {"pattern": "gpt-*", "agentVersion": "host@1"},
            {"pattern": "x-*", "agentVersion": "nobody@3"},
            {"pattern": "y-*", "agentVersion": str(foreign.id)},
            {"pattern": "z-*", "agentVersion": f"drafty@{draft.number}"},
            {"pattern": "helper@2", "agentVersion": "codex@1"},
            {"pattern": "w-*", "agentVersion": "", "extra": 1},
            "not an object",
        ],
        side_models=["*haiku*", "", "*haiku*"],
    )
    found = {(p["field"], p["code"]) for p in problems}
    assert found == {
        ("modelAliases[1].pattern", "pattern_repeated"),
        ("modelAliases[2].pattern", "pattern_invalid"),
        ("modelAliases[2].agentVersion", "agent_version_archived"),
        ("modelAliases[3].agentVersion", "gateway_model_not_runnable"),
        ("modelAliases[4].agentVersion", "gateway_model_not_found"),
        ("modelAliases[5].agentVersion", "gateway_model_not_found"),  # another Application's
        ("modelAliases[6].agentVersion", "gateway_model_not_found"),  # a draft
        ("modelAliases[7].pattern", "pattern_names_a_version"),
        ("modelAliases[8].extra", "unknown_key"),
        ("modelAliases[8].agentVersion", "required"),
        ("modelAliases[9]", "not_an_object"),
        ("sideModels[1]", "pattern_invalid"),
        ("sideModels[2]", "pattern_repeated"),
    }
    assert all(p["message"].startswith(p["field"]) for p in problems)


@pytest.mark.parametrize(
    ("aliases_value", "side_value", "field", "code"),
    [
        ({"claude-*": "helper@1"}, None, "modelAliases", "not_a_list"),
        ([{"pattern": f"m{n}", "agentVersion": "helper"} for n in range(101)], None,
         "modelAliases", "too_many"),
        ([], "*haiku*", "sideModels", "not_a_list"),
        ([], [f"s{n}" for n in range(101)], "sideModels", "too_many"),
    ],
)  # fmt: skip
def test_the_lists_themselves_are_checked(app, aliases_value, side_value, field, code):
    problems = gateway_settings_problems(
        application=app, model_aliases=aliases_value, side_models=side_value
    )
    assert [(p["field"], p["code"]) for p in problems] == [(field, code)]


def test_a_refused_write_stores_nothing_and_a_good_one_replaces_everything(app):
    aliases(app, ("claude-*", "helper@1"), side=["*mini*"])
    with pytest.raises(ApplicationError) as caught:
        aliases(app, ("gpt-*", "nobody"))
    assert caught.value.code == "gateway_settings_invalid"
    assert caught.value.status == 400
    assert [e["field"] for e in caught.value.details["errors"]] == ["modelAliases[0].agentVersion"]
    row = GatewaySettings.objects.get(application=app)
    assert row.model_aliases == [{"pattern": "claude-*", "agentVersion": "helper@1"}]
    aliases(app, ("gpt-*", "codex@1"))  # side models back to the default
    row.refresh_from_db()
    assert (row.model_aliases, row.side_models) == (
        [{"pattern": "gpt-*", "agentVersion": "codex@1"}],
        None,
    )
    assert GatewaySettings.objects.count() == 1
