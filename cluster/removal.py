"""What deleting a namespace or a ClusterQueue removes from the cluster: the objects the
applier applied for it, as its records say (the next apply removes the ones it created and
gives up its fields on the ones it adopted; see ``loop.apply``)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from cluster.models import AppliedObject
from portal.removal import Consequences

# Everything in a namespace goes with it: what people lose when the portal deletes one.
NAMESPACE_CONTENTS = "every pod, job, volume claim, secret and config map in it"


def removed_from_cluster(obj: models.Model) -> Consequences:
    """Sentences, one per object the applier removes or lets go of (the namespace first)."""
    name = getattr(obj, "name", "")
    if obj._meta.label_lower == "tenants.namespace":
        records = AppliedObject.objects.filter(
            Q(namespace=name) | Q(kind="Namespace", namespace="", name=name)
        )
        what = "namespace"
    elif obj._meta.label_lower == "queues.clusterqueue":
        records = AppliedObject.objects.filter(kind__in=["ClusterQueue", "Queue"], name=name)
        what = "ClusterQueue"
    else:
        return Consequences()
    said = [_sentence(record) for record in sorted(records, key=_namespace_first)]
    if not said:
        said = [f"Nothing: the portal has applied nothing for this {what} yet."]
    return Consequences(cluster=said)


def _namespace_first(record: AppliedObject) -> tuple[bool, str, str]:
    return (record.kind != "Namespace", record.kind, record.name)


def _sentence(record: AppliedObject) -> str:
    if record.kind == "Namespace":
        if record.adopted:
            return (
                f"Namespace {record.name} stays, with everything in it: it was there before "
                "the portal, which only gives up the labels it set."
            )
        return (
            f"Namespace {record.name} is deleted, and Kubernetes deletes {NAMESPACE_CONTENTS} "
            "with it, also what the portal did not create."
        )
    if record.adopted:
        return (
            f"{record.kind} {record.name} stays: it was there before the portal, which only "
            "gives up the fields it set."
        )
    return f"{record.kind} {record.name} is deleted."
