"""Changes of a cluster's MIG policy (governed per-claim MIG) through their one door:
platform admins propose, approvers (never the proposer) decide on a fresh assessment, each
step audited with its actor; field errors write nothing; the approved policy is rendered as
DeviceClasses per profile and a quota per namespace. The fleet: the recorded slices
(tests/data/dra: two whole H100s, an A100 partitionable into two 3g.40gb devices)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection
from django.http import Http404
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from changes.mig_policy import (
    Claim,
    approve_mig_policy_change,
    assess_policy,
    offered_profiles,
    propose_mig_policy,
    reject_mig_policy_change,
)
from changes.models import MigPolicyChange
from cluster import dra
from cluster.decode import claim_requests
from cluster.models import Cluster, ObservedObject, ObservedResourceClaim
from cluster.services import settings_cluster
from diagnostics.explain import explain_claims
from diagnostics.explainer import claim_verdicts
from loop.desired import collect_manifests
from loop.fetch import DraListing
from loop.write import write_dra
from portal.models import AuditEvent, Notification
from portal.vocabulary.errors import DomainError
from tenants.mig_policy import (
    GENERIC_MIG_CLASS,
    claim_devices,
    devices_key,
    profile_class,
    selects_mig,
)
from tenants.models import MigGrant, MigPolicy
from tenants.services import mig_policy_of
from tests.factories import NamespaceFactory, ObservedPodFactory, UserFactory
from tests.support import bearer
from tests.unit.queues.test_kueue_config import CONFIG, kueue_on_the_recorded_dra_cluster

pytestmark = pytest.mark.django_db
RECORDED = Path(__file__).resolve().parents[2] / "data" / "dra"
THREE_G = profile_class("3g.40gb")
GRANT = [{"namespace": "team-a-dra", "profile": "3g.40gb", "devices": 1}]


def recorded(name: str) -> Any:
    return json.loads((RECORDED / name).read_text())


@pytest.fixture
def fleet(team_a: Any) -> Any:
    """The recorded classes and slices polled, and team-a's namespace on the cluster."""
    write_dra(
        DraListing(recorded("deviceclasses.json"), recorded("resourceslices.json"), []),
        cluster_id=settings_cluster().pk,
        now=dt.datetime(2026, 12, 6, 10, 0, tzinfo=dt.UTC),
    )
    return NamespaceFactory(name="team-a-dra", team=team_a)


def claim_row(name: str, device_class: str, *, allocated: bool = True) -> ObservedResourceClaim:
    return ObservedResourceClaim.objects.create(
        cluster=settings_cluster(),
        namespace="team-a-dra",
        name=name,
        state="allocated" if allocated else "pending",
        requests=[{"name": "gpu", "device_class": device_class, "mode": "ExactCount", "count": 1}],
        created_at=timezone.now(),
        last_changed=timezone.now(),
    )


def propose(actor: Any, grants: list[dict[str, Any]] = GRANT) -> MigPolicyChange:
    return propose_mig_policy(
        actor=actor,
        cluster=settings_cluster(),
        governed=True,
        grants=grants,
        reason="3g.40gb for training",
    )


def test_the_profiles_offered_are_the_published_mig_devices(fleet: Any) -> None:
    assert offered_profiles(settings_cluster()) == ["3g.40gb"]


def test_only_platform_admins_propose(
    fleet: Any, team_a_admin: Any, approver: Any, team_a_member: Any
) -> None:
    for who in (team_a_admin, approver, team_a_member):
        with pytest.raises(PermissionDenied):
            propose(who)
    assert not MigPolicyChange.objects.on_every_cluster().exists()


