"""Every form answers in the page: refused values are shown next to their fields, a save
after someone else's change says so with the new diff, and a refused request says why; in a
real browser (htmx swaps 4xx answers only because the portal tells it to)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from changes.models import MigChangeRequest, QuotaChangeRequest
from changes.quota import request_quota_change
from queues.models import ClusterQueue
from tenants.models import Namespace, QuotaItem, Team
from tests.e2e.conftest import screenshot
from tests.e2e.test_mig_change_flow import htmx_idle, sign_in
from tests.factories import demo_fleet_nodes

pytestmark = pytest.mark.django_db(transaction=True)

TRAIN_H100 = "#g0f0r0_nominal"
TRAIN_A100 = "#g1f0r0_nominal"
IN_VIEW = """(node) => { const box = node.getBoundingClientRect();
  return box.top >= 0 && box.bottom <= window.innerHeight && box.height > 0; }"""


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        (TRAIN_H100, "16.5", "must be a whole number of nvidia.com/gpu (devices)"),
        (TRAIN_H100, "-1", "must be greater than or equal to 0"),
        (TRAIN_H100, "abc", "'abc' is not a Kubernetes quantity"),
        (TRAIN_A100, "500m", "must be a whole number of nvidia.com/mig-3g.40gb (devices)"),
        ("#g0f0r0_lending", "40", "must be less than or equal to the nominalQuota (12)"),
        ("#id_weight", "-1", "must be greater than or equal to 0"),
    ],
)
def test_a_refused_queue_edit_shows_its_error_next_to_the_field(
    live_server: Any, demo: None, page: Any, field: str, value: str, says: str
) -> None:
    sign_in(page, live_server.url, "admin")
    page.goto(f"{live_server.url}/queues/cluster-queues/cq-train/edit/")
    page.locator(field).fill(value)
    page.get_by_role("button", name="Show the YAML diff").click()
    htmx_idle(page)
    error = page.locator(f"{field}-error")
    expect(error).to_have_text(re.compile(re.escape(says)))
    expect(page.locator(field)).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_role("alert").first).to_contain_text("Not saved")
    assert "resourceGroups[" not in page.content()  # no internal paths for people
    if field == TRAIN_H100 and value == "16.5":
        screenshot(page, "queue-edit-refused")
    assert (
        ClusterQueue.objects.get(name="cq-train").nominal_quota("h100-80gb", "nvidia.com/gpu")
        == "12"
    )


def test_a_queue_save_after_someone_elses_change_is_refused_and_merged(
    live_server: Any, demo: None, page: Any
) -> None:
    """Two admins on one ClusterQueue: the second's save is refused with what the first
    changed, the form keeps the first's field beside the second's edit, and saved again
    both stand (the second's save used to say saved and put the first's value back)."""
    sign_in(page, live_server.url, "admin")
    page.goto(f"{live_server.url}/queues/cluster-queues/cq-train/edit/")
    page.locator(TRAIN_H100).fill("14")
    page.get_by_role("button", name="Show the YAML diff").click()
    htmx_idle(page)
    expect(page.get_by_role("button", name="Save")).to_be_enabled()
    cq = ClusterQueue.objects.get(name="cq-train")  # another admin saves it meanwhile
    cq.fair_sharing_weight = "60"
    cq.save()
    page.get_by_role("button", name="Save").click()
    htmx_idle(page)
    changed = page.locator("#changed-since")
    expect(changed).to_contain_text("someone saved this ClusterQueue since you opened the form")
    expect(changed).to_contain_text("fair-sharing weight: 80 → 60")
    expect(page.locator("#id_weight")).to_have_value("60")  # theirs: not touched here
    expect(page.locator(TRAIN_H100)).to_have_value("14")  # this admin's edit
    screenshot(page, "queue-edit-stale")
    cq.refresh_from_db()
    assert (cq.nominal_quota("h100-80gb", "nvidia.com/gpu"), cq.fair_sharing_weight) == (
        "12",
        "60",
    )
    page.get_by_role("button", name="Save").click()
    page.wait_for_url(f"{live_server.url}/queues/")
    cq.refresh_from_db()
    assert (cq.nominal_quota("h100-80gb", "nvidia.com/gpu"), cq.fair_sharing_weight) == (
        "14",
        "60",
    )


def test_a_refused_priority_class_edit_shows_its_error(
    live_server: Any, demo: None, page: Any
) -> None:
    sign_in(page, live_server.url, "admin")
    page.goto(f"{live_server.url}/queues/priority-classes/training-critical/edit/")
    page.locator("#id_value").fill("ten")
    page.get_by_role("button", name="Show the YAML diff").click()
    htmx_idle(page)
    expect(page.locator("#err-value")).to_have_text("A whole number, e.g. 1000.")


def test_an_absurd_quota_request_is_refused_in_the_page(
    live_server: Any, demo: None, page: Any
) -> None:
    demo_fleet_nodes()
    sign_in(page, live_server.url, "lead-a")
    page.goto(f"{live_server.url}/quota/new/")
    page.get_by_label("Namespace").select_option(label="team-a")
    page.get_by_label("New value").fill("99999999999999999999999")
    page.get_by_label("Reason").fill("a bigger model")
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("alert").first).to_contain_text(
        "The fleet could never offer more than 40 nvidia.com/gpu"
    )
    # the refused field is focused and in view (the same helper as every form's)
    expect(page.get_by_label("New value")).to_be_focused()
    assert page.get_by_label("New value").evaluate(IN_VIEW)
    assert not QuotaChangeRequest.objects.exists()


def test_the_second_decision_on_a_moved_quota_is_refused_as_stale(
    live_server: Any, demo: None, page: Any
) -> None:
    lead = User.objects.get(username="lead-a")
    team_a = Namespace.objects.get(name="team-a")
    request = request_quota_change(
        actor=lead,
        team=Team.objects.get(slug="team-a"),
        kind="namespace",
        namespace=team_a,
        resource="requests.nvidia.com/gpu",
        requested="20",
        reason="deadline",
    )
    sign_in(page, live_server.url, "approver")
    page.goto(f"{live_server.url}/quota/{request.pk}/")
    expect(page.get_by_role("button", name="Approve 16 → 20")).to_be_visible()
    # While the approver reads, the quota goes to 24 (another grant, an admin's edit).
    QuotaItem.objects.filter(namespace=team_a, resource="requests.nvidia.com/gpu").update(hard="24")
    page.get_by_role("button", name="Approve 16 → 20").click()
    expect(page.locator(".messages")).to_contain_text(
        "The quota is now 24 (it was 16 when this was asked): approving would change it "
        "24 → 20, a cut."
    )
    expect(page.get_by_role("button", name="Approve 24 → 20")).to_be_visible()
    assert QuotaItem.objects.get(namespace=team_a, resource="requests.nvidia.com/gpu").hard == "24"
    assert QuotaChangeRequest.objects.get(pk=request.pk).state == "pending"


def test_the_mig_change_form_opened_from_a_link_shows_the_impact_at_once(
    live_server: Any, demo: None, page: Any
) -> None:
    demo_fleet_nodes()
    sign_in(page, live_server.url, "lead-a")
    page.goto(f"{live_server.url}/changes/new/?nodes=gpu-a100-03&target_config=all-balanced")
    assessment = page.locator("#assessment")
    expect(assessment).to_be_visible()
    expect(assessment).to_contain_text("Impact:")
    expect(assessment.locator("table").first).to_contain_text("gpu-a100-03")
    expect(page.get_by_label("Target MIG config")).to_have_value("all-balanced")
    screenshot(page, "change-form-opened-with-impact")


def test_a_mig_change_not_before_a_past_time_is_refused_next_to_the_field(
    live_server: Any, demo: None, page: Any
) -> None:
    demo_fleet_nodes()
    sign_in(page, live_server.url, "lead-a")
    page.goto(f"{live_server.url}/changes/new/?nodes=gpu-a100-03&target_config=all-balanced")
    page.get_by_label("Reason").fill("a test layout for the new model")
    page.get_by_label("Not before (optional)").fill("2001-02-03T04:05")
    page.get_by_role("button", name="Send for approval").click()
    htmx_idle(page)
    error = page.locator("#id_window_start_error")
    expect(error).to_have_text(re.compile(r"2001-02-03 04:05 is in the past"))
    expect(page.get_by_label("Not before (optional)")).to_have_attribute("aria-invalid", "true")
    error.scroll_into_view_if_needed()
    screenshot(page, "change-form-past-window-refused")
    assert not MigChangeRequest.objects.exists()


def test_the_queue_editor_shows_the_fleet_and_asks_before_promising_more(
    live_server: Any, demo: None, page: Any
) -> None:
    demo_fleet_nodes()  # 16 H100 GPUs behind h100-80gb, 40 GPUs in all
    sign_in(page, live_server.url, "admin")
    page.goto(f"{live_server.url}/queues/cluster-queues/cq-train/edit/")
    expect(page.locator("#g0f0r0_capacity")).to_contain_text(
        "offers 16 behind h100-80gb; queues would promise 16"
    )
    page.locator(TRAIN_H100).fill("20")
    page.get_by_role("button", name="Show the YAML diff").click()
    htmx_idle(page)
    expect(page.locator("#g0f0r0_capacity")).to_contain_text("queues would promise 24")
    expect(page.locator("#promise-box")).to_contain_text("24 nvidia.com/gpu on h100-80gb")
    # 24 promised where 16 H100 GPUs exist, and could ever exist: a tick and a reason.
    expect(page.locator("#g0f0r0_capacity")).to_contain_text(
        "more than its nodes could ever offer (16 in their best layout)"
    )
    page.get_by_role("button", name="Save").click()
    htmx_idle(page)
    alert = page.get_by_role("alert").first
    expect(alert).to_contain_text("confirm to promise more than exists")
    expect(alert).to_contain_text("reason to promise beyond the fleet")
    screenshot(page, "queue-edit-promises-more")
    assert ClusterQueue.objects.get(name="cq-train").nominal_quota(
        "h100-80gb", "nvidia.com/gpu"
    ) == ("12")
    page.get_by_label("Promise more than exists").check()
    page.get_by_label("Reason to promise beyond the fleet").fill("two H100 nodes arrive Monday")
    page.get_by_role("button", name="Save").click()
    expect(page).to_have_url(re.compile(r"/queues/$"))
    assert ClusterQueue.objects.get(name="cq-train").nominal_quota(
        "h100-80gb", "nvidia.com/gpu"
    ) == ("20")


def test_all_enabled_is_assessed_as_offering_nothing(
    live_server: Any, demo: None, page: Any
) -> None:
    demo_fleet_nodes()  # two H100 nodes of 8 whole GPUs behind h100-80gb
    sign_in(page, live_server.url, "admin")
    page.goto(f"{live_server.url}/changes/new/?nodes=gpu-h100-01&target_config=all-enabled")
    assessment = page.locator("#assessment")
    expect(assessment).to_contain_text("Impact: Breaks quota")
    expect(assessment).to_contain_text("would offer no GPU at all: MIG mode on with no instance")
    expect(assessment.locator("table").first).to_contain_text("nothing: MIG on, no instance")
    expect(assessment).not_to_contain_text("Needs a drain")
    screenshot(page, "change-form-all-enabled")


def test_a_usage_period_the_page_does_not_offer_is_refused_next_to_it(
    live_server: Any, demo: None, page: Any
) -> None:
    sign_in(page, live_server.url, "lead-a")
    answer = page.goto(f"{live_server.url}/reports/?days=ten")
    assert answer is not None and answer.status == 400
    expect(page.locator("#f-days-error")).to_have_text("Choose a period of 1, 7, 30 or 90 days.")
    expect(page.locator("#f-days")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#f-days")).to_have_value("")  # no period shown as if chosen
    expect(page.get_by_text("Fix the period above to see the usage.")).to_be_visible()
    expect(page.locator("#gpuh-title")).to_have_count(0)
    screenshot(page, "usage-period-refused")
    page.locator("#f-days").select_option("30")  # choosing one shows it
    expect(page).to_have_url(re.compile(r"days=30"))
    expect(page.locator("#gpuh-title")).to_be_visible()
    expect(page.locator("#f-days-error")).to_have_count(0)


def test_a_mig_change_sent_without_a_reason_brings_the_error_into_view(
    live_server: Any, demo: None, page: Any
) -> None:
    """The button is below the impact, far under the reason field: the answer focuses the
    refused field and scrolls it (and its error) into view, not the top of a long form."""
    demo_fleet_nodes()
    sign_in(page, live_server.url, "lead-a")
    page.goto(f"{live_server.url}/changes/new/?nodes=gpu-a100-03&target_config=all-balanced")
    expect(page.locator("#assessment")).to_be_visible()
    send = page.get_by_role("button", name="Send for approval")
    send.scroll_into_view_if_needed()
    reason = page.get_by_label("Reason")
    assert not reason.evaluate(IN_VIEW)  # the reason field is out of view when sending
    send.click()
    htmx_idle(page)
    error = page.locator("#id_reason_error")
    expect(error).to_be_visible()
    expect(reason).to_have_attribute("aria-invalid", "true")
    expect(reason).to_be_focused()
    assert reason.evaluate(IN_VIEW)
    assert error.evaluate(IN_VIEW)
    assert not MigChangeRequest.objects.exists()
