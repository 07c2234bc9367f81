"""Governed per-claim MIG, pure: the DeviceClass the portal keeps for each MIG profile and
the ResourceQuota that holds a namespace to its cluster's MIG policy. No I/O, no queries.

Where the NVIDIA DRA driver carves MIG devices per claim, every MIG device it publishes
carries ``type == 'mig'`` and its ``profile`` (``docs/reference/dra.md``). A DeviceClass per
profile selects exactly that profile's devices, and the API server's ResourceQuota admission
counts a namespace's claimed devices per class
(``<class>.deviceclass.resource.k8s.io/devices``). So the policy is enforced by Kubernetes
itself: a namespace's quota allows the granted profiles' classes up to their grants and
holds every other class that selects MIG devices (the driver's generic ``mig.nvidia.com``,
the profiles not granted) at 0, and a claim of those is refused when it is created. A quota
does not evict: claims made before keep their devices.

A device selector sees the device only (its driver, attributes, capacity), not its node, so
a class cannot pick a pool: the policy is per cluster and namespace, not per pool.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from cluster import dra
from portal.vocabulary.labels import managed_labels

RESOURCE_V1 = "resource.k8s.io/v1"
DRIVER = "gpu.nvidia.com"
GENERIC_MIG_CLASS = "mig.nvidia.com"  # the driver's class of every MIG device
CLASS_DOMAIN = "quartermaster.io"
PROFILE = re.compile(r"^[1-9]g\.[0-9]+gb(\+[a-z]+)?$")

Manifest = dict[str, Any]


def profile_class(profile: str) -> str:
    """The portal's DeviceClass of one MIG profile: ``3g.40gb`` ->
    ``mig-3g.40gb.quartermaster.io`` (``+`` becomes ``.``, as in the device plugin's names)."""
    return f"mig-{profile.replace('+', '.')}.{CLASS_DOMAIN}"


def profile_selector(profile: str) -> str:
    """The CEL expression selecting the driver's MIG devices of ``profile``."""
    return (
        f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'mig' && "
        f"device.attributes['{DRIVER}'].profile == '{profile}'"
    )


def devices_key(device_class: str) -> str:
    """The ResourceQuota item counting a namespace's devices of ``device_class``."""
    return f"{device_class}.deviceclass.resource.k8s.io/devices"


def policy_quota_name(namespace: str) -> str:
    return f"{namespace}-mig-policy"


def render_profile_class(profile: str) -> Manifest:
    """The DeviceClass of one MIG profile (cluster-scoped)."""
    return {
        "apiVersion": RESOURCE_V1,
        "kind": "DeviceClass",
        "metadata": {"name": profile_class(profile), "labels": managed_labels()},
        "spec": {"selectors": [{"cel": {"expression": profile_selector(profile)}}]},
    }


def policy_hard(
    grants: Mapping[str, int], *, profiles: Iterable[str], closed: Iterable[str] = ()
) -> dict[str, str]:
    """A governed namespace's quota items: each profile's class at its grant (0 when not
    granted), and every other class that selects MIG devices (``closed``; the driver's
    generic class always) at 0."""
    hard = {devices_key(profile_class(p)): str(grants.get(p, 0)) for p in {*profiles, *grants}}
    for device_class in {GENERIC_MIG_CLASS, *closed}:
        hard.setdefault(devices_key(device_class), "0")
    return dict(sorted(hard.items()))


def render_policy_quota(namespace: str, hard: Mapping[str, str], *, team_slug: str) -> Manifest:
    """The ResourceQuota holding ``namespace`` to its cluster's MIG policy: an object apart
    from the namespace's own quota (``<namespace>-gpu-quota``), so neither edit overwrites
    the other; the API server enforces every quota of a namespace."""
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {
            "name": policy_quota_name(namespace),
            "namespace": namespace,
            "labels": managed_labels(team_slug),
        },
        "spec": {"hard": dict(hard)},
    }


def claim_devices(requests: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Devices per class one claim holds in quota (its requests' counts; a request of
    ``firstAvailable`` counts each alternative's class, as the quota admission charges the
    most any alternative could take)."""
    out: dict[str, int] = {}
    for request in requests:
        alternatives = request.get("first_available") or [request]
        for alternative in alternatives:
            device_class = str(alternative.get("device_class") or "")
            if device_class:
                count = int(alternative.get("count") or 1)
                out[device_class] = max(out.get(device_class, 0), count)
    return out


def selects_mig(selectors: Iterable[str], profiles: Iterable[str]) -> bool:
    """Whether a DeviceClass with these CEL ``selectors`` would select a MIG device of one of
    ``profiles`` (all its selectors hold for it); a selector the portal cannot read counts
    as not selecting (the page lists such classes as not closed)."""
    expressions = list(selectors)
    if not expressions:
        return False
    for profile in profiles:
        device = dra.Device(
            node="",
            driver=DRIVER,
            pool="",
            name="",
            kind=dra.MIG,
            profile=profile,
            product="",
            gpu="",
            attributes=(("profile", profile), ("type", dra.MIG)),
        )
        if all(dra.matches(device, e) is True for e in expressions):
            return True
    return False