def test_wrong_grants_are_field_errors_and_write_nothing(fleet: Any, platform_admin: Any) -> None:
    with pytest.raises(ValidationError) as refused:
        propose_mig_policy(
            actor=platform_admin,
            cluster=settings_cluster(),
            governed=True,
            grants=[
                {"namespace": "nobody", "profile": "3g.40gb", "devices": 1},
                {"namespace": "team-a-dra", "profile": "1g.10gb", "devices": 1},
                {"namespace": "team-a-dra", "profile": "big", "devices": -1},
            ],
            reason=" ",
        )
    assert refused.value.message_dict == {
        "grants[0].namespace": ["The portal manages no namespace 'nobody' on this cluster."],
        "grants[1].profile": [
            "The cluster's GPUs publish no MIG device of profile 1g.10gb through DRA "
            "(they offer: 3g.40gb)."
        ],
        "grants[2].profile": ["'big' is not a MIG profile (such as 3g.40gb or 1g.10gb+me)."],
        "grants[2].devices": ["A whole number of devices, 0 or more."],
        "reason": ["Say why the policy changes (the approver reads it)."],
    }
    assert not MigPolicyChange.objects.on_every_cluster().exists()
    assert not AuditEvent.objects.filter(event__startswith="mig_policy").exists()


def test_an_approved_change_writes_the_policy_the_loop_renders(
    fleet: Any, platform_admin: Any, approver: Any
) -> None:
    change = propose(platform_admin)
    assert change.state == "pending"
    asked = AuditEvent.objects.get(event="mig_policy_change.requested")
    assert asked.actor_id == platform_admin.pk
    assert mig_policy_of(settings_cluster()) == (False, [])  # nothing until approved

    approve_mig_policy_change(request_id=change.pk, approver=approver, comment="fine")
    change.refresh_from_db()
    assert (change.state, change.decided_by_id) == ("approved", approver.pk)
    assert mig_policy_of(settings_cluster()) == (True, GRANT)
    policy_set = AuditEvent.objects.get(event="mig_policy.set")
    assert policy_set.actor_id == approver.pk
    assert policy_set.new == {"governed": True, "grants": GRANT}

    manifests = collect_manifests(cluster=settings_cluster())
    (device_class,) = [m for m in manifests if m["kind"] == "DeviceClass"]
    assert device_class["metadata"]["name"] == "mig-3g.40gb.quartermaster.io"
    assert device_class["spec"]["selectors"] == [
        {
            "cel": {
                "expression": "device.driver == 'gpu.nvidia.com' && "
                "device.attributes['gpu.nvidia.com'].type == 'mig' && "
                "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'"
            }
        }
    ]
    (quota,) = [m for m in manifests if m["metadata"]["name"] == "team-a-dra-mig-policy"]
    # the recorded mig.nvidia.com class selects MIG devices: closed, like the generic one
    assert quota["spec"]["hard"] == {
        devices_key(THREE_G): "1",
        devices_key(GENERIC_MIG_CLASS): "0",
    }
    kinds = [m["kind"] for m in manifests]
    assert kinds.index("DeviceClass") < kinds.index("ResourceQuota")


def test_nobody_approves_their_own_proposal(fleet: Any, platform_admin: Any) -> None:
    change = propose(platform_admin)
    with pytest.raises(DomainError) as refused:
        approve_mig_policy_change(request_id=change.pk, approver=platform_admin)
    assert refused.value.code == "self_approval"
    assert not MigPolicy.objects.on_every_cluster().exists()


def test_an_approval_on_a_stale_assessment_is_refused_and_the_assessment_renewed(
    fleet: Any, platform_admin: Any, approver: Any
) -> None:
    change = propose(platform_admin)
    assert change.assessment["cut"] == []
    claim_row("late-3g-a", THREE_G)
    claim_row("late-3g-b", THREE_G, allocated=False)
    with pytest.raises(DomainError) as refused:
        approve_mig_policy_change(request_id=change.pk, approver=approver)
    assert refused.value.code == "stale_assessment"
    change.refresh_from_db()
    assert change.state == "pending"
    assert change.assessment["cut"] == [
        {
            "namespace": "team-a-dra",
            "claim": "late-3g-b",
            "device_class": THREE_G,
            "allocated": False,
            "allowed": 1,
        }
    ]
    assert AuditEvent.objects.filter(event="mig_policy_change.reassessed").count() == 1
    approve_mig_policy_change(request_id=change.pk, approver=approver)
    assert MigGrant.objects.count() == 1


def test_a_rejection_says_why(fleet: Any, platform_admin: Any, approver: Any) -> None:
    change = propose(platform_admin)
    with pytest.raises(ValidationError):
        reject_mig_policy_change(request_id=change.pk, approver=approver, comment="")
    reject_mig_policy_change(request_id=change.pk, approver=approver, comment="not now")
    change.refresh_from_db()
    assert change.state == "rejected"
    assert not MigPolicy.objects.on_every_cluster().exists()


