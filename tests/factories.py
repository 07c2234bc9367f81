"""factory_boy factories with predictable defaults; tests pass what they assert on."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model

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
