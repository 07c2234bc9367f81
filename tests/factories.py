"""factory_boy factories with predictable defaults; tests pass what they assert on."""

from __future__ import annotations

from typing import Any

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from changes.models import MigChangeRequest, QuotaChangeRequest
from changes.quota import request_quota_change
from cluster.models import ObservedNode, ObservedPod
from queues.models import ClusterQueue, LocalQueue, ResourceFlavor
from tenants.models import Membership, Namespace, Team


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password("pw")


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Team
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"team-{n}")
    name = factory.LazyAttribute(lambda o: o.slug.title())


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    team = factory.SubFactory(TeamFactory)
    role = "member"


class NamespaceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Namespace

    name = factory.Sequence(lambda n: f"ns-{n}")
    team = factory.SubFactory(TeamFactory)


class ResourceFlavorFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ResourceFlavor

    name = factory.Sequence(lambda n: f"flavor-{n}")
    node_labels = factory.LazyFunction(dict)


class ClusterQueueFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ClusterQueue

    name = factory.Sequence(lambda n: f"cq-{n}")
    resource_groups = factory.LazyFunction(list)


class LocalQueueFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = LocalQueue

    name = factory.Sequence(lambda n: f"lq-{n}")
    namespace = factory.SubFactory(NamespaceFactory)
    cluster_queue = factory.SubFactory(ClusterQueueFactory)


class ObservedNodeFactory(factory.django.DjangoModelFactory):
    """A ready A100 80GB node with 8 GPUs on all-3g.40gb, as a poll would record it."""

    class Meta:
        model = ObservedNode

    name = factory.Sequence(lambda n: f"gpu-node-{n:03d}")
    gpu_product = "NVIDIA-A100-SXM4-80GB"
    gpu_count = 8
    mig_config = "all-3g.40gb"
    mig_config_state = "success"
    labels = factory.LazyAttribute(
        lambda o: {"nvidia.com/gpu.product": o.gpu_product, "nvidia.com/mig.config": o.mig_config}
    )
    allocatable = factory.LazyFunction(lambda: {"nvidia.com/mig-3g.40gb": "16"})
    ready = True
    first_seen = factory.LazyFunction(timezone.now)
    last_changed = factory.LazyFunction(timezone.now)


class ObservedPodFactory(factory.django.DjangoModelFactory):
    """A running pod of team-a without GPUs (pass its node, phase and requests)."""

    class Meta:
        model = ObservedPod

    namespace = "team-a"
    name = factory.Sequence(lambda n: f"pod-{n}")
    phase = "Running"
    gpu_requests = factory.LazyFunction(dict)
    last_changed = factory.LazyFunction(timezone.now)


class MigChangeRequestFactory(factory.django.DjangoModelFactory):
    """A pending MIG change of one node to all-3g.40gb, assessed safe."""

    class Meta:
        model = MigChangeRequest

    team = factory.SubFactory(TeamFactory)
    requested_by = factory.SubFactory(UserFactory)
    nodes = factory.LazyFunction(lambda: ["gpu-node-000"])
    target_config = "all-3g.40gb"
    reason = "a test"
    state = MigChangeRequest.State.PENDING
    assessment = factory.LazyFunction(lambda: {"verdict": "safe"})
    verdict = "safe"


def demo_fleet_nodes() -> None:
    """The demo's fleet as a poll records it: three A100 and two H100 nodes of 8 GPUs."""
    for name in ("gpu-a100-01", "gpu-a100-02", "gpu-a100-03"):
        ObservedNodeFactory(name=name)
    for name in ("gpu-h100-01", "gpu-h100-02"):
        ObservedNodeFactory(
            name=name,
            gpu_product="NVIDIA-H100-80GB-HBM3",
            mig_config="all-disabled",
            allocatable={"nvidia.com/gpu": "8"},
        )


def demo_quota_request(**overrides: Any) -> QuotaChangeRequest:
    """lead-a asks for 24 GPUs in the demo's team-a namespace (``overrides``: other
    arguments of ``request_quota_change``)."""
    values: dict[str, Any] = {
        "actor": get_user_model().objects.get(username="lead-a"),
        "team": Team.objects.get(slug="team-a"),
        "kind": "namespace",
        "namespace": Namespace.objects.get(name="team-a"),
        "resource": "requests.nvidia.com/gpu",
        "requested": "24",
        "reason": "A deadline for the 70B run.",
    }
    return request_quota_change(**{**values, **overrides})