def test_a_second_proposal_waits_for_the_first(fleet: Any, platform_admin: Any) -> None:
    propose(platform_admin)
    with pytest.raises(ValidationError):
        propose(platform_admin, [{"namespace": "team-a-dra", "profile": "3g.40gb", "devices": 2}])


def test_leads_and_members_cannot_read_or_decide_a_change(
    fleet: Any, platform_admin: Any, team_a_admin: Any
) -> None:
    change = propose(platform_admin)
    other: Any = UserFactory(username="erin")
    for who in (team_a_admin, other):
        with pytest.raises(Http404):
            approve_mig_policy_change(request_id=change.pk, approver=who)


def test_the_impact_names_the_claims_cut_and_the_pods_that_could_start() -> None:
    before = (True, [{"namespace": "ns", "profile": "3g.40gb", "devices": 2}])
    after = (True, [{"namespace": "ns", "profile": "1g.10gb", "devices": 1}])
    claims = [
        Claim("ns", "old-3g", True, {THREE_G: 1}),
        Claim("ns", "generic", False, {GENERIC_MIG_CLASS: 1}),
        Claim("other", "free", True, {THREE_G: 1}),
    ]
    impact = assess_policy(
        before=before,
        after=after,
        profiles=["3g.40gb", "1g.10gb"],
        namespaces=["ns", "other"],
        claims=claims,
        waiting=[("ns", "trainer", "tpl"), ("other", "x", "tpl")],
    )
    # every namespace of a governed cluster is held: "other" is granted nothing
    assert [(c["claim"], c["device_class"], c["allowed"]) for c in impact.cut] == [
        ("old-3g", THREE_G, 0),
        ("generic", GENERIC_MIG_CLASS, 0),
        ("free", THREE_G, 0),
    ]
    assert impact.could_start == [
        {
            "namespace": "ns",
            "pod": "trainer",
            "template": "tpl",
            "classes": [profile_class("1g.10gb")],
        }
    ]
    # not governed after: nothing is cut, every class opens
    ungoverned = assess_policy(
        before=before,
        after=(False, []),
        profiles=["3g.40gb"],
        namespaces=["ns"],
        claims=claims,
        waiting=[("ns", "trainer", "tpl")],
    )
    assert ungoverned.cut == [] and ungoverned.could_start[0]["pod"] == "trainer"
    assert impact.fingerprint != ungoverned.fingerprint


def test_a_waiting_pod_could_start_only_when_the_class_its_template_asks_for_opens() -> None:
    """Where the poll read the pod's ResourceClaimTemplate, the pod is listed only when every
    class it asks for has room under the new policy and one had none under the old; one
    whose template was not read is listed on its namespace's opened classes, as before."""
    before = (True, [{"namespace": "ns", "profile": "3g.40gb", "devices": 1}])
    after = (
        True,
        [
            {"namespace": "ns", "profile": "3g.40gb", "devices": 1},
            {"namespace": "ns", "profile": "1g.10gb", "devices": 2},
        ],
    )
    one_g, three_g = profile_class("1g.10gb"), profile_class("3g.40gb")
    impact = assess_policy(
        before=before,
        after=after,
        profiles=["3g.40gb", "1g.10gb"],
        namespaces=["ns"],
        claims=[Claim("ns", "running-3g", True, {three_g: 1})],
        waiting=[
            ("ns", "embedder", "tpl-1g"),  # asks for 1g.10gb: opened
            ("ns", "trainer", "tpl-3g"),  # asks for 3g.40gb: still full
            ("ns", "both", "tpl-both"),  # 1g.10gb and 3g.40gb: one still full
            ("ns", "generic", "tpl-generic"),  # the driver's own class: still closed
            ("ns", "unread", "tpl-unread"),  # no template read: the namespace's rule
        ],
        asks={
            ("ns", "tpl-1g"): [one_g],
            ("ns", "tpl-3g"): [three_g],
            ("ns", "tpl-both"): [one_g, three_g],
            ("ns", "tpl-generic"): [GENERIC_MIG_CLASS],
        },
    )
    assert [(c["pod"], c["classes"]) for c in impact.could_start] == [
        ("embedder", [one_g]),
        ("unread", [one_g]),
    ]


