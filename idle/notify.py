"""Telling a team its workload is idle (once per spell) or was suspended, through the
portal's notification channels: the team's members without subscribing, and whoever
subscribed to idle GPUs (redacted for each reader: another team's workload is never named
to a lead)."""

from __future__ import annotations

from idle.models import IdleSpell
from portal.notifications.send import Audience, notify_event


def what(spell: IdleSpell) -> str:
    """The spell's subject as a reference the redaction rule recognises."""
    if spell.workload:
        return f"Workload {spell.namespace}/{spell.workload}"
    return f"Pod {spell.namespace}/{spell.pod}"


def payload(spell: IdleSpell) -> dict[str, object]:
    return {
        "id": spell.pk,
        "team": spell.team.slug if spell.team else None,
        "workload": f"{spell.namespace}/{spell.workload or spell.pod}",
        "gpus": spell.gpus,
        "idle_since": spell.idle_since,
        "gpu_hours": spell.gpu_hours(spell.last_seen),
        "where": spell.pool or None,
        "reason": (
            f"under {spell.threshold:g} % utilisation on every GPU and MIG instance it holds"
        ),
    }


def found(spell_ids: list[int]) -> None:
    """Tell each newly found spell's team (after the collection's commit)."""
    spells = IdleSpell.objects.on_every_cluster().filter(pk__in=spell_ids).select_related("team")
    for spell in spells:
        hours = (spell.last_seen - spell.idle_since).total_seconds() / 3600
        notify_event(
            "idle.found",
            f"Idle: {what(spell)} holds {spell.gpus:g} GPU unused for {hours:.1f} h",
            payload(spell),
            Audience.of(teams=[spell.team.slug] if spell.team else []),
            cluster=int(spell.cluster_id or 0),
        )


def suspended(spell: IdleSpell) -> None:
    """Tell the team its idle workload was suspended by its policy."""
    notify_event(
        "idle.suspended",
        f"Suspended: {what(spell)} (idle, the team's idle policy)",
        {**payload(spell), "policy": "on: idle workloads are suspended after the grace"},
        Audience.of(teams=[spell.team.slug] if spell.team else []),
        cluster=int(spell.cluster_id or 0),
    )
