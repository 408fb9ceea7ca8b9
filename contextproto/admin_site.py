"""The admin site and its shared building blocks: tenant scoping, read-only admins, a
paginator without COUNT(*).

`admin.site` is sessions_app.console.ConsoleAdminSite (contextproto.apps.ConsoleAdminConfig
makes it the default site): branded contextproto, its index is the operator dashboard. The
mixins below are what every ModelAdmin of `agents` and `sessions_app` is built from.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from django.contrib import admin
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest

# "View site" in the admin's header leads to "/" (AdminSite.site_url's default), the landing
# page (contextproto.landing): what this service is, links to the admin, API schema, health.


# A changelist never counts more rows than this; deeper browsing uses keyset pages.
COUNT_CAP = 10_000


class CappedPaginator(Paginator):
    """Count at most COUNT_CAP + 1 rows (`SELECT COUNT(*) FROM (… LIMIT n)`), never the table.

    Pages beyond the cap are not linked; the count reads "10000+" (see pagination.html).
    """

    capped = True

    @cached_property
    def count(self) -> int:
        object_list = self.object_list
        if isinstance(object_list, QuerySet):
            return object_list[: COUNT_CAP + 1].count()
        return len(object_list)

    @property
    def is_capped(self) -> bool:
        return self.count > COUNT_CAP


def scope_to_member(queryset: QuerySet, request: HttpRequest, application_path: str) -> QuerySet:
    """Keep the rows of Applications `request.user` is a member of (superusers see all).

    `application_path` leads from the model to its Application ("" for Application itself).
    """
    if request.user.is_superuser:
        return queryset
    lookup = f"{application_path}__members" if application_path else "members"
    return queryset.filter(**{lookup: request.user})


class ApplicationScopedAdmin(admin.ModelAdmin):
    """A ModelAdmin whose rows a non-superuser sees only for their own Applications.

    `application_path` is the ORM path from the model to its Application.
    """

    application_path = "application"

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return scope_to_member(super().get_queryset(request), request, self.application_path)


class ReadOnlyAdmin(ApplicationScopedAdmin):
    """An append-only or derived table: viewable, never added, changed or deleted here."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class HugeTableAdmin(ReadOnlyAdmin):
    """A read-only admin for tables with millions of rows: no COUNT(*), no facets."""

    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    paginator = CappedPaginator
    list_per_page = 100
    # No bulk actions by default (no "delete selected"); a subclass may name its own.
    actions: list[str] | None = None
