"""Bad GPUs become reviewed actions: a health finding that needs the node drained (an Xid
that calls for a GPU reset or a reboot, failed row remapping) produces one suggested
"cordon and drain" request, pending approval like any MIG change. The same finding (node,
GPU, UUID, Xid) is never suggested twice on its cluster, so a rejected suggestion stays
rejected. A suggestion is on the cluster of the health reading, assessed on that cluster's
facts, its pods read through that cluster's gateway."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from django.db import transaction

from changes import impact
from changes.approval import claim_nodes, record_teams_hit
from changes.facts import disruption_facts, fleet_facts
from changes.models import MigChangeRequest
from changes.notify import notify
from cluster.models import Cluster
from cluster.scope import settings_cluster_id
from portal.audit.record import SYSTEM, Event, record_audit
from portal.vocabulary.errors import DomainError

State = MigChangeRequest.State


class HealthReading(Protocol):
    """One node's GPU health as the health app stores it (its ``NodeHealth`` rows)."""

    cluster_id: int | None  # None: the settings' cluster
    node: str
    gpus: Sequence[Mapping[str, Any]]
    findings: Sequence[Mapping[str, Any]]


def suggestion_key(node: str, gpu: Mapping[str, Any], finding: Mapping[str, Any]) -> str:
    what = f"xid{finding['xid']}" if finding.get("xid") else "remap"
    return f"{node}/gpu{finding['gpu']}/{gpu.get('uuid', '')}/{what}"[:200]


def suggest_drains(rows: Iterable[HealthReading]) -> list[int]:
    """The ids of the requests suggested now: at most one per node (a node being drained
    is drained for all its GPUs), each cluster's fleet read once for all its assessments."""
    created = []
    facts: dict[int, impact.Fleet] = {}
    clusters: dict[int, Cluster] = {}
    for row in rows:
        for finding in row.findings:
            if not finding.get("needs_drain"):
                continue
            gpu = next((g for g in row.gpus if g["index"] == finding["gpu"]), {})
            key = suggestion_key(row.node, gpu, finding)
            cid = row.cluster_id or settings_cluster_id()
            if MigChangeRequest.objects.filter(cluster=cid, suggestion_key=key).exists():
                continue
            if cid not in facts:
                clusters[cid] = Cluster.objects.get(pk=cid)
                facts[cid] = fleet_facts(cluster=clusters[cid])
            request = suggest_drain(
                facts[cid],
                row.node,
                key,
                finding["title"],
                finding["advice"],
                cluster=clusters[cid],
            )
            if request is not None:
                created.append(request.pk)
                break
    return created


def suggest_drain(
    facts: impact.Fleet,
    node: str,
    key: str,
    title: str,
    advice: str,
    *,
    cluster: Cluster | None = None,
) -> MigChangeRequest | None:
    """One suggestion on ``cluster`` (by default the settings' one; ``facts`` are its) for
    a finding never suggested before; none while another request on the node is open (the
    assessment blocks it). The node's pods are read from the cluster first, outside the
    transaction that stores the suggestion."""
    facts = dataclasses.replace(facts, disruption=disruption_facts([node], cluster=cluster))
    assessment = impact.assess(facts, targets=[node], config="", drain=True)
    if assessment.verdict == "blocked":
        return None
    return _suggested(assessment, node, key, title, advice, cluster=cluster)


@transaction.atomic(durable=True)
def _suggested(
    assessment: impact.Assessment,
    node: str,
    key: str,
    title: str,
    advice: str,
    *,
    cluster: Cluster | None,
) -> MigChangeRequest | None:
    """The suggestion stored, its node claimed, audited (None when another request took
    the node since the facts were read)."""
    request = MigChangeRequest.objects.create(
        **({"cluster": cluster} if cluster is not None else {}),
        kind=MigChangeRequest.Kind.DRAIN,
        team=None,
        requested_by=None,
        nodes=[node],
        target_config="",
        reason=f"Suggested by the portal's GPU health check: {node} {title}. {advice}",
        state=State.PENDING,
        assessment=assessment.as_json(),
        verdict=assessment.verdict,
        previous_configs={},
        queue_changes=[],
        suggestion_key=key,
    )
    try:
        claim_nodes(request)
    except DomainError:  # another request took the node since the facts were read
        transaction.set_rollback(True)
        return None
    record_teams_hit(request, request.assessment)
    record_audit(
        actor=SYSTEM,
        event=Event.NODE_DRAIN_SUGGESTED,
        source="task",
        target=request,
        new={
            "cluster": request.cluster.name,
            "node": node,
            "finding": title,
            "verdict": request.verdict,
        },
    )
    transaction.on_commit(lambda: notify("requested", request))
    return request
