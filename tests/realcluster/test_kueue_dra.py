"""Kueue's quota on DRA devices, as the portal renders it, held by real Kueue: its manager runs
with ``resources.deviceClassMappings`` (whole GPUs of the ``gpu.nvidia.com`` class counted in
``dra.nvidia.com/gpu``), the ConfigMap a Kueue install keeps that configuration in says the
same, and the portal saves and renders a ClusterQueue with a quota of one such device. Kueue
admits the first Job whose pods claim a GPU from a ResourceClaimTemplate, holds the second,
and refuses one whose class it does not map; the portal's what-if, on the poll of that, says
the same, and says what a raise would admit, which Kueue then does.

With ``QM_RECORD_DRA=<folder>`` the workloads as polled are written there as ``kueue.json``
(tests/data/dra/ was recorded so)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from cluster.models import ObservedWorkload
from cluster.services import settings_cluster
from kube import Gateway, ObjectRef
from loop.apply import apply_desired_state
from loop.poll import poll_cluster
from queues.dra import dra_ceilings, kueue_dra
from queues.kueue_config import CONFIGMAP, CONFIGMAP_KEY, KUEUE_NAMESPACE
from queues.models import ClusterQueue, LocalQueue, ResourceFlavor
from queues.selectors import cluster_queue_what_if, with_nominal
from queues.services import save_cluster_queue
from tenants.models import Namespace, Team
from tests.realcluster.kit import RealCluster, need_kit
from tests.realcluster.test_dra import DRA, DRIVER, NAMESPACE, claim, published
from tests.realcluster.test_loop import hands
from tests.support import wait_for

need_kit()
pytestmark = pytest.mark.django_db
__all__ = ["published"]

KUEUE = "kueue.x-k8s.io/v1beta2"
RESOURCE = "dra.nvidia.com/gpu"
FLAVOR, QUEUE, LOCAL = "rc-dra-devices", "rc-dra-gpus", "rc-dra-gpus"
MAPPINGS = f"""resources:
  deviceClassMappings:
  - name: {RESOURCE}
    deviceClassNames:
    - gpu.nvidia.com
"""
# MIG devices charged in the multiprocessors their A100 shares (Kueue 0.19's counter source:
# apis/config/v1beta2 DeviceClassCounterSource; the driver's counter, docs/reference/dra.md).
COUNTED_RESOURCE = "dra.nvidia.com/mig-sm"
COUNTED = f"""resources:
  deviceClassMappings:
  - name: {COUNTED_RESOURCE}
    deviceClassNames:
    - mig.nvidia.com
    sources:
    - counter:
        name: multiprocessors
        driver: {DRIVER}
        deviceSelector:
          cel:
            expression: "device.driver == '{DRIVER}'"
"""


@pytest.fixture
def kueue_maps_dra(real_cluster: RealCluster) -> Iterator[str]:
    """Kueue restarted with the mapping, and its ConfigMap saying so (the kit runs Kueue from a
    file and keeps no ConfigMap: a Kueue install keeps its configuration in one); both as they
    were afterwards."""
    yield from configured(real_cluster, MAPPINGS)


@pytest.fixture
def kueue_counts_dra(real_cluster: RealCluster) -> Iterator[str]:
    """Kueue restarted with a counter source (``COUNTED``), its ConfigMap saying so."""
    yield from configured(real_cluster, COUNTED)


def configured(real_cluster: RealCluster, added: str) -> Iterator[str]:
    real_cluster.restart_kueue(fair_sharing=False, added=added)
    text = (real_cluster.root / "run" / "kueue-config.yaml").read_text()
    admin = hands(real_cluster, "kueue-install")
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIGMAP, "namespace": KUEUE_NAMESPACE},
        "data": {CONFIGMAP_KEY: text},
    }
    admin.apply(config_map)
    try:
        yield text
    finally:
        admin.delete(ObjectRef.of(config_map))
        real_cluster.restart_kueue(fair_sharing=False)


def template(name: str, device_class: str) -> dict[str, Any]:
    return {
        "apiVersion": DRA,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"spec": claim(name, device_class, f"device.driver == '{DRIVER}'")["spec"]},
    }


def dra_job(name: str, template_name: str) -> dict[str, Any]:
    """A Job whose one pod claims a device from a template and asks for nothing else."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"kueue.x-k8s.io/queue-name": LOCAL},
        },
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.example/train:1",
                            "resources": {"claims": [{"name": "gpu"}]},
                        }
                    ],
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template_name}],
                }
            },
        },
    }


def workload_of(admin: Gateway, job: str) -> dict[str, Any]:
    for w in admin.list(KUEUE, "Workload", namespace=NAMESPACE):
        if (w["metadata"].get("ownerReferences") or [{}])[0].get("name") == job:
            return w
    return {}


