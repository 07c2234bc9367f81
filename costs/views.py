"""Costs in the portal: the month's showback (every team for approvers and platform admins,
the user's own teams for everyone else), a team's invoice (page and CSV), the prices page
(platform admins change prices there, through the service), and the home's cost panel."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from costs import reports, selectors, services
from costs.forms import MonthForm, PolicyForm, PriceForm
from costs.models import Price
from portal.access.permissions import is_platform_admin, sees_every_team


def _month(text: str) -> dt.date:
    if not text:
        return timezone.now().date().replace(day=1)
    try:
        return selectors.month_of(text)
    except ValueError as bad:
        raise Http404(selectors.BAD_MONTH) from bad


def _months(first: dt.date) -> dict[str, str]:
    """The month before and the month after, each only if it has or may have costs: never
    after this month, nor before the month of the first history ("" where none is)."""
    before = (first - dt.timedelta(days=1)).replace(day=1)
    after = selectors.month_end(first)
    began = selectors.first_month()
    this_month = timezone.now().date().replace(day=1)
    return {
        "previous": f"{before:%Y-%m}" if began is not None and before >= began else "",
        "next": f"{after:%Y-%m}" if after <= this_month else "",
    }


@login_required
def costs_page(request: HttpRequest) -> HttpResponse:
    """A month's showback: each team's GPU-hours and cost, the platform's line, and (for
    who sees every team) the fleet's total, its pools and its queues."""
    form = MonthForm(request.GET)
    if not form.is_valid():
        return render(request, "costs/costs.html", {"form": form}, status=400)
    first = _month(form.cleaned_data["month"])
    charge = selectors.chargeback_for_user(request.user, first, form.cleaned_data["team"])
    sees_all = sees_every_team(request.user)
    context = {
        "form": form,
        "month": first,
        **_months(first),
        "summary": reports.summary(charge, sees_all=sees_all),
        "sees_all": sees_all,
    }
    return render(request, "costs/costs.html", context)


def _invoice(request: HttpRequest, team: str, month: str) -> dict[str, Any]:
    first = _month(month)
    charge = selectors.chargeback_for_user(request.user, first, team)
    return {"bill": reports.invoice(charge, team), "month": first, **_months(first)}


@login_required
def invoice_page(request: HttpRequest, team: str, month: str) -> HttpResponse:
    """A team's invoice for a month: its lines and days, its total, the policy said."""
    return render(request, "costs/invoice.html", _invoice(request, team, month))


@login_required
def invoice_csv(request: HttpRequest, team: str, month: str) -> HttpResponse:
    bill = _invoice(request, team, month)["bill"]
    response = HttpResponse(reports.invoice_csv(bill), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="invoice-{team}-{month}.csv"'
    return response


def forecast(so_far: Decimal, first: dt.date, upto: dt.datetime | None) -> Decimal | None:
    """The month's cost at its pace so far: what it cost up to the hours rolled up, over the
    part of the month they cover (None: nothing of the month rolled up yet)."""
    start = dt.datetime.combine(first, dt.time(0), tzinfo=dt.UTC)
    end = dt.datetime.combine(selectors.month_end(first), dt.time(0), tzinfo=dt.UTC)
    if upto is None or upto <= start:
        return None
    covered = (min(upto, end) - start).total_seconds()
    return so_far * Decimal((end - start).total_seconds()) / Decimal(covered)


@login_required
def cost_panel(request: HttpRequest, team: str) -> HttpResponse:
    """The home's small panel: this month's cost so far and the forecast to its end."""
    first = timezone.now().date().replace(day=1)
    charge = selectors.chargeback_for_user(request.user, first, team)
    bill = charge.teams.get(team)
    so_far = bill.total if bill is not None else Decimal("0.00")
    upto = selectors.rolled_up_to()
    ahead = forecast(bill.exact if bill is not None else Decimal(0), first, upto)
    context = {
        "team": team,
        "month": first,
        "so_far": so_far,
        "forecast": reports.money(ahead) if ahead is not None else None,
        "upto": upto,
        "currency": charge.currency,
        "says": reports.policy_says(charge),
    }
    return render(request, "costs/panel.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def prices_page(request: HttpRequest) -> HttpResponse:
    """Every price (anyone signed in may read them); platform admins add one or set the
    policy here, through the service."""
    admin = is_platform_admin(request.user)
    form, policy_form = PriceForm(), PolicyForm(instance=selectors.policy())
    status = 200
    if request.method == "POST":
        if not admin:
            raise PermissionDenied("Only platform admins can change prices.")
        if "idle_sharing" in request.POST:
            policy_form = PolicyForm(request.POST, instance=selectors.policy())
            done = _saved(
                policy_form,
                lambda f: services.set_cost_policy(
                    actor=request.user,
                    source="web",
                    currency=f.data.get("currency", ""),
                    idle_sharing=f.data.get("idle_sharing", ""),
                ),
            )
        else:
            form = PriceForm(request.POST)
            done = _saved(
                form,
                lambda f: services.save_price(actor=request.user, price=f.instance, source="web"),
            )
        if done:
            return redirect("cost-prices")
        status = 400
    context = {
        "prices": Price.objects.all(),
        "form": form,
        "policy_form": policy_form,
        "policy": selectors.policy(),
        "admin": admin,
        "says": reports.SHARING_SAYS,
        "prices_say": reports.PRICES_SAY,
    }
    return render(request, "costs/prices.html", context, status=status)


def _saved(form: Any, save: Any) -> bool:
    """Save through the service; its refusal lands on the form's fields."""
    if not form.is_valid():
        return False
    try:
        save(form)
    except ValidationError as refused:
        for field, errors in refused.message_dict.items():
            form.add_error(field if field in form.fields else None, errors)
        return False
    return True


@login_required
@require_http_methods(["GET", "POST"])
def delete_price(request: HttpRequest, pk: int) -> HttpResponse:
    """Delete a price: first what it changes and a confirmation (GET, or a POST without
    ``confirm=yes``), then through the service, audited."""
    if not is_platform_admin(request.user):
        raise PermissionDenied("Only platform admins can change prices.")
    price = get_object_or_404(Price, pk=pk)
    if request.method == "POST" and request.POST.get("confirm") == "yes":
        services.delete_price(actor=request.user, price=price, source="web", confirmed=True)
        messages.success(request, f"The price of {price} was deleted.")
        return redirect("cost-prices")
    context = {"price": price, "effects": selectors.price_deletion(price)}
    return render(request, "costs/price_delete.html", context)
