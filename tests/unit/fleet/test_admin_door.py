"""The admin writes node pools and custom MIG configs through ``fleet.services`` only: the
pool's label rules (which only the service holds) refuse on the page with nothing written,
and each valid edit writes one audit row naming the admin."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from fleet.models import MigConfig, NodePool
from tests.admin_forms import audited_since, change_url, form_data, last_audit, page_text

pytestmark = pytest.mark.django_db


def test_a_node_pool_with_a_bad_label_is_refused_with_the_services_message(
    admin_site: Client,
) -> None:
    pool = NodePool.objects.get(name="train")
    data = form_data(admin_site, change_url(pool))
    before = last_audit()
    answer = admin_site.post(
        change_url(pool),
        {**data, "node_selector": json.dumps({"quartermaster.io/pool": "not a value!"})},
    )
    assert answer.status_code == 200
    shown = page_text(answer)
    assert "quartermaster.io/pool: a valid label value must be an empty string or consist" in shown
    pool.refresh_from_db()
    assert pool.node_selector == {"quartermaster.io/pool": "train"}
    assert audited_since(before) == []
    bad_config = admin_site.post(change_url(pool), {**data, "mig_config": "all 3g"})
    assert "A MIG config name is a label value, e.g. all-3g.40gb." in page_text(bad_config)
    assert NodePool.objects.get(pk=pool.pk).mig_config == "all-3g.40gb"


def test_a_valid_node_pool_edit_writes_one_audit_row(admin_site: Client) -> None:
    pool = NodePool.objects.get(name="train")
    data = form_data(admin_site, change_url(pool))
    before = last_audit()
    saved = admin_site.post(change_url(pool), {**data, "description": "Training nodes."})
    assert saved.status_code == 302, page_text(saved)[-1500:]
    assert audited_since(before) == [("node_pool.saved", "admin", "admin")]


def test_a_custom_mig_config_is_made_and_refused_through_its_service(
    admin_site: Client,
) -> None:
    url = "/admin/fleet/migconfig/add/"
    data = {"name": "a100-two-3g", "gpu_model": "A100-80GB", "description": ""}
    before = last_audit()
    refused = admin_site.post(url, {**data, "devices": json.dumps({"7g.80gb": 2})})
    assert refused.status_code == 200
    assert not MigConfig.objects.exists()
    assert audited_since(before) == []
    saved = admin_site.post(url, {**data, "devices": json.dumps({"3g.40gb": 2})})
    assert saved.status_code == 302, page_text(saved)[-1500:]
    assert audited_since(before) == [("migconfig.created", "admin", "admin")]
    config = MigConfig.objects.get()
    deleted = admin_site.post(f"/admin/fleet/migconfig/{config.pk}/delete/", {"post": "yes"})
    assert deleted.status_code == 302
    assert audited_since(before)[-1] == ("migconfig.deleted", "admin", "admin")
    assert not MigConfig.objects.exists()
