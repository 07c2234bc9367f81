"""Dynamic Resource Allocation's objects decoded into the observed rows, fed what a real API
server (Kubernetes 1.36) and its real scheduler answered (tests/data/dra, verbatim, recorded by
tests/realcluster/test_dra.py): the NVIDIA driver's classes, a slice of whole GPUs, an A100's
partitionable slices (shared counters and the devices consuming them), claims allocated and
one the scheduler could not allocate. Then the poll's writer over those rows: unchanged rows
are not written again, changed ones are, and those gone are dropped, in statements that do
not grow with the rows."""

from __future__ import annotations

import datetime as dt
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cluster import decode, dra
from cluster.decode import (
    claim_requests,
    decode_pods,
    device_class_values,
    resource_claim_values,
    resource_slice_values,
)
from cluster.models import ObservedDeviceClass, ObservedResourceClaim, ObservedResourceSlice
from cluster.scope import settings_cluster_id
from kube import NotFound
from kube.errors import PermanentKubeError
from loop.fetch import DraListing, list_dra
from loop.write import write_dra

RECORDED = Path(__file__).resolve().parents[2] / "data" / "dra"
DRIVER = "gpu.nvidia.com"
NOW = dt.datetime(2026, 12, 6, 7, 0, tzinfo=dt.UTC)


def recorded(name: str) -> list[dict[str, Any]]:
    return json.loads((RECORDED / name).read_text())  # type: ignore[no-any-return]