def test_a_first_available_claim_counts_as_the_real_quota_charges_it() -> None:
    """The real API server charges a firstAvailable request, per class, the largest count
    of its alternatives (recorded): the policy counts a claim's devices the same way."""
    real = recorded("first-available-quota.json")
    used = {
        resource.removesuffix(".deviceclass.resource.k8s.io/devices"): int(amount)
        for resource, amount in real["quota_used_after_c1"].items()
    }
    assert (
        claim_devices(claim_requests(real["claim"]["spec"]))
        == used
        == {
            "class-a": 3,
            "class-b": 2,
        }
    )


def test_a_class_selecting_mig_devices_is_closed_and_one_of_whole_gpus_is_not() -> None:
    mig = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"
    gpu = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
    assert selects_mig([mig], ["3g.40gb"])
    assert not selects_mig([gpu], ["3g.40gb"])
    assert not selects_mig([], ["3g.40gb"])


def test_the_policy_over_the_api_with_its_permissions_and_redaction(
    client: Client,
    fleet: Any,
    platform_admin: Any,
    approver: Any,
    team_a_admin: Any,
    team_b_member: Any,
) -> None:
    NamespaceFactory(name="team-b-dra", team=team_b_member.memberships.get().team)
    grants = [*GRANT, {"namespace": "team-b-dra", "profile": "3g.40gb", "devices": 1}]
    body = {"cluster": settings_cluster().name, "governed": True, "grants": grants, "reason": "x"}
    post = "/api/v1/mig-policy-changes/"
    asked = client.post(post, body, content_type="application/json", headers=bearer("alice"))
    assert asked.status_code == 403, asked.json()
    wrong = client.post(
        post,
        {**body, "grants": [{"namespace": "nobody", "profile": "3g.40gb", "devices": 1}]},
        content_type="application/json",
        headers=bearer("padmin"),
    )
    assert wrong.status_code == 400 and "grants[0].namespace" in wrong.json()["errors"]
    made = client.post(post, body, content_type="application/json", headers=bearer("padmin"))
    assert made.status_code == 201, made.json()
    change = made.json()
    assert client.get(f"{post}{change['id']}/", headers=bearer("alice")).status_code == 404
    assert client.get(post, headers=bearer("alice")).json()["results"] == []
    url = f"{post}{change['id']}/approve/"
    own = client.post(url, {}, content_type="application/json", headers=bearer("padmin"))
    assert own.status_code == 409 and own.json()["code"] == "self_approval"
    done = client.post(
        url,
        {"fingerprint": change["fingerprint"]},
        content_type="application/json",
        headers=bearer("dana"),
    )
    assert done.status_code == 200 and done.json()["state"] == "approved", done.json()
    (seen,) = client.get("/api/v1/mig-policies/", headers=bearer("alice")).json()["results"]
    assert seen["governed"] is True
    assert seen["grants"] == GRANT  # team-b's namespace never named to team-a's lead
    assert seen["pending_change"] is None
    (everything,) = client.get("/api/v1/mig-policies/", headers=bearer("dana")).json()["results"]
    assert [g["namespace"] for g in everything["grants"]] == ["team-a-dra", "team-b-dra"]


