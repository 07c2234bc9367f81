"""What a cluster's ResourceClaims hold through Dynamic Resource Allocation, per pod: read
where usage counts GPU-hours and where idle GPUs are found, so both name a device held
through DRA, and the DeviceClass it was allocated through, alike."""

from __future__ import annotations

from typing import Any

from cluster import dra
from cluster.models import ObservedPod, ObservedResourceClaim, ObservedResourceSlice
from gpus.catalog import model_for_product


class DraHeld:
    """What the claims of a cluster hold through DRA, said in the device plugin's resource
    names so the same GPU-share rule counts them (a whole GPU 1, a MIG device its share of
    its GPU's model), with the DeviceClass each was allocated through (its price may be its
    own): read only where a pod has claims (two queries then)."""

    def __init__(self, cluster_id: int) -> None:
        self.cluster_id = cluster_id
        self._devices: dict[dra.DeviceKey, dra.Device] | None = None
        self._claims: dict[tuple[str, str], list[Any]] = {}
        self._classes: dict[tuple[str, str], dict[str, str]] = {}

    def _load(self) -> dict[dra.DeviceKey, dra.Device]:
        if self._devices is None:
            slices = ObservedResourceSlice.objects.on(self.cluster_id).values(
                "node_name", "driver", "pool", "devices"
            )
            self._devices = {d.key: d for row in slices for d in dra.devices_of(row)}
            claims = (
                ObservedResourceClaim.objects.on(self.cluster_id)
                .filter(state=ObservedResourceClaim.State.ALLOCATED)
                .values_list("namespace", "name", "allocated", "requests")
            )
            for namespace, name, allocated, requests in claims:
                self._claims[(namespace, name)] = allocated
                self._classes[(namespace, name)] = dra.request_classes(requests)
        return self._devices

    def held(self) -> list[dra.Device]:
        """Every device an allocated claim holds."""
        devices = self._load()
        keys = dra.taken_devices(self._claims.values())
        return [devices[k] for k in sorted(keys) if k in devices]

    def of_pod(self, pod: ObservedPod) -> dict[tuple[str, str], int]:
        """(resource, device class) -> how many of it the pod's allocated claims hold."""
        if not pod.resource_claims:
            return {}
        devices = self._load()
        out: dict[tuple[str, str], int] = {}
        for asked in pod.resource_claims:
            claim = (pod.namespace, asked.get("claim", ""))
            classes = self._classes.get(claim, {})
            for result in self._claims.get(claim, ()):
                device = devices.get((result["driver"], result["pool"], result["device"]))
                if device is not None and device.resource:
                    key = (device.resource, classes.get(result.get("request", ""), ""))
                    out[key] = out.get(key, 0) + 1
        return out

    def model_of(self, node: str) -> str | None:
        """The GPU model a node's DRA devices name (for a node without GFD's labels)."""
        if self._devices is None:
            return None
        for device in self._devices.values():
            if device.node == node and device.product:
                return model_for_product(device.product.replace(" ", "-"))
        return None