def by_name(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {item["metadata"]["name"]: item for item in items}


def test_a_device_class_names_the_driver_its_selector_asks_for() -> None:
    classes = by_name(recorded("deviceclasses.json"))
    assert device_class_values(classes["mig.nvidia.com"]) == {
        "name": "mig.nvidia.com",
        "driver": DRIVER,
        "selectors": [
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"
        ],
        "extended_resource": "",
    }


def test_a_class_whose_selectors_name_no_driver_says_none() -> None:
    values = device_class_values(
        {
            "metadata": {"name": "big"},
            "spec": {"selectors": [{"cel": {"expression": "device.capacity['x'].memory > 1"}}]},
        }
    )
    assert (values["driver"], values["selectors"]) == ("", ["device.capacity['x'].memory > 1"])


def test_whole_gpus_keep_their_attributes_as_plain_values_and_capacity_as_the_server_wrote_it() -> (
    None
):
    slices = by_name(recorded("resourceslices.json"))
    values = resource_slice_values(slices["gpu-h100-01-gpu.nvidia.com-whole"])
    assert {k: values[k] for k in ("node_name", "driver", "pool", "pool_generation")} == {
        "node_name": "gpu-h100-01",
        "driver": DRIVER,
        "pool": "gpu-h100-01",
        "pool_generation": 1,
    }
    assert values["slice_count"] == 1 and values["shared_counters"] == []
    gpu0 = values["devices"][0]
    assert gpu0["name"] == "gpu-0"
    assert gpu0["attributes"] == {
        "architecture": "Hopper",
        "brand": "Nvidia",
        "cudaComputeCapability": "9.0.0",
        "cudaDriverVersion": "13.0.0",
        "driverVersion": "580.105.8",
        "productName": "NVIDIA H100 80GB HBM3",
        "type": "gpu",
        "uuid": "GPU-h100-01-0",
    }
    assert gpu0["capacity"] == {"memory": "81559Mi"}
    assert gpu0["consumesCounters"] == []


def test_a_partitionable_gpu_shares_its_counters_in_one_slice_and_its_devices_consume_them() -> (
    None
):
    slices = by_name(recorded("resourceslices.json"))
    counters = resource_slice_values(slices["gpu-a100-01-gpu.nvidia.com-counters"])
    assert counters["devices"] == [] and counters["slice_count"] == 2
    (counter_set,) = counters["shared_counters"]
    assert counter_set["name"] == "gpu-0-counter-set"
    # The API server writes 81920Mi back as 80Gi: quantities are kept as it wrote them.
    assert counter_set["counters"] == {
        "memory": "80Gi",
        "multiprocessors": "98",
        **{f"memory-slice-{i}": "1" for i in range(8)},
    }
    devices = {
        d["name"]: d
        for d in resource_slice_values(slices["gpu-a100-01-gpu.nvidia.com-devices"])["devices"]
    }
    assert sorted(devices) == ["gpu-0", "gpu-0-mig-3g40gb-9-0", "gpu-0-mig-3g40gb-9-4"]
    mig = devices["gpu-0-mig-3g40gb-9-4"]
    assert (mig["attributes"]["type"], mig["attributes"]["profile"]) == ("mig", "3g.40gb")
    assert mig["attributes"]["parentUUID"] == devices["gpu-0"]["attributes"]["uuid"]
    assert mig["consumesCounters"] == [
        {
            "counterSet": "gpu-0-counter-set",
            "counters": {
                "memory": "40192Mi",
                "multiprocessors": "42",
                **{f"memory-slice-{i}": "1" for i in range(4, 8)},
            },
        }
    ]
    assert devices["gpu-0"]["consumesCounters"][0]["counters"] == counter_set["counters"]


def test_an_allocated_claim_names_its_device_node_and_pod() -> None:
    claims = by_name(recorded("resourceclaims.json"))
    values = resource_claim_values(claims["rc-mig"])
    assert values == {
        "namespace": "rc-dra",
        "name": "rc-mig",
        "state": "allocated",
        "requests": [
            {
                "name": "gpu",
                "device_class": "mig.nvidia.com",
                "mode": "ExactCount",
                "count": 1,
                "selectors": ["device.attributes['gpu.nvidia.com'].profile == '3g.40gb'"],
            }
        ],
        "allocated": [
            {
                "request": "gpu",
                "driver": DRIVER,
                "pool": "gpu-a100-01",
                "device": "gpu-0-mig-3g40gb-9-0",
            }
        ],
        "node_name": "gpu-a100-01",
        "reserved_for": [{"resource": "pods", "name": "rc-dra-mig"}],
        "owner_kind": "",
        "owner_name": "",
        "created_at": values["created_at"],
    }
    assert values["created_at"] == dt.datetime.fromisoformat(
        claims["rc-mig"]["metadata"]["creationTimestamp"]
    )


def test_a_claim_the_scheduler_could_not_allocate_is_pending() -> None:
    claims = by_name(recorded("resourceclaims.json"))
    values = resource_claim_values(claims["rc-blocked"])
    assert (values["state"], values["allocated"], values["node_name"]) == ("pending", [], "")
    assert values["reserved_for"] == []
    assert values["requests"][0]["device_class"] == "gpu.nvidia.com"
    # What its pod was told, recorded for the explanation to come:
    told = json.loads((RECORDED / "failed-scheduling.json").read_text())
    assert "cannot allocate all claims" in told["pod_condition_message"]


def test_first_available_keeps_the_alternatives_in_order_and_all_has_no_count() -> None:
    values = resource_claim_values(
        {
            "metadata": {
                "name": "pod-gpu-x1",
                "namespace": "team-a",
                "ownerReferences": [{"kind": "Pod", "name": "pod", "controller": True}],
            },
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "firstAvailable": [
                                {"name": "big", "deviceClassName": "gpu.nvidia.com"},
                                {
                                    "name": "small",
                                    "deviceClassName": "mig.nvidia.com",
                                    "allocationMode": "All",
                                },
                            ],
                        }
                    ]
                }
            },
        }
    )
    assert values["requests"] == [
        {
            "name": "gpu",
            "first_available": [
                {
                    "name": "big",
                    "device_class": "gpu.nvidia.com",
                    "mode": "ExactCount",
                    "count": 1,
                    "selectors": [],
                },
                {
                    "name": "small",
                    "device_class": "mig.nvidia.com",
                    "mode": "All",
                    "count": None,
                    "selectors": [],
                },
            ],
        }
    ]
    assert (values["owner_kind"], values["owner_name"]) == ("Pod", "pod")


class NotServed:
    """An API server without resource.k8s.io/v1 (before 1.34, or DRA turned off)."""

    def list(self, api_version: str, kind: str, **_: Any) -> list[dict[str, Any]]:
        raise NotFound("the server could not find the requested resource", status=404)


def test_a_cluster_without_dra_lists_none() -> None:
    assert list_dra(NotServed()) is None  # type: ignore[arg-type]


class NotGranted:
    """A ClusterRole of an earlier release: no list of the DRA kinds."""

    def list(self, api_version: str, kind: str, **_: Any) -> list[dict[str, Any]]:
        raise PermanentKubeError(
            f'{kind.lower()}s.resource.k8s.io is forbidden: User "system:serviceaccount:'
            'quartermaster:quartermaster" cannot list resource',
            status=403,
        )


class Broken:
    def list(self, api_version: str, kind: str, **_: Any) -> list[dict[str, Any]]:
        raise PermanentKubeError("the server rejected our request", status=400)