def test_the_policy_page_shows_the_mode_and_only_the_leads_team(
    client: Client, fleet: Any, platform_admin: Any, approver: Any, team_a_admin: Any, team_b: Any
) -> None:
    NamespaceFactory(name="team-b-dra", team=team_b)
    change = propose(
        platform_admin, [*GRANT, {"namespace": "team-b-dra", "profile": "3g.40gb", "devices": 2}]
    )
    client.force_login(approver)
    page = client.get("/changes/mig-policy/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "Not governed" in text and "team-b-dra" in text
    assert f"mig-policy-change-{change.pk}-decide" in text
    approve_mig_policy_change(request_id=change.pk, approver=approver)
    client.force_login(team_a_admin)
    text = client.get("/changes/mig-policy/").content.decode()
    assert "Governed per claim" in text and "team-a-dra" in text
    assert "team-b" not in text
    assert "mig-policy-form" not in text  # leads read; admins propose


def _grow(start: int, size: int, team: Any) -> None:
    """``size`` more namespaces of ``team`` granted 3g.40gb, and as many claims."""
    policy, _ = MigPolicy.objects.get_or_create(cluster=settings_cluster(), governed=True)
    for index in range(start, start + size):
        namespace: Any = NamespaceFactory(name=f"grown-{index}", team=team)
        MigGrant.objects.create(policy=policy, namespace=namespace, profile="3g.40gb", devices=1)
        claim_row(f"grown-claim-{index}", THREE_G)


def test_the_policy_page_reads_a_fixed_number_of_queries(
    client: Client, fleet: Any, platform_admin: Any, approver: Any, team_a_admin: Any
) -> None:
    def count(user: Any) -> int:
        client.force_login(user)
        with CaptureQueriesContext(connection) as queries:
            assert client.get("/changes/mig-policy/").status_code == 200
        return len(queries)

    team = team_a_admin.memberships.get().team
    _grow(0, 3, team)
    small = [count(u) for u in (platform_admin, approver, team_a_admin)]
    _grow(3, 40, team)
    large = [count(u) for u in (platform_admin, approver, team_a_admin)]
    assert "grown-42" in client.get("/changes/mig-policy/").content.decode()
    assert large == small, (small, large)


def test_a_pod_waiting_for_a_claim_the_policy_refused_is_told_what_to_ask_for() -> None:
    def said(*classes: str) -> Any:
        verdict = dra.ClaimVerdict("", dra.POLICY, THREE_G if classes else "", classes=classes)
        return explain_claims("ns", "pod", [("tpl", verdict)], "", [])

    room = said(f"{THREE_G}=0/1")
    assert room.cause == (
        f"Namespace ns's MIG policy on this cluster allows claims of {THREE_G} only "
        f"({THREE_G}: 0 of 1 in use): the API server refuses the claim the pod asks for from "
        "its template tpl, so its class is one the policy closes (the driver's mig.nvidia.com, "
        "a profile not granted)."
    )
    assert room.next_step == (
        f"To start it, use a granted class ({THREE_G}) in the template, or ask for the "
        "profile: a platform admin proposes it on the MIG policy page and an approver decides."
    )
    assert "or of a granted one used up" in said(f"{THREE_G}=1/1").cause
    nothing = said()
    assert nothing.cause.startswith("Namespace ns's MIG policy on this cluster grants it no MIG")
    assert nothing.next_step.startswith("To start it, ask for the profile")


def test_the_proposer_is_told_of_the_decision_without_any_team_named(
    fleet: Any, platform_admin: Any, approver: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        change = propose(platform_admin)
    with django_capture_on_commit_callbacks(execute=True):
        approve_mig_policy_change(request_id=change.pk, approver=approver)
    told = Notification.objects.get(event="mig_policy_change.approved")
    assert (told.user, told.kind, told.url) == (
        platform_admin,
        "decision",
        "http://127.0.0.1:8000/changes/mig-policy/",
    )
    assert "team-a" not in told.title + told.text and not told.team


def test_the_page_warns_when_kueue_maps_none_of_the_profile_classes(
    client: Client, fleet: Any, platform_admin: Any, approver: Any
) -> None:
    kueue_on_the_recorded_dra_cluster(CONFIG)
    approve_mig_policy_change(request_id=propose(platform_admin).pk, approver=approver)
    client.force_login(approver)
    text = client.get("/changes/mig-policy/").content.decode()
    assert f"maps none of <code>{THREE_G}</code> to a resource" in text
    mapped = CONFIG + f"  - name: dra.nvidia.com/mig-3g\n    deviceClassNames: [{THREE_G}]\n"
    kueue_on_the_recorded_dra_cluster(mapped)
    assert "maps none of" not in client.get("/changes/mig-policy/").content.decode()


def test_a_change_granting_a_namespace_deleted_since_is_not_approved(
    fleet: Any, platform_admin: Any, approver: Any
) -> None:
    change = propose(platform_admin)
    fleet.delete()
    with pytest.raises(DomainError) as refused:
        approve_mig_policy_change(request_id=change.pk, approver=approver)
    assert refused.value.code == "target_deleted"
    assert not MigPolicy.objects.on_every_cluster().exists()


def test_a_proposal_waits_in_the_approvers_workspace_and_navigation(
    fleet: Any, platform_admin: Any, approver: Any
) -> None:
    """A proposed change of the policy counts among the decisions waiting, on every page's
    navigation and in the workspace, which links the policy page; not for its proposer."""
    propose(platform_admin)
    client = Client()
    client.force_login(approver)
    page = client.get("/workspace/").content.decode()
    assert 'id="decisions-count">1<' in page
    assert 'href="/changes/mig-policy/">1 proposed change of a cluster\'s MIG policy' in page
    client.force_login(platform_admin)
    own = client.get("/workspace/").content.decode()
    assert 'id="decisions-count">0<' in own and "1 request of yours waits" in own


def _template(cluster: Any, name: str, device_class: str) -> None:
    """A ResourceClaimTemplate of team-a-dra as the poll keeps it (its claim's spec)."""
    claim = {
        "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}
    }
    ObservedObject.objects.create(
        cluster=cluster,
        api_version="resource.k8s.io/v1",
        kind="ResourceClaimTemplate",
        namespace="team-a-dra",
        name=name,
        spec={"spec": {"spec": claim}, "metadata": {"labels": {}}},
        last_seen=timezone.now(),
    )


def test_a_refused_templated_claim_is_told_the_one_cause_its_template_shows() -> None:
    """The explainer reads the template the pod's claim comes from (on the pod's cluster):
    a class the policy closes, or a granted class used up, whichever the template asks for;
    a template not read names both causes; a granted class with room is not the policy."""
    cluster = settings_cluster()
    other = Cluster.objects.create(name="inference", display_name="Inference", connection="token")
    policy_quota = ObservedObject.objects.create(
        cluster=cluster,
        api_version="v1",
        kind="ResourceQuota",
        namespace="team-a-dra",
        name="team-a-dra-mig-policy",
        status={
            "hard": {devices_key(THREE_G): "1", devices_key(GENERIC_MIG_CLASS): "0"},
            "used": {devices_key(THREE_G): "1"},
        },
        last_seen=timezone.now(),
    )
    _template(cluster, "generic", GENERIC_MIG_CLASS)
    _template(cluster, "granted", THREE_G)
    _template(other, "elsewhere", GENERIC_MIG_CLASS)  # another cluster's: not this pod's
    pods = [
        ObservedPodFactory(
            namespace="team-a-dra",
            name=f"serve-{template}",
            phase="Pending",
            resource_claims=[{"name": "gpu", "claim": "", "template": template}],
        )
        for template in ("generic", "granted", "elsewhere")
    ]

    def said(pod: Any) -> Any:
        (verdict,) = claim_verdicts([pod], cluster.pk).get((pod.namespace, pod.name), [])
        return explain_claims(pod.namespace, pod.name, [verdict], "", [])

    closed, used_up, unread = (said(p) for p in pods)
    assert (closed.cause, closed.next_step) == (
        f"Namespace team-a-dra's MIG policy on this cluster closes device class "
        f"{GENERIC_MIG_CLASS}, which the pod's template generic asks for (it grants {THREE_G} "
        "only): the API server refuses the claim.",
        f"To start it, use a granted class ({THREE_G}) in the template, or ask for the profile: "
        "a platform admin proposes it on the MIG policy page and an approver decides.",
    )
    assert (used_up.cause, used_up.next_step) == (
        "Namespace team-a-dra's MIG policy on this cluster grants the class the pod's template "
        f"granted asks for, and it is used up ({THREE_G}: 1 of 1 in use): the API server "
        "refuses the claim until one of the namespace's claims of it is released.",
        f"It is made when a claim of namespace team-a-dra on {THREE_G} is released; to have "
        "more at once, ask for a larger grant: a platform admin proposes it on the MIG policy "
        "page and an approver decides.",
    )
    assert "or of a granted one used up" in unread.cause
    # With room in the grant, the policy refuses nothing of the granted template.
    policy_quota.status["used"] = {devices_key(THREE_G): "0"}
    policy_quota.save()
    assert (pods[1].namespace, pods[1].name) not in claim_verdicts([pods[1]], cluster.pk)
