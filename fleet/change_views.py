"""MIG change request pages: list and inbox, new request with a live impact preview, the
request page with its assessment, decision and live step timeline."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect, HttpResponseStopPolling

from fleet import changes
from fleet.forms import MigChangeForm
from fleet.models import MigChangeRequest
from portal.errors import DomainError, user_message
from portal.permissions import is_approver, is_platform_admin


def _vary(response: HttpResponse) -> HttpResponse:
    response["Vary"] = "HX-Request"
    return response


LIST_PAGE_SIZE = 50


@login_required
def change_list(request: HttpRequest) -> HttpResponse:
    # The lists show no assessment: leave the large JSON columns in the database.
    visible = changes.list_mig_changes_for_user(request.user).defer(
        "assessment", "previous_configs", "queue_changes"
    )
    inbox = []
    if is_approver(request.user) or is_platform_admin(request.user):
        inbox = list(
            visible.filter(state=MigChangeRequest.State.PENDING).exclude(requested_by=request.user)
        )
    page = Paginator(visible, LIST_PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        "fleet/change_list.html",
        {
            "inbox": inbox,
            "page": page,
            "requests": page.object_list,
            "may_request": changes.teams_user_may_request_for(request.user).exists(),
        },
    )


@login_required
def change_new(request: HttpRequest) -> HttpResponse:
    if not changes.teams_user_may_request_for(request.user).exists():
        raise PermissionDenied("Only team leads and platform admins ask for MIG changes.")
    initial = {
        "nodes": request.GET.getlist("nodes"),
        "target_config": request.GET.get("target_config", ""),
    }
    pool_name = request.GET.get("pool", "")
    if pool_name and not initial["nodes"]:  # a suggestion for a whole pool
        from fleet.models import NodePool, ObservedNode

        pool = NodePool.objects.filter(name=pool_name).first()
        if pool is not None and pool.node_selector:
            initial["nodes"] = list(
                ObservedNode.objects.filter(
                    gone_since__isnull=True, labels__contains=pool.node_selector
                ).values_list("name", flat=True)
            )
    form = MigChangeForm(request.POST or None, user=request.user, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            created = changes.request_mig_change(
                actor=request.user,
                team=data["team"],
                nodes=data["nodes"],
                target_config=data["target_config"],
                reason=data["reason"],
                window_start=data["window_start"],
            )
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                for error in errors:
                    form.add_error(field if field in form.fields else None, error)
        else:
            messages.success(request, f"Request #{created.pk} is waiting for an approver.")
            if request.htmx:
                return HttpResponseClientRedirect(f"/changes/{created.pk}/")
            return redirect("change-detail", pk=created.pk)
    template = "fleet/change_form.html#change-form" if request.htmx else "fleet/change_form.html"
    return _vary(render(request, template, {"form": form}))


@login_required
@require_POST
def change_preview(request: HttpRequest) -> HttpResponse:
    """The impact of the form's current nodes and config, nothing saved (htmx)."""
    if not changes.may_preview(request.user):
        raise PermissionDenied("Only team leads, approvers and platform admins preview changes.")
    form = MigChangeForm(request.POST, user=request.user)
    nodes = request.POST.getlist("nodes")
    config = request.POST.get("target_config", "")
    assessment = changes.preview(nodes=nodes, config=config) if nodes and config else None
    return render(
        request, "fleet/change_form.html#change-form", {"form": form, "assessment": assessment}
    )


@login_required
def change_detail(request: HttpRequest, pk: int) -> HttpResponse:
    change = changes.get_mig_change_for_user(request.user, pk)
    user = request.user
    context = {
        "change": change,
        "steps": list(change.steps.all()),
        "may_decide": (is_approver(user) or is_platform_admin(user))
        and change.requested_by_id != user.pk
        and change.state == MigChangeRequest.State.PENDING,
        "may_cancel": (change.requested_by_id == user.pk or is_platform_admin(user))
        and change.state in ("draft", "pending", "approved", "scheduled"),
        "may_rollback": is_platform_admin(user) and change.state in ("failed", "succeeded"),
    }
    if request.htmx and request.GET.get("part") == "timeline":
        response = render(request, "fleet/change_detail.html#timeline", context)
        if change.is_terminal:
            return HttpResponseStopPolling(response.content)
        return _vary(response)
    return _vary(render(request, "fleet/change_detail.html", context))


def _decide(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    comment = request.POST.get("comment", "")
    try:
        if action == "approve":
            changes.approve_mig_change(request_id=pk, approver=request.user, comment=comment)
            messages.success(request, "Approved: the change runs now (or in its window).")
        elif action == "reject":
            changes.reject_mig_change(request_id=pk, approver=request.user, comment=comment)
            messages.success(request, "Rejected.")
        elif action == "cancel":
            changes.cancel_mig_change(request_id=pk, actor=request.user)
            messages.success(request, "Cancelled.")
        elif action == "rollback":
            changes.rollback_mig_change(request_id=pk, actor=request.user)
            messages.success(request, "Rolling back to the previous configs.")
    except (DomainError, ValidationError) as exc:
        messages.error(request, user_message(exc))
    if request.htmx:
        return HttpResponseClientRedirect(f"/changes/{pk}/")
    return redirect("change-detail", pk=pk)


@login_required
@require_POST
def change_action(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    if action not in ("approve", "reject", "cancel", "rollback"):
        raise PermissionDenied("Unknown action.")
    changes.get_mig_change_for_user(request.user, pk)  # 404 across teams
    return _decide(request, pk, action)