def test_a_role_without_the_dra_grants_lists_none_and_says_what_to_grant(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An upgrade applied before its ClusterRole: the poll goes on without DRA objects (a
    403 had failed the whole poll); any other refusal still fails it."""
    with caplog.at_level(logging.WARNING, logger="loop.fetch"):
        assert list_dra(NotGranted()) is None  # type: ignore[arg-type]
    assert "apply the ClusterRole of this release" in caplog.text
    with pytest.raises(PermanentKubeError):
        list_dra(Broken())  # type: ignore[arg-type]


def listing() -> DraListing:
    return DraListing(
        recorded("deviceclasses.json"),
        recorded("resourceslices.json"),
        recorded("resourceclaims.json"),
    )


@pytest.mark.django_db
def test_the_writer_writes_what_changed_and_drops_what_is_gone() -> None:
    cluster_id = settings_cluster_id()
    assert write_dra(listing(), cluster_id=cluster_id, now=NOW) == 2 + 3 + 3
    assert write_dra(listing(), cluster_id=cluster_id, now=NOW) == 0

    later = NOW + dt.timedelta(minutes=1)
    changed = listing()
    claims_now = by_name(changed.claims)
    del claims_now["rc-blocked"]
    released = {**claims_now["rc-mig"]["metadata"], "resourceVersion": "999999"}
    claims_now["rc-mig"] = {**claims_now["rc-mig"], "metadata": released, "status": {}}
    changed.claims = list(claims_now.values())
    assert write_dra(changed, cluster_id=cluster_id, now=later) == 2
    claims = {c.name: c for c in ObservedResourceClaim.objects.on(cluster_id)}
    assert sorted(claims) == ["rc-mig", "rc-whole"]
    assert (claims["rc-mig"].state, claims["rc-mig"].last_changed) == ("pending", later)
    assert (claims["rc-whole"].state, claims["rc-whole"].last_changed) == ("allocated", NOW)
    assert ObservedDeviceClass.objects.on(cluster_id).count() == 2
    assert ObservedResourceSlice.objects.on(cluster_id).count() == 3


@pytest.mark.django_db
def test_slices_and_claims_listed_at_their_rows_version_are_not_decoded_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster_id = settings_cluster_id()
    write_dra(listing(), cluster_id=cluster_id, now=NOW)

    def refused(item: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError(f"{item['metadata']['name']} decoded again")

    monkeypatch.setattr(decode, "resource_slice_values", refused)
    monkeypatch.setattr(decode, "resource_claim_values", refused)
    assert write_dra(listing(), cluster_id=cluster_id, now=NOW) == 0


@pytest.mark.django_db
def test_the_writers_statements_do_not_grow_with_the_slices() -> None:
    cluster_id = settings_cluster_id()

    def statements(copies: int) -> int:
        many = listing()
        many.slices = [
            {**item, "metadata": {**item["metadata"], "name": f"{item['metadata']['name']}-{n}"}}
            for n in range(copies)
            for item in recorded("resourceslices.json")
        ]
        for model in (ObservedDeviceClass, ObservedResourceSlice, ObservedResourceClaim):
            model.objects.on(cluster_id).delete()
        with CaptureQueriesContext(connection) as queries:
            write_dra(many, cluster_id=cluster_id, now=NOW)
        return len(queries)

    assert statements(1) == statements(20)


def test_a_running_pod_asking_only_dra_claims_is_kept_with_its_claims() -> None:
    (recorded_pod,) = [
        p
        for p in json.loads((RECORDED / "waiting.json").read_text())["pods"]
        if p["metadata"]["name"] == "rc-h100-a"
    ]
    running = {**recorded_pod, "status": {**recorded_pod["status"], "phase": "Running"}}
    decoded = decode_pods([running])
    row = decoded.rows[("rc-dra", "rc-h100-a")]
    assert (row["phase"], row["gpu_requests"]) == ("Running", {})
    assert row["resource_claims"] == [{"name": "gpu", "claim": "rc-h100-a", "template": ""}]
    plain = {**running, "spec": {**running["spec"], "resourceClaims": []}}
    assert decode_pods([plain]).rows == {}  # no GPU, no claim, not Pending: not kept


def test_an_allocated_device_is_of_the_class_its_request_or_sub_request_asked_for() -> None:
    """A result names its request, or for a firstAvailable alternative ``<request>/<sub>``
    (docs/reference/dra.md): the class each allocated device was had through."""
    requests = claim_requests(
        {
            "devices": {
                "requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
                    {
                        "name": "any",
                        "firstAvailable": [
                            {"name": "big", "deviceClassName": "gpu.nvidia.com"},
                            {"name": "small", "deviceClassName": "mig.nvidia.com"},
                        ],
                    },
                ]
            }
        }
    )
    allocated = [
        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"},
        {"request": "any/small", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-1-mig-1"},
    ]
    assert dra.device_classes([(allocated, requests)]) == {
        ("gpu.nvidia.com", "n1", "gpu-0"): "gpu.nvidia.com",
        ("gpu.nvidia.com", "n1", "gpu-1-mig-1"): "mig.nvidia.com",
    }
