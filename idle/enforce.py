"""The idle policy at work: a team's idle Kueue workload, found idle longer than the grace,
is suspended by deactivating its Workload (``spec.active: false``; Kueue evicts it, its Job
is suspended and its pods go, and the Workload stays, to be reactivated). Written through
the gateway, audited as the system, the team told.

Never suspended: a workload whose namespace or priority class the team exempts, or that
carries the ``quartermaster.io/idle-exempt`` label; one whose readings are not recent (an
open spell not confirmed by the last collection within the gap); a pod without a workload."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.db import transaction
from django.db.models import DurationField, ExpressionWrapper, F
from django.utils import timezone

from cluster.models import Cluster
from cluster.selectors import rendering_for
from idle import notify
from idle.models import IdlePolicy, IdleSpell
from idle.policy import EXEMPT_LABEL
from idle.services import max_gap
from kube import Gateway, KubeError, NotFound, ObjectRef
from portal.audit.record import SYSTEM, Event, record_audit

log = logging.getLogger(__name__)
SOURCE = "task"


def due(cluster: Cluster, now: dt.datetime) -> list[IdleSpell]:
    """The cluster's open spells the policy acts on now: a workload's, not yet suspended
    nor found exempt, of a team whose policy is on, found longer ago than its grace and
    confirmed idle by a recent reading. One query."""
    grace = ExpressionWrapper(
        F("team__idle_policy__grace_minutes") * dt.timedelta(minutes=1),
        output_field=DurationField(),
    )
    return list(
        IdleSpell.objects.on(cluster)
        .filter(
            ended_at__isnull=True,
            suspended_at__isnull=True,
            note="",
            team__idle_policy__state=IdlePolicy.State.ON,
            last_seen__gte=now - max_gap(),
        )
        .exclude(workload="")
        .alias(grace=grace)
        .filter(found_at__lte=now - F("grace"))
        .select_related("team__idle_policy")
        .order_by("found_at", "pk")
    )


def exemption(spell: IdleSpell, policy: IdlePolicy, live: dict[str, Any] | None) -> str:
    """Why the policy leaves ``spell`` alone, or "" (``live``: the Workload as the cluster
    has it now, for its labels and priority class)."""
    if spell.namespace in policy.exempt_namespaces:
        return f"Namespace {spell.namespace} is exempt from the team's idle policy."
    if live is None:
        return ""
    labels = (live.get("metadata") or {}).get("labels") or {}
    if str(labels.get(EXEMPT_LABEL, "")).lower() == "true":
        return f"The workload carries {EXEMPT_LABEL}=true."
    spec = live.get("spec") or {}
    priority_class = spec.get("priorityClassName") or (spec.get("priorityClassRef") or {}).get(
        "name"
    )
    if priority_class and priority_class in policy.exempt_priority_classes:
        return f"Priority class {priority_class} is exempt from the team's idle policy."
    if spec.get("active") is False:
        return "The workload was already deactivated."
    return ""


def enforce_idle_policy(
    *, cluster: Cluster, gateway: Gateway, now: dt.datetime | None = None
) -> list[int]:
    """Suspend the cluster's due idle workloads; the ids of the spells suspended."""
    now = now or timezone.now()
    version = rendering_for(cluster)[1]
    done = []
    for spell in due(cluster, now):
        policy = spell.team.idle_policy  # type: ignore[union-attr]
        ref = ObjectRef(f"kueue.x-k8s.io/{version}", "Workload", spell.workload, spell.namespace)
        reason = exemption(spell, policy, None)
        try:
            live = None if reason else gateway.get(ref)
            reason = reason or exemption(spell, policy, live)
            if not reason:
                gateway.merge_patch(ref, {"spec": {"active": False}})
        except NotFound:
            reason = "The workload is gone."
        except KubeError as exc:  # tried again at the next collection
            log.warning("could not suspend idle workload %s: %s", spell, exc.message)
            continue
        with transaction.atomic():
            if reason:
                spell.note = reason[:300]
                spell.save(update_fields=["note"])
                continue
            spell.suspended_at = now
            spell.save(update_fields=["suspended_at"])
            record_audit(
                actor=SYSTEM,
                event=Event.IDLE_WORKLOAD_SUSPENDED,
                source=SOURCE,
                target=spell,
                team=spell.team,
                new={
                    "workload": f"{spell.namespace}/{spell.workload}",
                    "cluster": cluster.name,
                    "active": False,
                    "idle_since": spell.idle_since.isoformat(),
                    "gpu_hours": spell.gpu_hours(now),
                },
            )
            transaction.on_commit(lambda s=spell: notify.suspended(s))  # type: ignore[misc]
        done.append(spell.pk)
    return done
