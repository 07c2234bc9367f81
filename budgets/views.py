"""The budgets page (platform admins: every team's; a lead: their own teams') and one
budget's page: use so far against the budget, the forecast to the period's end, what
enforcement does or would do, the extensions; the forms write through the services."""

from __future__ import annotations

from typing import cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.forms import ModelChoiceField
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from budgets import services
from budgets.forms import BudgetForm, DecisionForm, ExtensionForm
from budgets.models import Budget, BudgetExtension
from budgets.rows import rows_of
from budgets.selectors import (
    budget_deletion,
    budgets_for_user,
    get_budget_for_user,
    teams_for_budgets,
    unit_words,
)
from portal.access.permissions import is_platform_admin
from portal.vocabulary.errors import DomainError, user_message


def _add_errors(form: BudgetForm | ExtensionForm | DecisionForm, exc: ValidationError) -> None:
    for field, errors in exc.message_dict.items():
        for error in errors:
            form.add_error(field if field in form.fields else None, error)


@login_required
def budget_list(request: HttpRequest) -> HttpResponse:
    budgets = list(budgets_for_user(request.user))
    admin = is_platform_admin(request.user)
    form = None
    if admin:
        form = BudgetForm(request.POST or None, prefix="new")
        team_field = cast(ModelChoiceField, form.fields["team"])  # type: ignore[type-arg]
        team_field.queryset = teams_for_budgets(request.user).filter(budget__isnull=True)
        if request.method == "POST" and form.is_valid():
            try:
                budget = services.save_budget(
                    actor=request.user, budget=form.instance, source="web"
                )
            except ValidationError as exc:
                _add_errors(form, exc)
            else:
                messages.success(request, f"Budget of {budget.team.slug} set.")
                return redirect("budget-page", pk=budget.pk)
    elif request.method == "POST":
        raise PermissionDenied("Only platform admins set budgets.")
    waiting = (
        BudgetExtension.objects.filter(
            state=BudgetExtension.State.PENDING, budget__in=[b.pk for b in budgets]
        )
        .select_related("budget__team", "requested_by")
        .order_by("created_at")
    )
    rows = rows_of(budgets)
    units = {row.budget.pk: row.standing.unit for row in rows}
    context = {
        "rows": rows,
        "form": form,
        "admin": admin,
        "waiting": [(e, units.get(e.budget_id, "GPU-hours")) for e in waiting],
        "decision": DecisionForm(),
    }
    return render(request, "budgets/budget_list.html", context)


@login_required
def budget_detail(request: HttpRequest, pk: int) -> HttpResponse:
    budget = get_budget_for_user(request.user, pk)
    admin = is_platform_admin(request.user)
    form = BudgetForm(request.POST or None, instance=budget) if admin else None
    if request.method == "POST":
        if form is None:
            raise PermissionDenied("Only platform admins set budgets.")
        if form.is_valid():
            try:
                services.save_budget(actor=request.user, budget=form.instance, source="web")
            except ValidationError as exc:
                _add_errors(form, exc)
            else:
                messages.success(request, "Budget saved.")
                return redirect("budget-page", pk=budget.pk)
        budget = get_budget_for_user(request.user, pk)  # the row as stored, beside the form
    return _render_detail(request, budget, form=form, extend=ExtensionForm())


def _render_detail(
    request: HttpRequest,
    budget: Budget,
    *,
    form: BudgetForm | None,
    extend: ExtensionForm,
    status: int = 200,
) -> HttpResponse:
    extensions = budget.extensions.select_related("requested_by", "decided_by")
    row = rows_of([budget])[0]
    extend.fields["amount"].label = f"{row.standing.unit} to add"  # GPU-hours or the currency
    context = {
        "row": row,
        "form": form,
        "admin": is_platform_admin(request.user),
        "extend": extend,
        "decision": DecisionForm(),
        "extensions": list(extensions),
    }
    return render(request, "budgets/budget_detail.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def budget_delete(request: HttpRequest, pk: int) -> HttpResponse:
    """Remove a budget: first what it changes and a confirmation (GET, or a POST without
    ``confirm=yes``), then through the service, audited."""
    budget = get_budget_for_user(request.user, pk)
    if not is_platform_admin(request.user):
        raise PermissionDenied("Only platform admins remove budgets.")
    if request.method == "POST" and request.POST.get("confirm") == "yes":
        services.delete_budget(actor=request.user, budget=budget, source="web", confirmed=True)
        messages.success(request, f"Budget of {budget.team.slug} removed.")
        return redirect("budgets")
    unit = unit_words([budget])[budget.pk]  # GPU-hours or the currency
    context = {"budget": budget, "unit": unit, "effects": budget_deletion(budget)}
    return render(request, "budgets/budget_delete.html", context)


@login_required
@require_POST
def extension_new(request: HttpRequest, pk: int) -> HttpResponse:
    budget = get_budget_for_user(request.user, pk)
    form = ExtensionForm(request.POST)
    if not form.is_valid():  # the errors beside their fields, what was typed kept
        admin_form = BudgetForm(instance=budget) if is_platform_admin(request.user) else None
        return _render_detail(request, budget, form=admin_form, extend=form, status=400)
    try:
        services.request_budget_extension(
            actor=request.user,
            team=budget.team,
            amount=form.cleaned_data["amount"],
            reason=form.cleaned_data["reason"],
        )
    except ValidationError as exc:
        messages.error(request, user_message(exc))
    else:
        messages.success(request, "Extension asked for: a platform admin decides.")
    return redirect("budget-page", pk=budget.pk)


@login_required
@require_POST
def extension_decide(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    extension = BudgetExtension.objects.filter(pk=pk).select_related("budget").first()
    budget = get_budget_for_user(request.user, extension.budget_id if extension else 0)
    try:
        if action == "cancel":
            services.cancel_budget_extension(actor=request.user, extension_id=pk)
        else:
            services.decide_budget_extension(
                actor=request.user,
                extension_id=pk,
                approve=action == "approve",
                comment=request.POST.get("comment", ""),
            )
    except (DomainError, ValidationError) as exc:
        messages.error(request, user_message(exc))
    else:
        done = {"approve": "granted", "reject": "refused", "cancel": "withdrawn"}[action]
        messages.success(request, f"Extension #{pk} {done}.")
    if request.POST.get("next") == "list":
        return redirect("budgets")
    return redirect("budget-page", pk=budget.pk)
