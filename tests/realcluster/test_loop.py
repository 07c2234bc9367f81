"""The portal's loop against a real Kubernetes control plane and real Kueue, as the
least-privilege ServiceAccount: every demo object applied, a second apply changing nothing,
the poll reading nodes, Kueue's queues and workloads (positions from the visibility API), and
hand edits seen as drift."""

from __future__ import annotations

from typing import Any

import pytest

from cluster.connection import REVIEW_NAMESPACE, needed_rules
from cluster.discovery import compare_rules
from cluster.models import AppliedObject, Drift, ObservedNode, ObservedWorkload
from kube import Gateway, ObjectRef, connect
from loop.apply import apply_desired_state
from loop.desired import collect_manifests
from loop.poll import poll_cluster
from queues.models import ClusterQueue
from queues.observed import first_in_line
from tests.realcluster.kit import RealCluster, need_kit
from tests.realcluster.player import Kubelet
from tests.support import wait_for

need_kit()
pytestmark = pytest.mark.django_db

QUOTA = ObjectRef("v1", "ResourceQuota", "team-a-gpu-quota", "team-a")


def hands(real_cluster: RealCluster, manager: str = "kubectl-edit") -> Gateway:
    """A person with the cluster's admin credential (not the portal)."""
    return connect(kubeconfig=str(real_cluster.kubeconfig), field_manager=manager)


