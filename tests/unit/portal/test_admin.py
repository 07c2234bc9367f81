"""The admin after the move: every registered model's list and, where editing is allowed,
its form load for a superuser; observed state and records stay read-only."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.test import Client

from portal.admin import ReadOnlyAdmin

pytestmark = pytest.mark.django_db


def test_every_admin_page_loads_and_records_are_read_only(client: Client, fleet: None) -> None:
    client.force_login(User.objects.get(username="admin"))
    assert client.get("/admin/").status_code == 200
    registered = admin.site._registry
    assert {m._meta.app_label for m in registered} >= {
        "portal",
        "tenants",
        "queues",
        "fleet",
        "cluster",
        "changes",
    }
    for model, model_admin in registered.items():
        meta = model._meta
        listing = client.get(f"/admin/{meta.app_label}/{meta.model_name}/")
        assert listing.status_code == 200, meta.label
        adding = client.get(f"/admin/{meta.app_label}/{meta.model_name}/add/")
        # The sign-in throttle's records (axes) are read-only too: an admin deletes a lock.
        read_only = isinstance(model_admin, ReadOnlyAdmin) or meta.app_label == "axes"
        assert adding.status_code == (403 if read_only else 200), meta.label
