"""Prices through their one door (page, API, admin's service), and the costs as people see
them: a lead sees their own team's invoice and the platform's line, never another team."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import Client
from django.utils import timezone

from costs import services
from costs.models import CostPolicy, Price
from portal.models import AuditEvent
from portal.vocabulary.errors import DomainError
from tests.unit.costs.history import made

pytestmark = pytest.mark.django_db


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_price_is_validated_on_its_fields_and_audited_with_its_actor(platform_admin: Any) -> None:
    with pytest.raises(ValidationError) as bad:
        services.save_price(
            actor=platform_admin,
            price=Price(
                gpu_model="A100-80GB",
                profile="5g.99gb",
                per_hour=Decimal(1),
                effective_from="2026-11-01",
            ),
            source="web",
        )
    assert list(bad.value.message_dict) == ["profile"]
    assert "A100-80GB has no MIG profile 5g.99gb" in bad.value.message_dict["profile"][0]
    with pytest.raises(ValidationError) as bad:
        services.save_price(
            actor=platform_admin,
            price=Price(gpu_model="not a model", per_hour=Decimal(1), effective_from="2026-11-01"),
            source="web",
        )
    assert list(bad.value.message_dict) == ["gpu_model"]
    assert not Price.objects.exists()
    services.save_price(
        actor=platform_admin,
        price=Price(gpu_model="NVIDIA-L40S", per_hour=Decimal("1.2"), effective_from="2026-11-01"),
        source="web",
    )
    row = AuditEvent.objects.get(event="price.saved")
    assert (row.actor_name, row.source, row.new["per_hour"]) == ("padmin", "web", "1.2000")


def test_only_platform_admins_set_prices_from_any_door(team_a_admin: Any) -> None:
    with pytest.raises(PermissionDenied):
        services.set_cost_policy(
            actor=team_a_admin, currency="EUR", idle_sharing="use", source="web"
        )
    page = signed_in(team_a_admin).post(
        "/costs/prices/",
        {"gpu_model": "H100-80GB", "per_hour": "4", "effective_from": "2026-11-01"},
    )
    api = signed_in(team_a_admin).post(
        "/api/v1/costs/prices/",
        {"gpu_model": "H100-80GB", "per_hour": "4", "effective_from": "2026-11-01"},
        content_type="application/json",
    )
    assert (page.status_code, api.status_code) == (403, 403)
    assert not Price.objects.exists() and not CostPolicy.objects.exists()


def test_the_page_and_the_api_write_through_the_service(platform_admin: Any) -> None:
    client = signed_in(platform_admin)
    refused = client.post(
        "/costs/prices/",
        {
            "gpu_model": "H100-80GB",
            "profile": "3g.41gb",
            "per_hour": "4",
            "effective_from": "2026-11-01",
        },
    )
    assert refused.status_code == 400
    assert "H100-80GB has no MIG profile 3g.41gb" in refused.content.decode()
    saved = client.post(
        "/costs/prices/",
        {"gpu_model": "H100-80GB", "per_hour": "4.5", "effective_from": "2026-11-01"},
    )
    assert saved.status_code == 302
    api = client.post(
        "/api/v1/costs/prices/",
        {
            "gpu_model": "A100-80GB",
            "profile": "1g.10gb",
            "per_hour": "0.4",
            "effective_from": "2026-11-01",
        },
        content_type="application/json",
    )
    assert api.status_code == 201, api.content
    assert api.json()["per_hour"] == "0.4000"
    bad = client.post(
        "/api/v1/costs/prices/",
        {
            "gpu_model": "A100-80GB",
            "profile": "9g.1gb",
            "per_hour": "1",
            "effective_from": "2026-11-01",
        },
        content_type="application/json",
    )
    assert bad.status_code == 400 and list(bad.json()["errors"]) == ["profile"]
    policy = client.put(
        "/api/v1/costs/policy/",
        {"currency": "eur", "idle_sharing": "quota"},
        content_type="application/json",
    )
    assert policy.json() == {"currency": "EUR", "idle_sharing": "quota"}
    assert list(
        AuditEvent.objects.filter(source__in=["web", "api"])
        .values_list("event", "actor_name", "source")
        .order_by("id")
    ) == [
        ("price.saved", "padmin", "web"),
        ("price.saved", "padmin", "api"),
        ("cost_policy.changed", "padmin", "api"),
    ]


def test_a_lead_sees_their_teams_invoice_and_the_platforms_line_never_another_team(
    team_a_admin: Any, team_b: Any
) -> None:
    made()
    client = signed_in(team_a_admin)
    page = client.get("/costs/?month=2026-11").content.decode()
    assert "946.29" in page and "1117.71" in page  # team-a, and the platform's line
    assert "team-b" not in page and "816.00" not in page and "2880.00" not in page
    invoice = client.get("/costs/invoices/team-a/2026-11/").content.decode()
    assert "946.29" in invoice and "team-b" not in invoice
    assert "not read" in invoice  # no utilisation was recorded: said, never made up
    assert client.get("/costs/invoices/team-b/2026-11/").status_code == 404
    assert client.get("/api/v1/costs/invoices/team-b/2026-11/").status_code == 404
    api = client.get("/api/v1/costs/invoices/team-a/2026-11/").json()
    assert (api["total"], api["idle_sharing"]) == ("946.29", "platform")
    assert api["days"][2] == {"day": "2026-11-16", "cost": "260.57"}  # 240 + 144/7
    csv = client.get("/costs/invoices/team-a/2026-11.csv").content.decode()
    assert csv.splitlines()[-1].endswith(",946.29") and "kept by the platform" in csv
    summary = client.get("/api/v1/costs/summary/?month=2026-11").json()
    assert [t["team"] for t in summary["teams"]] == ["team-a"]
    assert summary["platform"] == "1117.71" and "fleet" not in summary


def test_the_home_panel_says_the_month_so_far_and_its_forecast(team_a_admin: Any) -> None:
    panel = signed_in(team_a_admin).get("/costs/panel/team-a/").content.decode()
    assert "so far:</strong> 0.00 USD" in panel
    assert signed_in(team_a_admin).get("/costs/panel/team-b/").status_code == 404


def test_the_admin_writes_a_price_through_the_service(platform_admin: Any) -> None:
    platform_admin.is_staff = platform_admin.is_superuser = True
    platform_admin.save()
    client = signed_in(platform_admin)
    form = {
        "gpu_model": "A100-80GB",
        "profile": "7g.80gb",
        "per_hour": "2.2",
        "note": "",
        "effective_from": "2026-11-01",
    }
    refused = client.post("/admin/costs/price/add/", {**form, "profile": "8g.90gb"})
    assert refused.status_code == 200 and "has no MIG profile 8g.90gb" in refused.content.decode()
    assert client.post("/admin/costs/price/add/", form).status_code == 302
    row = AuditEvent.objects.get(event="price.saved")
    assert (row.actor_name, row.source) == ("padmin", "admin")


def test_the_demo_loader_prices_its_gpu_models_through_the_service(demo: None) -> None:
    assert set(Price.objects.values_list("gpu_model", "profile")) == {
        ("H100-80GB", ""),
        ("A100-80GB", ""),
        ("A100-80GB", "1g.10gb"),
        ("NVIDIA-L40S", ""),
    }
    audited = AuditEvent.objects.filter(event="price.saved")
    assert audited.count() == 4 and {a.source for a in audited} == {"cli"}


def test_a_month_that_is_no_month_says_how_a_month_is_written(team_a_admin: Any) -> None:
    answer = signed_in(team_a_admin).get("/costs/invoices/team-a/2026-13/")
    assert answer.status_code == 404
    assert "No such month: a month is written YYYY-MM" in answer.content.decode()


def test_a_dra_device_class_is_priced_through_the_same_door_with_field_errors(
    platform_admin: Any,
) -> None:
    client = signed_in(platform_admin)
    form = {"gpu_model": "A100-80GB", "per_hour": "0.5", "effective_from": "2026-11-16"}
    both = client.post(
        "/costs/prices/", {**form, "profile": "3g.40gb", "device_class": "mig.nvidia.com"}
    )
    assert both.status_code == 400 and "leave the MIG profile blank" in both.content.decode()
    bad = client.post(
        "/api/v1/costs/prices/",
        {**form, "device_class": "Not A Class"},
        content_type="application/json",
    )
    assert bad.status_code == 400 and list(bad.json()["errors"]) == ["device_class"]
    saved = client.post(
        "/api/v1/costs/prices/",
        {**form, "device_class": "mig.nvidia.com"},
        content_type="application/json",
    )
    assert saved.status_code == 201 and saved.json()["device_class"] == "mig.nvidia.com"
    page = client.get("/costs/prices/").content.decode()
    assert "a device by DRA class <code>mig.nvidia.com</code>" in page
    row = AuditEvent.objects.get(event="price.saved")
    assert (row.source, row.new["device_class"]) == ("api", "mig.nvidia.com")
    assert not Price.objects.filter(profile="3g.40gb").exists()


def test_deleting_a_price_says_what_it_changes_and_asks_first(platform_admin: Any) -> None:
    made()
    client = signed_in(platform_admin)
    later = Price.objects.get(gpu_model="H100-80GB", effective_from="2026-11-16")
    url = f"/costs/prices/{later.pk}/delete/"
    assert f'href="{url}"' in client.get("/costs/prices/").content.decode()
    asked = client.get(url).content.decode()
    assert (
        "From 2026-11-16 on, the price before it holds instead: 4.0000 an hour from 2026-10-01."
        in asked
    )
    assert "months already invoiced included" in asked
    # a post without the confirmation only asks again; the service refuses it as well
    assert client.post(url).status_code == 200
    with pytest.raises(DomainError):
        services.delete_price(actor=platform_admin, price=later, source="web", confirmed=False)
    assert Price.objects.filter(pk=later.pk).exists()
    assert client.post(url, {"confirm": "yes"}).status_code == 302
    assert not Price.objects.filter(pk=later.pk).exists()
    row = AuditEvent.objects.get(event="price.deleted")
    assert (row.actor_name, row.source, row.old["per_hour"]) == ("padmin", "web", "5.0000")
    # the whole GPU's only price: its days would have none
    only = Price.objects.get(gpu_model="A100-80GB")
    assert "no price holds" in client.get(f"/costs/prices/{only.pk}/delete/").content.decode()
    assert client.delete(f"/api/v1/costs/prices/{only.pk}/").status_code == 204  # the call confirms


def test_the_month_links_offer_no_month_before_the_history_nor_after_this_one(
    platform_admin: Any,
) -> None:
    made()  # history from November 2026
    client = signed_in(platform_admin)
    november = client.get("/costs/?month=2026-11").content.decode()
    assert "?month=2026-10" not in november and "?month=2026-12" in november
    this = timezone.now().date().replace(day=1)
    after = (this + dt.timedelta(days=32)).replace(day=1)
    assert f"?month={after:%Y-%m}" not in client.get("/costs/").content.decode()
    invoice = client.get(f"/costs/invoices/team-a/{this:%Y-%m}/").content.decode()
    assert f"/costs/invoices/team-a/{after:%Y-%m}/" not in invoice
    invoice = client.get("/costs/invoices/team-a/2026-11/").content.decode()
    assert "/costs/invoices/team-a/2026-10/" not in invoice