def job(
    name: str, namespace: str, queue: str, gpus: int, *, parallelism: int = 1
) -> dict[str, Any]:
    """A Job as a team submits it to Kueue (created suspended; Kueue unsuspends it)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"kueue.x-k8s.io/queue-name": queue},
        },
        "spec": {
            "parallelism": parallelism,
            "completions": parallelism,
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.example/train:1",
                            "resources": {
                                "requests": {"nvidia.com/gpu": str(gpus)},
                                "limits": {"nvidia.com/gpu": str(gpus)},
                            },
                        }
                    ],
                }
            },
        },
    }


def stamps(gateway: Gateway) -> dict[str, tuple[str, int, list[str]]]:
    """Each desired object's resourceVersion, generation and the times of the portal's own
    writes (managedFields): a write by the portal changes all three; Kueue writing a queue's
    status moves the resourceVersion alone."""
    found = {}
    for manifest in collect_manifests():
        meta = gateway.get(ObjectRef.of(manifest))["metadata"]
        found[f"{manifest['kind']} {meta.get('namespace', '')}/{meta['name']}"] = (
            meta["resourceVersion"],
            meta.get("generation", 0),
            [f.get("time", "") for f in meta["managedFields"] if f["manager"] == "quartermaster"],
        )
    return found


def test_every_demo_object_applies_and_a_second_apply_changes_no_resource_version(
    real_portal: Gateway, real_cluster: RealCluster
) -> None:
    applied = AppliedObject.objects.filter(outcome="applied")
    assert applied.count() == len(collect_manifests()) > 20
    before = stamps(hands(real_cluster))
    again = apply_desired_state(gateway=real_portal, full=True)
    assert not again.failed and not again.conflicts, again
    after = stamps(hands(real_cluster))
    moved = {name for name in before if before[name][0] != after[name][0]}
    # Only an object whose status another writer updated meanwhile may have a new version.
    assert {name: after[name][1:] for name in after} == {name: before[name][1:] for name in before}
    assert moved <= {n for n in before if n.startswith(("ClusterQueue ", "LocalQueue "))}, moved


def test_the_poll_reads_nodes_queues_workloads_and_positions(
    real_portal: Gateway, real_cluster: RealCluster, kubelet: Kubelet
) -> None:
    admin = hands(real_cluster, "kubectl-create")
    for name, gpus in [("rc-poll-run", 8), ("rc-poll-wait-1", 8), ("rc-poll-wait-2", 8)]:
        admin.apply(job(name, "team-a", "team-a-train", gpus))
    try:
        wait_for(
            lambda: (
                len(
                    [
                        w
                        for w in real_portal.list(
                            "kueue.x-k8s.io/v1beta2", "Workload", namespace="team-a"
                        )
                        if (w.get("status") or {}).get("conditions")
                    ]
                )
                >= 3
            ),
            timeout=30,
            what="Kueue to look at the three Jobs",
        )
        run = poll_cluster(gateway=real_portal)
        assert run.ok, run.error
        assert run.nodes == 5
        nodes = {n.name: n for n in ObservedNode.objects.on_every_cluster()}
        assert sorted(nodes) == [
            "gpu-a100-01",
            "gpu-a100-02",
            "gpu-a100-03",
            "gpu-h100-01",
            "gpu-h100-02",
        ]
        rows = {
            w.name.rsplit("-", 1)[0].removeprefix("job-"): w
            for w in ObservedWorkload.objects.on_every_cluster().filter(
                namespace="team-a", name__startswith="job-rc-poll-"
            )
        }
        # cq-train lends 16 H100 GPUs: two of the 8-GPU Jobs are admitted, the third waits
        # first in line, with Kueue's own words
        states = {name: (w.admitted, w.message) for name, w in rows.items()}
        assert sorted(w.admitted for w in rows.values()) == [False, True, True], states
        (pending,) = [w for w in rows.values() if not w.admitted]
        assert pending.message == (
            "couldn't assign flavors to pod set main: insufficient unused quota for "
            "nvidia.com/gpu in flavor h100-80gb, 8 more needed"
        ), states
        assert pending.position == 0
        assert ClusterQueue.objects.filter(name="cq-train").exists()
        # The Queues page's line of cq-train with its cohort open (its queues named): real
        # Kueue names no ClusterQueue on a Workload it has not reserved quota for, so the
        # line finds it through the LocalQueue it names, as every queue's line does
        assert pending.cluster_queue == ""
        cluster_id = pending.cluster_id
        some = first_in_line(3, cluster_id=cluster_id, queues={"cq-train"})
        every = first_in_line(3, cluster_id=cluster_id)
        assert some["cq-train"][0].pk == pending.pk
        assert [(w.pk, w.waiting_in_queue) for w in some["cq-train"]] == [
            (w.pk, w.waiting_in_queue) for w in every["cq-train"]
        ]
    finally:
        for name in ("rc-poll-run", "rc-poll-wait-1", "rc-poll-wait-2"):
            real_cluster.remove_job("team-a", name)


def test_a_hand_edit_and_a_deleted_object_are_drift(
    real_portal: Gateway, real_cluster: RealCluster
) -> None:
    admin = hands(real_cluster)
    lq = ObjectRef("kueue.x-k8s.io/v1beta2", "LocalQueue", "dev-test", "team-dev")
    admin.merge_patch(QUOTA, {"spec": {"hard": {"pods": "500"}}})
    admin.delete(lq)
    try:
        poll_cluster(gateway=real_portal)
        open_drift = {
            (d.kind, d.subject, d.field): (d.desired, d.observed)
            for d in Drift.objects.on_every_cluster()
            .filter(resolved_at__isnull=True)
            .exclude(kind="mig_layout")
        }
        assert open_drift == {
            ("object", "ResourceQuota team-a/team-a-gpu-quota", "spec.hard.pods"): ("50", "500"),
            ("missing", "LocalQueue team-dev/dev-test", ""): ("present", "(absent)"),
        }
    finally:
        admin.merge_patch(QUOTA, {"spec": {"hard": {"pods": "50"}}})
        apply_desired_state(gateway=real_portal, full=True)


def test_the_connection_test_finds_the_shipped_role_complete_on_a_real_api_server(
    real_gateway: Gateway,
) -> None:
    """The portal's ServiceAccount, bound to the ClusterRole it ships and nothing else, as the
    real API server's SelfSubjectRulesReview describes it: every needed rule granted, the
    one limited to a named object (Kueue's ConfigMap) counted as granted, and a broader
    need on that resource (any ConfigMap) not."""
    review = real_gateway.rules_review(REVIEW_NAMESPACE)
    checks = compare_rules(needed_rules(), review)
    assert checks and [c for c in checks if not c.allowed] == []
    named = [r for r in review["resourceRules"] if "configmaps" in (r.get("resources") or ())]
    assert [r.get("resourceNames") for r in named] == [["kueue-manager-config"]]
    any_configmap = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]
    (check,) = compare_rules(any_configmap, review)
    assert check.missing == ("get",)


def _polled_again(gateway: Gateway) -> dict[str, tuple[str, Any, bool]]:
    """The rows of the test's Workloads after a poll: their Job's name -> (what the row was
    decoded from, when it last changed, admitted)."""
    run = poll_cluster(gateway=gateway)
    assert run.ok, run.error
    return {
        _job_of(w.name): (w.decoded_from, w.last_changed, w.admitted)
        for w in ObservedWorkload.objects.on_every_cluster().filter(name__startswith=AGAIN)
    }


def _listed(gateway: Gateway) -> dict[str, tuple[str, bool]]:
    """The test's Workloads as real Kueue has them: their Job's name -> (resourceVersion,
    admitted)."""
    return {
        _job_of(w["metadata"]["name"]): (
            w["metadata"]["resourceVersion"],
            any(
                c["type"] == "Admitted" and c["status"] == "True"
                for c in (w.get("status") or {}).get("conditions") or []
            ),
        )
        for w in gateway.list("kueue.x-k8s.io/v1beta2", "Workload", namespace="team-a")
        if w["metadata"]["name"].startswith(AGAIN)
    }


def _job_of(workload: str) -> str:
    return workload.removeprefix("job-").rsplit("-", 1)[0]


AGAIN = "job-rc-again-"


def test_a_second_poll_decodes_again_only_the_workloads_kueue_changed(
    real_portal: Gateway, real_cluster: RealCluster, kubelet: Kubelet
) -> None:
    """Real Kueue admits the waiting Job once a running one is gone: the poll after decodes
    that Workload again (admitted, its new version noted), drops the gone one, and leaves
    the row of a Workload real Kueue did not touch as it was (its version, its time). Real
    Kueue may write the running one's status meanwhile (its new version is then noted)."""
    admin = hands(real_cluster, "kubectl-create")
    names = ("rc-again-a", "rc-again-b", "rc-again-c")
    for name in names:
        admin.apply(job(name, "team-a", "team-a-train", 8))
    try:
        wait_for(  # cq-train has 16 H100 GPUs: two of the 8-GPU Jobs are admitted
            lambda: sorted(a for _, a in _listed(real_portal).values()) == [False, True, True],
            timeout=60,
            what="Kueue to admit two of the three Jobs",
        )
        before, first = _listed(real_portal), _polled_again(real_portal)
        (waiting,) = [name for name, (_, admitted) in before.items() if not admitted]
        gone, kept = sorted(name for name in names if name != waiting)
        real_cluster.remove_job("team-a", gone)
        wait_for(
            lambda: (
                {n: a for n, (_, a) in _listed(real_portal).items()} == {waiting: True, kept: True}
            ),
            timeout=60,
            what="the gone Job's Workload deleted and the waiting one admitted",
        )
        now, after = _listed(real_portal), _polled_again(real_portal)
        assert sorted(after) == sorted([waiting, kept])
        assert after[waiting][2] is True
        assert after[waiting][0] != first[waiting][0]
        assert after[waiting][0].endswith(f":{now[waiting][0]}")
        if now[kept] == before[kept]:  # real Kueue left it alone, and so did the poll
            assert after[kept] == first[kept]
        else:  # real Kueue wrote it meanwhile (seen: once in several runs): decoded again
            assert after[kept][0].endswith(f":{now[kept][0]}")
            assert after[kept][2] is True
    finally:
        for name in names:
            real_cluster.remove_job("team-a", name)
