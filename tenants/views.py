"""Quota request pages: list and approver inbox, the form, the request with its decision."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from portal.errors import DomainError, user_message
from portal.permissions import is_approver, is_platform_admin
from tenants import quota_requests as service
from tenants.forms import QuotaRequestForm
from tenants.models import Membership, QuotaChangeRequest, Team


def _teams(user: object) -> object:
    if is_platform_admin(user):  # type: ignore[arg-type]
        return Team.objects.all()
    return Team.objects.filter(memberships__user_id=user.pk, memberships__role=Membership.Role.LEAD)  # type: ignore[attr-defined]


LIST_PAGE_SIZE = 50


@login_required
def quota_list(request: HttpRequest) -> HttpResponse:
    visible = service.list_quota_requests_for_user(request.user)
    inbox = []
    if is_approver(request.user) or is_platform_admin(request.user):
        inbox = list(
            visible.filter(state=QuotaChangeRequest.State.PENDING).exclude(
                requested_by=request.user
            )
        )
    page = Paginator(visible, LIST_PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        "tenants/quota_list.html",
        {
            "inbox": inbox,
            "page": page,
            "requests": page.object_list,
            "may_request": _teams(request.user).exists(),
        },
    )  # type: ignore[attr-defined]


@login_required
def quota_new(request: HttpRequest) -> HttpResponse:
    teams = _teams(request.user)
    if not teams.exists():  # type: ignore[attr-defined]
        raise PermissionDenied("Only team leads and platform admins ask for quota.")
    initial: dict[str, object] = {}
    if request.method == "GET":  # prefilled from a link (a usage suggestion, an explanation)
        wanted = teams.filter(slug=request.GET.get("team", "")).first()  # type: ignore[attr-defined]
        if wanted is not None:
            initial["team"] = wanted
            namespace = wanted.namespaces.filter(name=request.GET.get("namespace", "")).first()
            if namespace is not None:
                initial.update({"kind": "namespace", "namespace": namespace})
        if request.GET.get("resource"):
            initial["resource"] = request.GET["resource"][:100]
    form = QuotaRequestForm(request.POST or None, teams=teams, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            created = service.request_quota_change(
                actor=request.user,
                team=data["team"],
                kind=data["kind"],
                resource=data["resource"].strip(),
                requested=data["requested"].strip(),
                reason=data["reason"],
                namespace=data["namespace"],
                cluster_queue=data["cluster_queue"],
                flavor=data["flavor"].strip(),
                grant_until=data["grant_until"],
            )
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                for error in errors:
                    form.add_error(field if field in form.fields else None, error)
        else:
            created.refresh_from_db()
            if created.state == QuotaChangeRequest.State.APPROVED:
                messages.success(request, f"Granted at once by rule “{created.auto_rule}”.")
            else:
                messages.success(request, f"Request #{created.pk} is waiting for an approver.")
            return redirect("quota-detail", pk=created.pk)
    return render(request, "tenants/quota_form.html", {"form": form})


@login_required
def quota_detail(request: HttpRequest, pk: int) -> HttpResponse:
    change = service.get_quota_request_for_user(request.user, pk)
    user = request.user
    may_decide = (
        (is_approver(user) or is_platform_admin(user))
        and change.requested_by_id != user.pk
        and change.state == QuotaChangeRequest.State.PENDING
    )
    return render(
        request, "tenants/quota_detail.html", {"change": change, "may_decide": may_decide}
    )


@login_required
@require_POST
def quota_action(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    service.get_quota_request_for_user(request.user, pk)  # 404 across teams
    comment = request.POST.get("comment", "")
    try:
        if action == "approve":
            service.approve_quota_change(request_id=pk, approver=request.user, comment=comment)
            messages.success(request, "Approved: the quota changes with the next apply.")
        elif action == "reject":
            service.reject_quota_change(request_id=pk, approver=request.user, comment=comment)
            messages.success(request, "Rejected.")
        else:
            raise PermissionDenied("Unknown action.")
    except (DomainError, ValidationError) as exc:
        messages.error(request, user_message(exc))
    return redirect("quota-detail", pk=pk)
