"""Writes to the fleet's desired state (node pools, custom MIG configs): admins only,
validated, audited."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction

from fleet.models import MigConfig, NodePool
from portal.audit.record import Event, admin_event
from portal.removal import delete_desired
from portal.services import Actor, require_platform_admin, save_validated
from portal.vocabulary.names import label_value_errors, qualified_name_errors


@transaction.atomic
def save_node_pool(*, actor: Actor, pool: NodePool, source: str) -> NodePool:
    """Create or update a node pool (its label selector and intended MIG config)."""
    require_platform_admin(actor)
    errors: dict[str, list[str]] = {}
    if not isinstance(pool.node_selector, dict) or not pool.node_selector:
        errors["node_selector"] = [
            "Give at least one node label, e.g. quartermaster.io/pool: train."
        ]
    else:
        for key, value in pool.node_selector.items():
            problems = qualified_name_errors(key) + label_value_errors(str(value))
            if problems:
                errors.setdefault("node_selector", []).extend(f"{key}: {p}" for p in problems)
    if pool.mig_config and label_value_errors(pool.mig_config):
        errors["mig_config"] = ["A MIG config name is a label value, e.g. all-3g.40gb."]
    if errors:
        raise ValidationError(errors)
    save_validated(pool, actor=actor, source=source, event=Event.NODE_POOL_SAVED)
    return pool


@transaction.atomic
def save_mig_config(*, actor: Actor, config: MigConfig, source: str) -> MigConfig:
    """Create or update a custom MIG config (its devices checked against the GPU model's
    catalog by the model's own rules)."""
    require_platform_admin(actor)
    created = config.pk is None
    save_validated(
        config,
        actor=actor,
        source=source,
        event=Event.MIG_CONFIG_CREATED if created else Event.MIG_CONFIG_CHANGED,
    )
    return config


@transaction.atomic
def delete_fleet_object(*, actor: Actor, obj: NodePool | MigConfig, source: str) -> None:
    """Delete a node pool or a custom MIG config (platform admins), audited; the requests
    about it end and the loop applies what changed."""
    require_platform_admin(actor)
    delete_desired(
        obj, actor=actor, source=source, event=admin_event(str(obj._meta.model_name), "deleted")
    )
