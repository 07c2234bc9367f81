"""Pages of reviewed changes: MIG change requests (list and inbox, new request with a live
impact preview, the request with its assessment, decision and live step timeline) and quota
requests (list and inbox, the form, the request with its decision)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect, HttpResponseStopPolling

from changes import mig, mig_policy, quota, selectors
from changes.approval import may_decide, may_preview, may_request, teams_user_may_request_for
from changes.decisions import MIG_VERBS, QUOTA_VERBS, Asked, decide, verb_of
from changes.effects import CONFIRMED, effects_of
from changes.filters import MigChangeFilter, QuotaRequestFilter
from changes.forms import MigChangeForm, QuotaRequestForm
from changes.models import MigChangeRequest, QuotaChangeRequest
from cluster.models import Cluster, ObservedNode
from cluster.scope import chosen_cluster, cluster_choice
from fleet.membership import holds
from fleet.models import NodePool
from portal.access.permissions import is_platform_admin
from portal.infra.htmx import HtmxHttpRequest
from portal.vocabulary.errors import DomainError, user_message
from queues.models import ClusterQueue

LIST_PAGE_SIZE = 50
R = TypeVar("R", bound=Model)


def _of_chosen_cluster(request: HttpRequest, visible: QuerySet[R]) -> QuerySet[R]:
    """The requests of the chosen cluster (every cluster's when none is chosen)."""
    chosen = chosen_cluster(request)
    return visible.filter(cluster_id=chosen.pk) if chosen is not None else visible


def _name_clusters(request: HttpRequest, *lists: Iterable[Any]) -> dict[str, Any]:
    """Each row's cluster as ``row.of_cluster`` when every cluster's rows are shown (the
    lists name the cluster on each row then), and whether they are."""
    choice = cluster_choice(request)
    named = choice.several and choice.chosen is None
    if named:
        clusters = {c.pk: c for c in choice.clusters}
        for rows in lists:
            for row in rows:
                row.of_cluster = clusters.get(row.cluster_id)
    return {"cluster_column": named}


def _vary(response: HttpResponse) -> HttpResponse:
    response["Vary"] = "HX-Request"
    return response


def _add_errors(form: MigChangeForm | QuotaRequestForm, exc: ValidationError) -> None:
    """The service's field errors on the form's fields (the rest on the form)."""
    for field, errors in exc.message_dict.items():
        for error in errors:
            form.add_error(field if field in form.fields else None, error)


# ----------------------------------------------------------------------------- MIG changes


@login_required
def change_list(request: HttpRequest) -> HttpResponse:
    # The lists show no assessment: leave the large JSON columns in the database.
    visible = _of_chosen_cluster(
        request,
        selectors.list_mig_changes_for_user(request.user).defer(
            "assessment", "previous_configs", "queue_changes"
        ),
    )
    shown = MigChangeFilter(request.GET, queryset=visible, request=request)
    page = Paginator(shown.qs, LIST_PAGE_SIZE).get_page(request.GET.get("page"))
    # Every pending request is in the inbox (hundreds at a time): only what a line shows.
    inbox = selectors.mig_inbox(request.user, visible.select_related(None))
    requests = list(page.object_list)
    return render(
        request,
        "changes/change_list.html",
        {
            "inbox": inbox,
            "page": page,
            "requests": requests,
            "may_request": may_request(request.user),
            **_name_clusters(request, inbox, requests),
        },
    )


@login_required
def change_new(request: HtmxHttpRequest) -> HttpResponse:
    if not may_request(request.user):
        raise PermissionDenied("Only team leads and platform admins ask for MIG changes.")
    initial = {
        "nodes": request.GET.getlist("nodes"),
        "target_config": request.GET.get("target_config", ""),
    }
    pool_name = request.GET.get("pool", "")
    if request.GET.get("cluster"):
        initial["cluster"] = request.GET["cluster"]
    elif (remembered := chosen_cluster(request)) is not None:
        initial["cluster"] = remembered.name  # the cluster the switcher shows
    if pool_name and not initial["nodes"]:  # a suggestion for a whole pool
        # the pool of that name on the cluster asked for or shown; with every cluster shown,
        # the first cluster's by name that has one (the form then starts on it)
        pools = NodePool.objects.on_every_cluster().filter(name=pool_name)
        if initial.get("cluster"):
            pools = pools.filter(cluster__name=initial["cluster"])
        pool = pools.select_related("cluster").order_by("cluster__name").first()
        if pool is not None and pool.node_selector:
            initial["cluster"] = pool.cluster.name
            initial["nodes"] = list(
                holds(
                    ObservedNode.objects.on(pool.cluster_id).filter(gone_since__isnull=True),
                    pool,
                    NodePool.objects.on(pool.cluster_id),
                ).values_list("name", flat=True)
            )
    form = MigChangeForm(request.POST or None, user=request.user, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            created = mig.request_mig_change(
                actor=request.user,
                team=data["team"],
                cluster=data["cluster"],
                nodes=data["nodes"],
                target_config=data["target_config"],
                reason=data["reason"],
                window_start=data["window_start"],
            )
        except ValidationError as exc:
            _add_errors(form, exc)
        else:
            messages.success(request, f"Request #{created.pk} is waiting for an approver.")
            if request.htmx:
                return HttpResponseClientRedirect(f"/changes/{created.pk}/")
            return redirect("change-detail", pk=created.pk)
    context: dict[str, object] = {"form": form}
    # Opened from a link naming nodes and a config (the home page's fix), or refused: the
    # impact of what the form holds, at once.
    source = request.POST if request.method == "POST" else request.GET
    config = source.get("target_config", "")
    wanted = source.getlist("nodes") if request.method == "POST" else initial["nodes"]
    if wanted and config:
        offered = {name for name, _ in form.fields["nodes"].choices}  # type: ignore[attr-defined]
        nodes = [name for name in wanted if name in offered]
        if nodes:
            context["assessment"] = mig.preview(
                viewer=request.user, nodes=nodes, config=config, cluster=form.chosen_cluster
            )
    template = (
        "changes/change_form.html#change-form" if request.htmx else "changes/change_form.html"
    )
    return _vary(render(request, template, context))


@login_required
@require_POST
def change_preview(request: HttpRequest) -> HttpResponse:
    """The impact of the form's current nodes and config, nothing saved (htmx)."""
    if not may_preview(request.user):
        raise PermissionDenied("Only team leads, approvers and platform admins preview changes.")
    form = MigChangeForm(request.POST, user=request.user)
    # Only the nodes the form offers (the cluster's GPU nodes): bounded, and known.
    offered = {name for name, _ in form.fields["nodes"].choices}  # type: ignore[attr-defined]
    nodes = [name for name in dict.fromkeys(request.POST.getlist("nodes")) if name in offered]
    config = request.POST.get("target_config", "")
    assessment = (
        mig.preview(viewer=request.user, nodes=nodes, config=config, cluster=form.chosen_cluster)
        if nodes and config
        else None
    )
    return render(
        request, "changes/change_form.html#change-form", {"form": form, "assessment": assessment}
    )


@login_required
def change_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    change, actions = selectors.get_mig_change_with_actions(request.user, pk)
    context = {
        "change": change,
        "actions": actions,
        **selectors.change_for(request.user, change, list(change.steps.all())),
    }
    if actions.decide:
        context["confirm_reasons"] = needs_confirmation(change)
    if request.htmx and request.GET.get("part") == "timeline":
        response = render(request, "changes/change_detail.html#timeline", context)
        if change.is_terminal:
            # The change ended while the page watched: reload it once, so that the actions
            # the end offers (roll back, return to service) are shown with it.
            stop = HttpResponseStopPolling(response.content)
            stop["HX-Refresh"] = "true"
            return stop
        return _vary(response)
    return _vary(render(request, "changes/change_detail.html", context))


def needs_confirmation(change: MigChangeRequest) -> list[str]:
    """Why approving ``change`` on its page asks for a tick first (nothing when it does not):
    a drain, or a change whose verdict breaks quota."""
    assessment = change.impact
    if change.is_drain:
        return [
            "A drain evicts the node's GPU pods and takes its GPUs out of the fleet until an "
            "admin returns it to service.",
            *assessment.reasons,
        ]
    if change.assessment and assessment.verdict == "breaks_quota":
        return list(assessment.reasons)
    return []


def _asked(request: HttpRequest, pk: int) -> Asked:
    """A decision as a page's form asks it."""
    return Asked(
        request_id=pk,
        user=request.user,
        comment=request.POST.get("comment", ""),
        seen=request.POST.get("fingerprint", ""),
    )


@login_required
@require_http_methods(["GET", "POST"])
def change_action(request: HtmxHttpRequest, pk: int, action: str) -> HttpResponse:
    """Do ``action`` to a change. A destructive one (cancel, abort, roll back, return to
    service) first shows what it will do and asks to confirm (GET, or a POST without
    ``confirm=yes``); the API acts at once (its call is the confirmation)."""
    verb = verb_of("mig", action)
    change, allowed = selectors.get_mig_change_with_actions(request.user, pk)  # 404 across teams
    if action in CONFIRMED and request.POST.get("confirm") != "yes":
        if not getattr(allowed, verb.allowed):
            raise PermissionDenied("You may not do this to this change now.")
        return render(
            request,
            "changes/change_confirm.html",
            {"change": change, "action": action, "effects": effects_of(action, change)},
        )
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    try:
        if action == "approve" and request.POST.get("confirm") != "yes":
            change, allowed = selectors.get_mig_change_with_actions(request.user, pk)
            if allowed.decide and needs_confirmation(change):  # else the service refuses
                what = "a drain" if change.is_drain else "a change that breaks quota"
                raise DomainError(
                    f"Not approved: tick “I have read why” to approve {what}.",
                    code="confirmation_needed",
                )
        decide("mig", action, _asked(request, pk))
    except (DomainError, ValidationError) as exc:
        messages.error(request, user_message(exc))
    else:
        messages.success(request, MIG_VERBS[action].done)
    if request.htmx:
        return HttpResponseClientRedirect(f"/changes/{pk}/")
    return redirect("change-detail", pk=pk)


# ----------------------------------------------------------------------------- quota requests


@login_required
def quota_list(request: HttpRequest) -> HttpResponse:
    visible = _of_chosen_cluster(request, selectors.list_quota_requests_for_user(request.user))
    shown = QuotaRequestFilter(request.GET, queryset=visible, request=request)
    page = Paginator(shown.qs, LIST_PAGE_SIZE).get_page(request.GET.get("page"))
    inbox, requests = selectors.inbox(request.user, visible), list(page.object_list)
    return render(
        request,
        "changes/quota_list.html",
        {
            "inbox": inbox,
            "page": page,
            "requests": requests,
            "may_request": may_request(request.user),
            **_name_clusters(request, inbox, requests),
        },
    )


def _quota_prefill(request: HttpRequest, teams: QuerySet[Any]) -> dict[str, object]:
    """The form filled in from a link (a usage suggestion, an explanation next to a
    namespace, a queue that admits nothing): ``?team=&namespace=&cluster=&resource=``, or
    ``?team=&cluster_queue=&cluster=`` for a ClusterQueue the team's LocalQueues use. A
    name two clusters share is taken only with its cluster."""
    initial: dict[str, object] = {}
    wanted = teams.filter(slug=request.GET.get("team", "")).first()
    if wanted is not None:
        initial["team"] = wanted
        named = wanted.namespaces.filter(name=request.GET.get("namespace", ""))
        if request.GET.get("cluster"):
            named = named.filter(cluster__name=request.GET["cluster"])
        found = list(named[:2])
        if len(found) == 1:
            initial.update({"kind": "namespace", "namespace": found[0]})
        if request.GET.get("cluster_queue"):
            # Any cluster's queue of that name the team uses, then the cluster asked for:
            # without one, a name two clusters share is left unchosen (below).
            queues = (
                ClusterQueue.objects.on_every_cluster()
                .filter(name=request.GET["cluster_queue"], local_queues__namespace__team=wanted)
                .distinct()
            )
            if request.GET.get("cluster"):
                queues = queues.filter(cluster__name=request.GET["cluster"])
            named_queues = list(queues[:2])
            if len(named_queues) == 1:
                initial.update({"kind": "queue", "cluster_queue": named_queues[0]})
    if request.GET.get("resource"):
        initial["resource"] = request.GET["resource"][:100]
    return initial


@login_required
def quota_new(request: HttpRequest) -> HttpResponse:
    teams = teams_user_may_request_for(request.user)
    if not teams.exists():
        raise PermissionDenied("Only team leads and platform admins ask for quota.")
    initial = _quota_prefill(request, teams) if request.method == "GET" else {}
    form = QuotaRequestForm(
        request.POST or None,
        teams=teams,
        initial=initial,
        admin=is_platform_admin(request.user),
    )
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            created = quota.request_quota_change(
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
                override_reason=data.get("override_reason", ""),
            )
        except ValidationError as exc:
            _add_errors(form, exc)
        else:
            created.refresh_from_db()
            if created.state == QuotaChangeRequest.State.APPROVED:
                messages.success(request, f"Granted at once by rule “{created.auto_rule}”.")
            else:
                messages.success(request, f"Request #{created.pk} is waiting for an approver.")
            return redirect("quota-detail", pk=created.pk)
    return render(request, "changes/quota_form.html", {"form": form})


@login_required
def quota_detail(request: HttpRequest, pk: int) -> HttpResponse:
    change, actions = selectors.get_quota_request_with_actions(request.user, pk)
    assessment = quota.QuotaAssessment.from_json(change.assessment, request=change)
    return render(
        request,
        "changes/quota_detail.html",
        {
            "change": change,
            "actions": actions,
            "assessment": assessment,
            "fingerprint": assessment.fingerprint,
            "gone": quota.gone_message(change) if change.target_deleted else "",
            "what_if": selectors.quota_request_what_if(request.user, change),
        },
    )


@login_required
@require_POST
def quota_action(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    selectors.get_quota_request_for_user(request.user, pk)  # 404 across teams
    try:
        decide("quota", action, _asked(request, pk))
    except (DomainError, ValidationError) as exc:
        messages.error(request, user_message(exc))
    else:
        messages.success(request, QUOTA_VERBS[action].done)
    return redirect("quota-detail", pk=pk)


# ------------------------------------------------------------------------ the MIG policy


def _grants_text(grants: Iterable[dict[str, Any]]) -> str:
    return "\n".join(f"{g['namespace']} {g['profile']} {g['devices']}" for g in grants)


def _grants_of(text: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The form's grants, one a line: ``<namespace> <profile> <devices>``."""
    grants, errors = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 3:
            errors.append(f"Line {number}: write a namespace, a profile and a count of devices.")
            continue
        grants.append({"namespace": parts[0], "profile": parts[1], "devices": parts[2]})
    return grants, errors


def _policy_page(
    request: HttpRequest, *, errors: dict[str, Any] | None = None, status: int = 200
) -> HttpResponse:
    views = mig_policy.mig_policies_for_user(request.user)
    admin = is_platform_admin(request.user)
    for view in views:
        view.offered = mig_policy.offered_profiles(view.cluster) if admin else []
        view.text = _grants_text(view.grants)
        view.errors = (errors or {}).get(view.cluster.name, {})
        view.unmapped = mig_policy.kueue_unmapped(view)
    return render(
        request,
        "changes/mig_policy.html",
        {
            "policies": views,
            "may_propose": admin,
            "may_decide": may_decide(request.user),
            "posted": request.POST if errors else {},
        },
        status=status,
    )


@login_required
def mig_policy_page(request: HttpRequest) -> HttpResponse:
    """Each cluster's MIG policy for per-claim MIG: its mode and grants (a lead: their own
    teams' only), the change waiting for a decision with its impact, the proposal form
    (platform admins)."""
    return _policy_page(request)


@login_required
@require_POST
def mig_policy_propose(request: HttpRequest, cluster: str) -> HttpResponse:
    found = get_object_or_404(Cluster.objects.defer("credential"), name=cluster)
    grants, line_errors = _grants_of(request.POST.get("grants", ""))
    try:
        if line_errors:
            raise ValidationError({"grants": line_errors})
        mig_policy.propose_mig_policy(
            actor=request.user,
            cluster=found,
            governed=request.POST.get("governed") == "on",
            grants=grants,
            reason=request.POST.get("reason", ""),
        )
    except ValidationError as exc:
        return _policy_page(request, errors={found.name: _policy_errors(exc)}, status=422)
    messages.success(request, "The policy change is proposed: an approver decides it.")
    return redirect("mig-policy")


def _policy_errors(exc: ValidationError) -> dict[str, list[str]]:
    """The service's field errors by the form's fields (each grant's under ``grants``)."""
    out: dict[str, list[str]] = {}
    for field, errors in exc.message_dict.items():
        if field.startswith("grants["):
            index = int(field[len("grants[") : field.index("]")])
            out.setdefault("grants", []).extend(f"Line {index + 1}: {e}" for e in errors)
        else:
            out.setdefault(field if field in ("reason", "grants") else "all", []).extend(errors)
    return out


@login_required
@require_POST
def mig_policy_decide(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    try:
        verb = decide("policy", action, _asked(request, pk))
    except (DomainError, ValidationError) as exc:
        messages.error(request, user_message(exc))
    else:
        messages.success(request, verb.done)
    return redirect("mig-policy")
