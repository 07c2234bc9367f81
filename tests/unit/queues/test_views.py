"""Queues and quotas pages: usage by cohort, team-scoped LocalQueues, and admin edits that
always go through a preview of the rendered YAML diff."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.test import Client

from portal.models import AuditEvent
from queues.models import ClusterQueue
from tenants.models import PriorityClass
from tests.factories import demo_fleet_nodes

pytestmark = pytest.mark.django_db


def login(client: Client, username: str) -> Client:
    client.force_login(User.objects.get(username=username))
    return client


def form_of(cq: ClusterQueue, **changes: str) -> dict[str, str]:
    data = {"fair_sharing_weight": cq.fair_sharing_weight, "stop_policy": cq.stop_policy}
    for gi, group in enumerate(cq.resource_groups):
        for fi, flavor in enumerate(group["flavors"]):
            for ri, quota in enumerate(flavor["resources"]):
                key = f"g{gi}f{fi}r{ri}"
                data[f"{key}_nominal"] = str(quota["nominalQuota"])
                data[f"{key}_borrowing"] = str(quota.get("borrowingLimit", ""))
                data[f"{key}_lending"] = str(quota.get("lendingLimit", ""))
    data.update(changes)
    return data


def test_the_overview_shows_queues_by_cohort_and_only_my_teams_local_queues(
    client: Client, demo: None
) -> None:
    page = login(client, "lead-a").get("/queues/").content.decode()
    assert "Cohort ai-platform" in page
    assert "<code>cq-train</code>" in page and "Edit quotas" not in page
    assert "<code>team-a-train</code>" in page
    assert "<code>team-b-train</code>" not in page  # another team's LocalQueue
    assert "training-critical" in page
    admin_page = login(client, "admin").get("/queues/").content.decode()
    assert "<code>team-b-train</code>" in admin_page and "Edit quotas" in admin_page


@pytest.mark.parametrize(
    ("user", "heading"),
    [("lead-a", "of your teams"), ("approver", "of every team"), ("admin", "of every team")],
)
def test_the_local_queues_heading_says_whose_they_are(
    client: Client, demo: None, user: str, heading: str
) -> None:
    page = login(client, user).get("/queues/").content.decode()
    start = page.index('<h2 id="lq-title">')
    title = page[start : page.index("</h2>", start)]
    assert heading in title
    other = "of every team" if heading == "of your teams" else "of your teams"
    assert other not in title


def test_an_edit_shows_the_yaml_diff_then_saves_it(client: Client, demo: None) -> None:
    demo_fleet_nodes()
    login(client, "admin")
    cq = ClusterQueue.objects.get(name="cq-train")
    url = "/queues/cluster-queues/cq-train/edit/"
    page = client.get(url).content.decode()
    assert "offers 16 behind h100-80gb; queues would promise 16" in page
    data = form_of(cq, g0f0r0_nominal="1.0e1")  # stored as 10; a cut asks nothing
    preview = client.post(url, {**data, "action": "preview"})
    body = preview.content.decode()
    assert preview.status_code == 200
    # Quantities are strings in the manifest, as Kueue stores them (quoted in YAML).
    assert '<span class="d del">-         nominalQuota: &#x27;12&#x27;</span>' in body
    assert '<span class="d add">+         nominalQuota: &#x27;10&#x27;</span>' in body
    assert ClusterQueue.objects.get(name="cq-train").quota()[("h100-80gb", "nvidia.com/gpu")] == 12
    hashes = {
        k: body.split(f'name="{k}" value="')[1].split('"')[0] for k in ("before_hash", "after_hash")
    }
    saved = client.post(url, {**data, **hashes, "action": "save"})
    assert saved.status_code == 302 and saved["Location"] == "/queues/"
    assert ClusterQueue.objects.get(name="cq-train").quota()[("h100-80gb", "nvidia.com/gpu")] == 10
    event = AuditEvent.objects.filter(event="cluster_queue.saved").latest("id")
    assert (event.source, event.actor_name) == ("web", "admin")


def test_the_pages_save_is_an_entry_point_of_its_own(client: Client, demo: None) -> None:
    """The edit page's save runs in a durable transaction: inside another it refuses before
    writing (the service stays nestable for the changes' executor and the admin)."""
    login(client, "admin")
    cq = ClusterQueue.objects.get(name="cq-train")
    url = "/queues/cluster-queues/cq-train/edit/"
    data = form_of(cq, g0f0r0_nominal="14")
    body = client.post(url, {**data, "action": "preview"}).content.decode()
    hashes = {
        k: body.split(f'name="{k}" value="')[1].split('"')[0] for k in ("before_hash", "after_hash")
    }
    with pytest.raises(RuntimeError, match="durable"), transaction.atomic():
        client.post(url, {**data, **hashes, "action": "save"})
    assert ClusterQueue.objects.get(name="cq-train").quota()[("h100-80gb", "nvidia.com/gpu")] == 12


def test_saving_what_was_not_previewed_is_refused(client: Client, demo: None) -> None:
    login(client, "admin")
    cq = ClusterQueue.objects.get(name="cq-train")
    url = "/queues/cluster-queues/cq-train/edit/"
    data = form_of(cq, g0f0r0_nominal="14")
    body = client.post(url, {**data, "action": "preview"}).content.decode()
    hashes = {
        k: body.split(f'name="{k}" value="')[1].split('"')[0] for k in ("before_hash", "after_hash")
    }
    # Changed after the preview: the new diff is shown, nothing is saved.
    response = client.post(url, {**data, **hashes, "g0f0r0_nominal": "20", "action": "save"})
    assert response.status_code == 409
    assert "changed since the diff you saw" in response.content.decode()
    assert "+         nominalQuota: &#x27;20&#x27;" in response.content.decode()
    assert ClusterQueue.objects.get(name="cq-train").quota()[("h100-80gb", "nvidia.com/gpu")] == 12


def test_bad_quotas_get_the_same_field_errors_as_the_api(client: Client, demo: None) -> None:
    login(client, "admin")
    cq = ClusterQueue.objects.get(name="cq-train")
    before = AuditEvent.objects.count()
    response = client.post(
        "/queues/cluster-queues/cq-train/edit/",
        {**form_of(cq, g0f0r0_nominal="-3", g0f0r0_lending="20"), "action": "preview"},
    )
    assert response.status_code == 422
    body = response.content.decode()
    assert "Not saved: correct the fields marked below" in body
    assert "resourceGroups[" not in body and "resource_groups" not in body
    # The same rules the admin and the services apply, word for word, next to the field.
    import copy

    from django.core.exceptions import ValidationError

    edited = copy.deepcopy(cq)
    edited.resource_groups[0]["flavors"][0]["resources"][0].update(
        {"nominalQuota": "-3", "lendingLimit": "20"}
    )
    with pytest.raises(ValidationError) as caught:
        edited.full_clean()
    messages = caught.value.message_dict["resource_groups"]
    assert messages
    for message in messages:
        path, _, text = message.partition(": ")
        field = (
            "g0f0r0_"
            + {"nominalQuota": "nominal", "lendingLimit": "lending"}[path.rsplit(".", 1)[1]]
        )
        shown = text.replace("'", "&#x27;").replace('"', "&quot;")
        assert f'<p class="error field-error" id="{field}-error">{shown}</p>' in body
    assert AuditEvent.objects.count() == before


def test_only_platform_admins_edit(client: Client, demo: None) -> None:
    login(client, "lead-a")
    assert client.get("/queues/cluster-queues/cq-train/edit/").status_code == 403
    assert (
        client.post(
            "/queues/priority-classes/training-critical/edit/", {"value": "5", "action": "save"}
        ).status_code
        == 403
    )
    login(client, "admin")
    assert client.get("/queues/cluster-queues/no-such-queue/edit/").status_code == 404


def test_a_priority_class_edit_goes_through_its_diff(client: Client, demo: None) -> None:
    login(client, "admin")
    url = "/queues/priority-classes/training-critical/edit/"
    pc = PriorityClass.objects.get(name="training-critical")
    bad = client.post(
        url, {"value": "lots", "preemption_policy": pc.preemption_policy, "action": "preview"}
    )
    assert bad.status_code == 422
    assert "A whole number, e.g. 1000." in bad.content.decode()
    data = {
        "value": str(pc.value + 1),
        "preemption_policy": pc.preemption_policy,
        "description": pc.description,
        "action": "preview",
    }
    body = client.post(url, data).content.decode()
    assert f"- value: {pc.value}</span>" in body and f"+ value: {pc.value + 1}</span>" in body
    hashes = {
        k: body.split(f'name="{k}" value="')[1].split('"')[0] for k in ("before_hash", "after_hash")
    }
    assert client.post(url, {**data, **hashes, "action": "save"}).status_code == 302
    assert PriorityClass.objects.get(name="training-critical").value == pc.value + 1


def test_an_unknown_preemption_policy_is_marked_on_its_select(client: Client, demo: None) -> None:
    login(client, "admin")
    bad = client.post(
        "/queues/priority-classes/training-critical/edit/",
        {"value": "1000", "preemption_policy": "Sometimes", "action": "preview"},
        headers={"HX-Request": "true"},
    )
    assert bad.status_code == 422
    page = bad.content.decode()
    assert 'name="preemption_policy" aria-invalid="true" aria-describedby="err-preemption"' in page
    assert '<div class="error" id="err-preemption" role="alert">Value' in page


def test_saving_from_the_htmx_form_moves_the_whole_page(client: Client, demo: None) -> None:
    login(client, "admin")
    cq = ClusterQueue.objects.get(name="cq-train")
    url = "/queues/cluster-queues/cq-train/edit/"
    data = form_of(cq, g0f0r0_nominal="10")
    body = client.post(
        url, {**data, "action": "preview"}, headers={"HX-Request": "true"}
    ).content.decode()
    hashes = {
        k: body.split(f'name="{k}" value="')[1].split('"')[0] for k in ("before_hash", "after_hash")
    }
    saved = client.post(url, {**data, **hashes, "action": "save"}, headers={"HX-Request": "true"})
    assert (saved.status_code, saved["HX-Redirect"]) == (204, "/queues/")
    assert "ClusterQueue cq-train saved" in client.get("/queues/").content.decode()


def previewed(client: Client, url: str, data: dict[str, str]) -> dict[str, str]:
    """The form as posted for a save after its preview (with the hashes of the diff)."""
    body = client.post(url, {**data, "action": "preview"}).content.decode()
    hashes = {
        k: body.split(f'name="{k}" value="')[1].split('"')[0] for k in ("before_hash", "after_hash")
    }
    return {**data, **hashes, "action": "save"}


def test_promising_more_than_the_fleet_offers_asks_for_a_tick(client: Client, demo: None) -> None:
    demo_fleet_nodes()  # no node on all-balanced: nothing behind cq-dev's balanced flavor
    login(client, "admin")
    cq = ClusterQueue.objects.get(name="cq-dev")
    url = "/queues/cluster-queues/cq-dev/edit/"
    data = previewed(client, url, form_of(cq, g0f0r1_nominal="10"))  # mig-2g.20gb 8 -> 10
    refused = client.post(url, data)
    body = refused.content.decode()
    assert refused.status_code == 422
    assert "offers 0 behind a100-80gb-balanced; queues would promise 10" in body
    assert "confirm to promise more than exists, or lower them" in body  # the service's
    assert "Reason to promise beyond" not in body  # A100s could offer it in another layout
    assert cq.quota() == ClusterQueue.objects.get(name="cq-dev").quota()
    saved = client.post(url, {**data, "confirm_unbacked": "yes"})
    assert saved.status_code == 302
    key = ("a100-80gb-balanced", "nvidia.com/mig-2g.20gb")
    assert ClusterQueue.objects.get(name="cq-dev").quota()[key] == 10


def test_beyond_what_the_fleet_could_ever_offer_needs_a_reason(client: Client, demo: None) -> None:
    demo_fleet_nodes()  # 40 GPUs in all, 16 of them H100 behind h100-80gb
    login(client, "admin")
    cq = ClusterQueue.objects.get(name="cq-train")
    url = "/queues/cluster-queues/cq-train/edit/"
    # 30 is less than the 40 GPUs of the fleet, but more than its 16 H100 GPUs could be.
    data = previewed(client, url, {**form_of(cq, g0f0r0_nominal="3e1"), "confirm_unbacked": "yes"})
    refused = client.post(url, data).content.decode()
    assert "more than its nodes could ever offer (16 in their best layout)" in refused
    assert "give the reason to promise beyond the fleet" in refused  # the service's words
    assert ClusterQueue.objects.get(name="cq-train").quota()[("h100-80gb", "nvidia.com/gpu")] == 12
    saved = client.post(url, {**data, "override_reason": "capacity arrives next week"})
    assert saved.status_code == 302
    cq.refresh_from_db()
    assert cq.nominal_quota("h100-80gb", "nvidia.com/gpu") == "30"  # one spelling
    saved_row = AuditEvent.objects.filter(event="cluster_queue.saved").latest("pk")
    assert saved_row.new["override_reason"] == "capacity arrives next week"  # in the one row


def test_lowering_a_quota_is_never_held_up(client: Client, demo: None) -> None:
    login(client, "admin")  # no fleet observed at all: every promise is unbacked
    cq = ClusterQueue.objects.get(name="cq-train")
    url = "/queues/cluster-queues/cq-train/edit/"
    assert client.post(
        url, previewed(client, url, form_of(cq, g0f0r0_nominal="6"))
    ).status_code == (302)


def test_a_queues_use_is_kueues_admitted_use_and_its_reservation_beside_it(
    client: Client, platform_admin: User
) -> None:
    """The recorded ClusterQueue borrowing 2 GPUs (Kueue's status verbatim): In use is its
    flavorsUsage (admitted), Reserved its flavorsReservation, and the page says which."""
    from cluster.models import ObservedObject
    from queues.selectors import quota_rows
    from tests.unit.diagnostics.recorded import kueue

    recorded = kueue("clusterqueue-borrowing.json")
    status = recorded["status"]
    # A workload that holds quota while an admission check runs: reserved, not yet in use.
    status["flavorsReservation"][0]["resources"][2]["total"] = "7"
    cq = ClusterQueue.objects.create(
        name="rc-cq-team-b", resource_groups=recorded["spec"]["resourceGroups"]
    )
    rows = {r["resource"]: r for r in quota_rows(cq, status)}
    assert {k: rows["nvidia.com/gpu"][k] for k in ("nominal", "used", "reserved", "borrowed")} == {
        "nominal": "4",
        "used": "6",
        "reserved": "7",
        "borrowed": "2",
    }
    assert (rows["memory"]["used"], rows["memory"]["reserved"]) == ("1Gi", "1Gi")
    ObservedObject.objects.create(
        api_version="kueue.x-k8s.io/v1beta2",
        kind="ClusterQueue",
        name="rc-cq-team-b",
        status=status,
        last_seen=recorded["status"]["conditions"][0]["lastTransitionTime"],
    )
    client.force_login(platform_admin)
    page = client.get("/queues/").content.decode()
    assert '<th scope="col">In use (admitted)</th><th scope="col">Reserved</th>' in page
    assert "What admitted workloads hold (Kueue's <code>flavorsUsage</code>)." in page
    # Not in a cohort: it lends nothing.
    assert (
        '<td data-label="In use">6</td><td data-label="Reserved">7</td>'
        '<td data-label="Borrowed"><span class="tag warn">2</span></td><td data-label="Lent">0</td>'
    ) in page


def hidden(body: str, name: str) -> str:
    return body.split(f'name="{name}" value="')[1].split('"')[0]


def test_a_second_admins_save_on_a_changed_queue_is_refused_and_merged(
    client: Client, demo: None
) -> None:
    """Two admins open cq-train's form at once; the first saves h100's nominal quota 12 ->
    16; the second, who changed only the borrowing limit (and previewed before the first
    saved), is refused with what changed, and the form holds the first's 16 beside the
    second's limit. Saved again, both stand: the second save no longer reverts the first
    (it said "saved" and put 12 back)."""
    login(client, "admin")
    url = "/queues/cluster-queues/cq-train/edit/"
    opened = client.get(url).content.decode()
    base = hidden(opened, "base")
    cq = ClusterQueue.objects.get(name="cq-train")
    first = {**form_of(cq, g0f0r0_nominal="16"), "base": base}
    second = {**form_of(cq, g0f0r0_borrowing="4"), "base": base}
    previewed = client.post(url, {**second, "action": "preview"}).content.decode()
    hashes = {k: hidden(previewed, k) for k in ("before_hash", "after_hash")}
    shown = client.post(url, {**first, "action": "preview"}).content.decode()
    saved = client.post(url, {**first, **{k: hidden(shown, k) for k in hashes}, "action": "save"})
    assert saved.status_code == 302
    refused = client.post(url, {**second, **hashes, "action": "save"})
    assert refused.status_code == 409
    body = refused.content.decode()
    assert "someone saved this ClusterQueue since you opened the form" in body
    assert "nominal quota of nvidia.com/gpu in h100-80gb: 12 → 16" in body
    assert 'name="g0f0r0_nominal" value="16"' in body  # theirs: untouched here
    assert 'name="g0f0r0_borrowing" value="4"' in body  # mine
    stored = ClusterQueue.objects.get(name="cq-train")
    assert stored.quota()[("h100-80gb", "nvidia.com/gpu")] == 16
    assert "borrowingLimit" not in stored.resource_groups[0]["flavors"][0]["resources"][0]
    # Saved again from the merged form (its base is now the stored queue): both stand.
    again = {**form_of(stored, g0f0r0_borrowing="4"), "base": hidden(body, "base")}
    again.update({k: hidden(body, k) for k in hashes}, action="save")
    assert client.post(url, again).status_code == 302
    stored = ClusterQueue.objects.get(name="cq-train")
    resource = stored.resource_groups[0]["flavors"][0]["resources"][0]
    assert (stored.quota()[("h100-80gb", "nvidia.com/gpu")], resource["borrowingLimit"]) == (
        16,
        "4",
    )
    event = AuditEvent.objects.filter(event="cluster_queue.saved").latest("id")
    old = event.old["resource_groups"][0]["flavors"][0]["resources"][0]
    new = event.new["resource_groups"][0]["flavors"][0]["resources"][0]
    assert (old["nominalQuota"], new["nominalQuota"]) == ("16", "16")


def test_a_field_both_admins_changed_is_flagged_with_the_stored_value(
    client: Client, demo: None
) -> None:
    login(client, "admin")
    url = "/queues/cluster-queues/cq-train/edit/"
    base = hidden(client.get(url).content.decode(), "base")
    cq = ClusterQueue.objects.get(name="cq-train")
    first = {**form_of(cq, g0f0r0_nominal="16"), "base": base}
    shown = client.post(url, {**first, "action": "preview"}).content.decode()
    hashes = {k: hidden(shown, k) for k in ("before_hash", "after_hash")}
    assert client.post(url, {**first, **hashes, "action": "save"}).status_code == 302
    refused = client.post(
        url, {**form_of(cq, g0f0r0_nominal="14"), "base": base, "action": "preview"}
    )
    body = refused.content.decode()
    assert refused.status_code == 409
    assert "12 → 16 (you changed it too: yours is in the form)" in body
    assert 'name="g0f0r0_nominal" value="14"' in body
    assert ClusterQueue.objects.get(name="cq-train").quota()[("h100-80gb", "nvidia.com/gpu")] == 16


def test_the_editors_kept_reads_follow_the_queues_and_nodes_they_read(
    client: Client, demo: None
) -> None:
    """The editor keeps what the other queues promise and what the nodes offer behind each
    flavor in the process (``queues.views._KEPT``), under the version of what they read:
    another queue's quota written, a node the poll finds, a node gone, and the page says
    the new figures at once."""
    from django.utils import timezone

    from cluster.models import ObservedNode
    from tests.factories import ObservedNodeFactory

    demo_fleet_nodes()
    login(client, "admin")
    url = "/queues/cluster-queues/cq-train/edit/"

    def said() -> str:
        page = client.get(url).content.decode()
        return (
            page[page.index("offers ") :].split(" behind h100-80gb")[0]
            + page[page.index("queues would promise ") :].split("<")[0]
        )

    assert said() == "offers 16queues would promise 16"
    assert said() == "offers 16queues would promise 16"  # kept: the same figures
    infer = ClusterQueue.objects.get(name="cq-infer")
    groups = infer.resource_groups
    groups[0]["flavors"][0]["resources"][0]["nominalQuota"] = "6"
    ClusterQueue.objects.filter(pk=infer.pk).update(resource_groups=groups)
    assert said() == "offers 16queues would promise 18"
    ObservedNodeFactory(
        name="gpu-h100-03",
        gpu_product="NVIDIA-H100-80GB-HBM3",
        mig_config="all-disabled",
        allocatable={"nvidia.com/gpu": "8"},
    )
    assert said() == "offers 24queues would promise 18"
    ObservedNode.objects.filter(name="gpu-h100-01").update(
        gone_since=timezone.now(), last_changed=timezone.now()
    )
    assert said() == "offers 16queues would promise 18"
