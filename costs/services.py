"""Writes of prices and the cost policy: platform admins only, validated with field errors,
audited with the actor. The page, the API, the admin and the demo loader all write here."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from costs.models import CostPolicy, Price
from costs.pricing import profile_share
from gpus.catalog import gpu_models
from portal.audit.record import Event, record_audit
from portal.services import Actor, require_platform_admin, save_validated
from portal.vocabulary.errors import DomainError
from portal.vocabulary.names import dns1123_subdomain_errors, label_value_errors


def _class_errors(price: Price) -> dict[str, list[str]]:
    """A DRA device class's price: a DeviceClass's name (a DNS subdomain), no MIG profile
    beside it (the class says which devices; a MIG device without its class's price costs
    its profile's)."""
    if not price.device_class:
        return {}
    if price.profile:
        return {
            "device_class": [
                "A price is of a whole GPU, a MIG profile or a DRA device class: leave the "
                "MIG profile blank to price a device class."
            ]
        }
    errors = dns1123_subdomain_errors(price.device_class)
    if errors:
        return {"device_class": [f"A DeviceClass's name (e.g. mig.nvidia.com): {errors[0]}"]}
    return {}


def _price_errors(price: Price) -> dict[str, list[str]]:
    class_errors = _class_errors(price)
    if class_errors:
        return class_errors
    models = gpu_models()
    if price.gpu_model not in models:
        if price.profile:
            known = ", ".join(sorted(models))
            return {"gpu_model": [f"MIG profiles are priced for the catalog's models: {known}."]}
        if not price.gpu_model or label_value_errors(price.gpu_model):
            return {
                "gpu_model": [
                    "Give a model of the catalog (e.g. A100-80GB) or, for a GPU without MIG, "
                    "its nvidia.com/gpu.product label (e.g. NVIDIA-L40S)."
                ]
            }
        return {}
    if (
        price.profile
        and profile_share(price.gpu_model, price.profile.replace(".me", "+me")) is None
    ):
        names = ", ".join(p["name"] for p in models[price.gpu_model].get("profiles", []))
        return {
            "profile": [
                f"{price.gpu_model} has no MIG profile {price.profile}"
                + (f": its profiles are {names}." if names else ": it has no MIG profiles.")
            ]
        }
    return {}


@transaction.atomic
def save_price(*, actor: Actor, price: Price, source: str) -> Price:
    """Create or change a price of a GPU model (or of one MIG profile of it, or of one of its
    devices allocated through a DRA device class) from its effective day on; the days before
    it keep the price that held then."""
    require_platform_admin(actor)
    price.profile = price.profile.strip().replace(".me", "+me")
    price.device_class = price.device_class.strip()
    errors = _price_errors(price)
    if errors:
        raise ValidationError(errors)
    previous = Price.objects.filter(pk=price.pk).first() if price.pk is not None else None
    old = _said(previous) if previous is not None else None
    price.full_clean()
    if old is not None and old == _said(price):
        return price  # nothing changed: nothing to save or audit
    price.save()
    record_audit(
        actor=actor, event=Event.PRICE_SAVED, source=source, target=price, old=old, new=_said(price)
    )
    return price


def _said(price: Price) -> dict[str, Any]:
    """The audit's picture of a price (JSON: the amount as its decimal text)."""
    return {
        "gpu_model": price.gpu_model,
        "profile": price.profile,
        "device_class": price.device_class,
        "per_hour": str(Decimal(price.per_hour).quantize(Decimal("0.0001"))),
        "effective_from": str(price.effective_from),
        "note": price.note,
    }


@transaction.atomic
def delete_price(*, actor: Actor, price: Price, source: str, confirmed: bool) -> None:
    """Delete a price: its days take the price before it (or none), audited. Only once
    confirmed: the page first says what it does (``costs.selectors.price_deletion``); the
    API's call and the admin's own confirmation page are the confirmation."""
    require_platform_admin(actor)
    if not confirmed:
        raise DomainError(
            "Not deleted: confirm the delete, having read what it changes.",
            code="confirmation_needed",
        )
    record_audit(
        actor=actor, event=Event.PRICE_DELETED, source=source, target=price, old=_said(price)
    )
    price.delete()


@transaction.atomic
def set_cost_policy(*, actor: Actor, currency: str, idle_sharing: str, source: str) -> CostPolicy:
    """Set the currency prices are in and who pays for idle capacity (said on every
    report)."""
    require_platform_admin(actor)
    policy = CostPolicy.objects.select_for_update().order_by("pk").first() or CostPolicy()
    policy.currency, policy.idle_sharing = currency.strip().upper(), idle_sharing
    if len(policy.currency) != 3 or not policy.currency.isalpha():
        raise ValidationError({"currency": ["A currency is its three-letter code, e.g. EUR."]})
    save_validated(policy, actor=actor, source=source, event=Event.COST_POLICY_CHANGED)
    return policy