def condition(workload: dict[str, Any], kind: str) -> dict[str, Any]:
    for c in (workload.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return {}


def portal_queue(
    platform_admin: User, resource: str = RESOURCE, nominal: str = "1"
) -> ClusterQueue:
    """The team's namespace, a flavor and a ClusterQueue of one DRA GPU, saved through the
    queues' service (the ceiling read from the devices the DRA pool publishes)."""
    cluster = settings_cluster()
    team = Team.objects.create(slug="rc-dra", name="DRA team")
    namespace = Namespace.objects.create(name=NAMESPACE, team=team, cluster=cluster)
    ResourceFlavor.objects.create(name=FLAVOR, cluster=cluster, node_labels={})
    cq = ClusterQueue(
        name=QUEUE,
        cluster=cluster,
        namespace_selector={},
        resource_groups=[
            {
                "coveredResources": [resource],
                "flavors": [
                    {"name": FLAVOR, "resources": [{"name": resource, "nominalQuota": nominal}]}
                ],
            }
        ],
    )
    save_cluster_queue(actor=platform_admin, cluster_queue=cq, source="api")
    LocalQueue.objects.create(name=LOCAL, namespace=namespace, cluster_queue=cq)
    return cq


def test_real_kueue_admits_and_holds_dra_workloads_as_the_what_if_says(
    real_gateway: Gateway,
    published: Gateway,
    kueue_maps_dra: str,
    real_cluster: RealCluster,
    platform_admin: User,
) -> None:
    admin = hands(real_cluster, "kubectl-create")
    poll_cluster(gateway=real_gateway)  # the devices and Kueue's configuration, read
    config = kueue_dra(settings_cluster().pk)
    assert config.read and config.mapped == {RESOURCE: ("gpu.nvidia.com",)}, config
    cq = portal_queue(platform_admin)
    try:
        report = apply_desired_state(gateway=real_gateway)
        assert not report.failed and not report.conflicts, report
        admin.apply(template("rc-whole-gpu", "gpu.nvidia.com"))
        admin.apply(template("rc-mig", "mig.nvidia.com"))
        admin.apply(dra_job("rc-first", "rc-whole-gpu"))
        wait_for(
            lambda: condition(workload_of(admin, "rc-first"), "Admitted").get("status") == "True",
            30,
            "Kueue to admit the first",
        )
        admin.apply(dra_job("rc-second", "rc-whole-gpu"))
        admin.apply(dra_job("rc-unmapped", "rc-mig"))
        held = wait_for(
            lambda: (workload_of(admin, "rc-second").get("status") or {}).get("resourceRequests"),
            30,
            "Kueue to hold the second for its quota",
        )
        refused = wait_for(
            lambda: condition(workload_of(admin, "rc-unmapped"), "QuotaReserved").get("message"),
            30,
            "Kueue to refuse the unmapped class",
        )
        poll_cluster(gateway=real_gateway)
        rows = {
            w.name.split("-")[2]: w
            for w in ObservedWorkload.objects.on(settings_cluster()).filter(namespace=NAMESPACE)
        }
        record(admin, rows)
        assert rows["first"].admitted and rows["first"].requests == {RESOURCE: 1}
        assert not rows["second"].admitted and rows["second"].requests == {RESOURCE: 1}, held
        assert "DeviceClass mig.nvidia.com is not mapped" in refused, refused
        assert not rows["unmapped"].admitted

        now = cluster_queue_what_if(platform_admin, with_nominal(cq, FLAVOR, RESOURCE, "1"))
        assert not now["admitted"], now
        raised = cluster_queue_what_if(platform_admin, with_nominal(cq, FLAVOR, RESOURCE, "3"))
        key = {part: f"{NAMESPACE}/{row.name}" for part, row in rows.items()}
        assert [a["workload"] for a in raised["admitted"]] == [key["second"]], raised
        waits = {w["workload"]: w["why"] for w in raised["waiting"]}
        assert "DeviceClass mig.nvidia.com is not mapped" in waits[key["unmapped"]], raised
        cq.refresh_from_db()
        cq.set_nominal_quota(FLAVOR, RESOURCE, "3")
        save_cluster_queue(actor=platform_admin, cluster_queue=cq, source="api")
        report = apply_desired_state(gateway=real_gateway)
        assert not report.failed and not report.conflicts, report
        wait_for(
            lambda: condition(workload_of(admin, "rc-second"), "Admitted").get("status") == "True",
            30,
            "Kueue to admit the second after the raise",
        )
        assert condition(workload_of(admin, "rc-unmapped"), "Admitted").get("status") != "True"
    finally:
        for job in ("rc-first", "rc-second", "rc-unmapped"):
            real_cluster.remove_job(NAMESPACE, job)
        for kind, name in (("localqueue", f"{LOCAL}"),):
            real_cluster.kube(
                "delete", kind, name, "-n", NAMESPACE, "--ignore-not-found", "--wait=false"
            )
        real_cluster.kube("delete", "clusterqueue", QUEUE, "--ignore-not-found", "--wait=false")
        real_cluster.kube("delete", "resourceflavor", FLAVOR, "--ignore-not-found", "--wait=false")


def test_real_kueue_charges_a_counter_within_the_ceiling_the_portal_rendered(
    real_gateway: Gateway,
    published: Gateway,
    kueue_counts_dra: str,
    real_cluster: RealCluster,
    platform_admin: User,
) -> None:
    """The A100's counter set shares 98 multiprocessors, each 3g.40gb device consumes 42:
    the portal holds a quota of the counter to 98 and saves it there; real Kueue charges
    each 3g.40gb claim 42 of it, admits two and holds the third, and the portal's what-if,
    on the poll of that, says the same."""
    admin = hands(real_cluster, "kubectl-create")
    poll_cluster(gateway=real_gateway)
    cid = settings_cluster().pk
    config = kueue_dra(cid)
    assert config.counted == {COUNTED_RESOURCE} and config.unit(COUNTED_RESOURCE) == (
        "multiprocessors"
    ), config
    ceiling = dra_ceilings(cid, [COUNTED_RESOURCE])[COUNTED_RESOURCE]
    assert (ceiling.amount, ceiling.unit) == (98, "multiprocessors")
    cq = portal_queue(platform_admin, COUNTED_RESOURCE, str(ceiling.amount))
    cq.set_nominal_quota(FLAVOR, COUNTED_RESOURCE, "99")
    with pytest.raises(ValidationError) as refused:
        save_cluster_queue(actor=platform_admin, cluster_queue=cq, source="api")
    assert "could give at most 98 of it at once" in str(refused.value.message_dict), refused
    cq.refresh_from_db()
    jobs = ("rc-sm-first", "rc-sm-second", "rc-sm-third")
    try:
        report = apply_desired_state(gateway=real_gateway)
        assert not report.failed and not report.conflicts, report
        admin.apply(template("rc-mig-3g", "mig.nvidia.com"))
        for job in jobs[:2]:
            admin.apply(dra_job(job, "rc-mig-3g"))
            wait_for(
                lambda job=job: (
                    condition(workload_of(admin, job), "Admitted").get("status") == "True"
                ),
                30,
                f"Kueue to admit {job}",
            )
        admin.apply(dra_job(jobs[2], "rc-mig-3g"))
        wait_for(
            lambda: (workload_of(admin, jobs[2]).get("status") or {}).get("resourceRequests"),
            30,
            "Kueue to hold the third for its quota",
        )
        poll_cluster(gateway=real_gateway)
        rows = {
            w.name.split("-")[3]: w
            for w in ObservedWorkload.objects.on(settings_cluster()).filter(namespace=NAMESPACE)
        }
        assert rows["first"].admitted and rows["second"].admitted, rows
        assert rows["first"].requests == {COUNTED_RESOURCE: 42}, rows["first"].requests
        assert not rows["third"].admitted and rows["third"].requests == {COUNTED_RESOURCE: 42}

        now = cluster_queue_what_if(
            platform_admin, with_nominal(cq, FLAVOR, COUNTED_RESOURCE, "98")
        )
        assert not now["admitted"], now
        raised = cluster_queue_what_if(
            platform_admin, with_nominal(cq, FLAVOR, COUNTED_RESOURCE, "126")
        )
        assert [a["workload"] for a in raised["admitted"]] == [
            f"{NAMESPACE}/{rows['third'].name}"
        ], raised
    finally:
        for job in jobs:
            real_cluster.remove_job(NAMESPACE, job)
        real_cluster.kube("delete", "localqueue", LOCAL, "-n", NAMESPACE, "--ignore-not-found")
        real_cluster.kube("delete", "clusterqueue", QUEUE, "--ignore-not-found", "--wait=false")
        real_cluster.kube("delete", "resourceflavor", FLAVOR, "--ignore-not-found", "--wait=false")


def record(admin: Gateway, rows: dict[str, ObservedWorkload]) -> None:
    folder = os.environ.get("QM_RECORD_DRA")
    if not folder:
        return
    workloads = [w for w in admin.list(KUEUE, "Workload", namespace=NAMESPACE)]
    for w in workloads:
        w["metadata"].pop("managedFields", None)
    path = Path(folder) / "kueue.json"
    path.write_text(json.dumps({"workloads": workloads}, indent=1, sort_keys=True) + "\n")
