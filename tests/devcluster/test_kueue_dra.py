"""The demo cluster's Kueue charges DRA claims as the real Kueue v0.19.2 recorded in
tests/data/dra/kueue.json (tests/realcluster/test_kueue_dra.py's story): with its
Configuration mapping the DeviceClass ``gpu.nvidia.com`` to ``dra.nvidia.com/gpu`` in the
ConfigMap an install keeps it in, a ClusterQueue of one such device admits the first Job
whose pod claims a GPU from a ResourceClaimTemplate, holds the second for its quota, and holds
one whose class no mapping names out of line, each with the recorded words; a claim the pod
names itself is refused with Kueue's words, and a raise of the quota admits the second."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.devcluster.test_kueue_recordings import KUEUE, KueueDemo, conditions, normalized

RECORDED = Path(__file__).resolve().parent.parent / "data" / "dra" / "kueue.json"
NAMESPACE, FLAVOR, QUEUE, RESOURCE = "rc-dra", "rc-dra-devices", "rc-dra-gpus", "dra.nvidia.com/gpu"
MAPPINGS = f"""resources:
  deviceClassMappings:
  - name: {RESOURCE}
    deviceClassNames:
    - gpu.nvidia.com
"""


def recorded() -> dict[str, Any]:
    """The recorded Workloads by their Job's name (rc-first, rc-second, rc-unmapped)."""
    workloads = json.loads(RECORDED.read_text())["workloads"]
    return {w["metadata"]["ownerReferences"][0]["name"]: w for w in workloads}


def template(name: str, device_class: str) -> dict[str, Any]:
    request = {"name": "gpu", "exactly": {"deviceClassName": device_class}}
    return {
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


def job(name: str, claim: dict[str, str]) -> dict[str, Any]:
    """A Job whose one pod claims a device and asks for nothing else (the recorded ones)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": QUEUE}},
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.example/train:1",
                            "resources": {"claims": [{"name": "gpu"}]},
                        }
                    ],
                    "resourceClaims": [{"name": "gpu", **claim}],
                }
            },
        },
    }


def story(nominal: str = "1") -> KueueDemo:
    demo = KueueDemo()
    for namespace in (NAMESPACE, "kueue-system"):
        demo.ok("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    demo.ok(
        "POST",
        "/api/v1/namespaces/kueue-system/configmaps",
        {
            "metadata": {"name": "kueue-manager-config"},
            "data": {"controller_manager_config.yaml": MAPPINGS},
        },
    )
    demo.ok("POST", f"{KUEUE}/resourceflavors", {"metadata": {"name": FLAVOR}, "spec": {}})
    quota = {"name": RESOURCE, "nominalQuota": nominal}
    demo.ok(
        "POST",
        f"{KUEUE}/clusterqueues",
        {
            "metadata": {"name": QUEUE},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": [RESOURCE],
                        "flavors": [{"name": FLAVOR, "resources": [quota]}],
                    }
                ],
            },
        },
    )
    demo.ok(
        "POST",
        f"{KUEUE}/namespaces/{NAMESPACE}/localqueues",
        {"metadata": {"name": QUEUE}, "spec": {"clusterQueue": QUEUE}},
    )
    templates = f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaimtemplates"
    demo.ok("POST", templates, template("rc-whole-gpu", "gpu.nvidia.com"))
    demo.ok("POST", templates, template("rc-mig", "mig.nvidia.com"))
    demo.settle()
    for name, made_from in (
        ("rc-first", "rc-whole-gpu"),
        ("rc-second", "rc-whole-gpu"),
        ("rc-unmapped", "rc-mig"),
    ):
        body = job(name, {"resourceClaimTemplateName": made_from})
        demo.ok("POST", f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs", body)
        demo.settle()
    return demo


def test_claims_are_charged_in_the_mapped_resource_with_the_recorded_words() -> None:
    demo, theirs = story(), recorded()
    ours = {job: demo.workload_of(NAMESPACE, job) for job in theirs}
    admission = normalized(ours["rc-first"]["status"]["admission"])
    assert admission == normalized(theirs["rc-first"]["status"]["admission"])
    for job in ("rc-second", "rc-unmapped"):
        recorded_conditions = conditions(theirs[job])
        ours_conditions = conditions(ours[job])
        for kind in ("QuotaReserved", "Requeued"):
            assert ours_conditions.get(kind) == recorded_conditions.get(kind), (job, kind)
        assert ours[job]["status"].get("resourceRequests") == theirs[job]["status"].get(
            "resourceRequests"
        ), job


def test_a_raise_admits_the_held_claim_and_never_the_unmapped_class() -> None:
    demo = story()
    cq = demo.get(f"{KUEUE}/clusterqueues/{QUEUE}")
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "3"
    demo.ok("PUT", f"{KUEUE}/clusterqueues/{QUEUE}", cq)
    demo.settle()
    admitted = {
        job: conditions(demo.workload_of(NAMESPACE, job)).get("Admitted", ("",))[0]
        for job in ("rc-first", "rc-second", "rc-unmapped")
    }
    assert admitted == {"rc-first": "True", "rc-second": "True", "rc-unmapped": ""}


def test_a_claim_the_pod_names_itself_is_not_charged_but_held() -> None:
    demo = story(nominal="3")
    body = job("rc-named", {"resourceClaimName": "shared-gpu"})
    demo.ok("POST", f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs", body)
    demo.settle()
    held = conditions(demo.workload_of(NAMESPACE, "rc-named"))
    assert held["QuotaReserved"] == (
        "False",
        "Inadmissible",
        "KueueDRAIntegration feature does not support use of resource claims",
    )
