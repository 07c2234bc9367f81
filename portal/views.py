"""Portal-wide pages."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from fleet.selectors import explain_waiting, last_sync
from tenants.models import QuotaChangeRequest
from tenants.selectors import list_teams_for_user


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The signed-in user's teams: quotas, limits, queues, and what waits and why."""
    teams = list(list_teams_for_user(request.user))
    namespaces = [ns for team in teams for ns in team.namespaces.all()]
    workloads, pods, failures = explain_waiting([ns.name for ns in namespaces])
    by_namespace: dict[str, dict[str, list[object]]] = defaultdict(
        lambda: {"workloads": [], "pods": [], "failures": []}
    )
    for failure in failures:
        by_namespace[failure.namespace]["failures"].append(failure)
    for workload in workloads:
        by_namespace[workload.namespace]["workloads"].append(workload)
    for pod in pods:
        by_namespace[pod.namespace]["pods"].append(pod)
    for ns in namespaces:
        ns.observed = by_namespace[ns.name]  # type: ignore[attr-defined]
    grants = defaultdict(list)
    for grant in (
        QuotaChangeRequest.objects.filter(
            team__in=teams, state=QuotaChangeRequest.State.APPROVED, grant_until__isnull=False
        )
        .select_related("namespace", "cluster_queue")
        .order_by("grant_until")
    ):
        grants[grant.team_id].append(grant)
    for team in teams:
        team.grants = grants[team.pk]  # type: ignore[attr-defined]
    return render(request, "portal/home.html", {"teams": teams, "sync": last_sync()})


class LoginView(auth_views.LoginView):
    """Username and password, single sign-on, or both (QM_LOCAL_LOGIN, OIDC_RP_CLIENT_ID)."""

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["sso_enabled"] = settings.QM_OIDC_ENABLED
        context["sso_name"] = settings.QM_OIDC_PROVIDER_NAME
        context["local_login"] = settings.QM_LOCAL_LOGIN or not settings.QM_OIDC_ENABLED
        return context

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if settings.QM_OIDC_ENABLED and not settings.QM_LOCAL_LOGIN:
            return HttpResponse(
                f"Sign in with {settings.QM_OIDC_PROVIDER_NAME}: passwords are off here.",
                status=403,
                content_type="text/plain",
            )
        return super().post(request, *args, **kwargs)


def _sso_only(view: Any) -> Any:
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not settings.QM_OIDC_ENABLED:
            raise Http404("Single sign-on is not configured (OIDC_RP_CLIENT_ID).")
        return view(request, *args, **kwargs)  # type: ignore[no-any-return]

    return wrapped


sso_start = _sso_only(OIDCAuthenticationRequestView.as_view())
sso_callback = _sso_only(OIDCAuthenticationCallbackView.as_view())


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: the process answers."""
    return JsonResponse({"status": "ok"})


def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus metrics of the whole installation (see portal/metrics.py)."""
    import hmac

    from prometheus_client import CONTENT_TYPE_LATEST

    from portal.metrics import exposition

    token = settings.QM_METRICS_TOKEN
    offered = request.headers.get("Authorization", "").removeprefix("Bearer ")
    if token and not hmac.compare_digest(offered.encode(), token.encode()):
        return HttpResponse(
            "metrics need the bearer token (QM_METRICS_TOKEN)\n",
            status=401,
            content_type="text/plain",
            headers={"WWW-Authenticate": 'Bearer realm="metrics"'},
        )
    return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)


def readyz(request: HttpRequest) -> JsonResponse:
    """Readiness: PostgreSQL and Redis answer (503 otherwise); the Kubernetes API is reported."""
    from portal.health import readiness

    ready, checks = readiness()
    return JsonResponse(
        {"status": "ok" if ready else "unavailable", "checks": checks}, status=200 if ready else 503
    )


@login_required
def tokens(request: HttpRequest) -> HttpResponse:
    """Personal API tokens: create (the text is shown once), list, revoke."""
    from django.core.exceptions import ValidationError

    from portal.models import ApiToken
    from portal.tokens import create_token, revoke_token

    created_text = ""
    errors: dict[str, list[str]] = {}
    if request.method == "POST":
        if "revoke" in request.POST:
            revoke_token(user=request.user, token_id=int(request.POST["revoke"]))
            return redirect("tokens")
        days_text = request.POST.get("days", "90")
        try:
            days = int(days_text) if days_text else None
            _, created_text = create_token(
                user=request.user, name=request.POST.get("name", ""), days=days
            )
        except ValueError:
            errors = {"days": ["A number of days, or empty for no expiry."]}
        except ValidationError as exc:
            errors = exc.message_dict
    return render(
        request,
        "portal/tokens.html",
        {
            "tokens": ApiToken.objects.filter(user=request.user),
            "created": created_text,
            "errors": errors,
        },
    )


AUDIT_PAGE_SIZE = 50


@login_required
def audit(request: HttpRequest) -> HttpResponse:
    """The audit log, filtered by team, event, actor, source and day; newest first."""
    import datetime as dt

    from django.core.paginator import Paginator

    from portal.models import AuditEvent
    from portal.permissions import is_approver, is_platform_admin
    from portal.selectors import audit_events_for_user

    events = audit_events_for_user(request.user)
    filters = {
        key: request.GET.get(key, "").strip()
        for key in ("team", "event", "actor", "source", "since")
    }
    errors: dict[str, str] = {}
    if filters["team"]:
        events = events.filter(team__slug=filters["team"])
    if filters["event"]:
        events = events.filter(event__startswith=filters["event"])
    if filters["actor"]:
        events = events.filter(actor_name=filters["actor"])
    if filters["source"]:
        if filters["source"] in AuditEvent.Source.values:
            events = events.filter(source=filters["source"])
        else:
            errors["source"] = "Pick one of the listed sources."
    if filters["since"]:
        try:
            since = dt.date.fromisoformat(filters["since"])
        except ValueError:
            errors["since"] = "A day as YYYY-MM-DD."
        else:
            events = events.filter(time__date__gte=since)
    if errors:
        events = events.none()
    page = Paginator(events, AUDIT_PAGE_SIZE).get_page(request.GET.get("page"))
    query = "&".join(f"{k}={v}" for k, v in filters.items() if v)
    return render(
        request,
        "portal/audit.html",
        {
            "page": page,
            "filters": filters,
            "errors": errors,
            "query": query,
            "sources": AuditEvent.Source.choices,
            "user_sees_everything": is_platform_admin(request.user) or is_approver(request.user),
            "teams": list_teams_for_user(request.user).prefetch_related(None).only("slug"),
        },
    )
