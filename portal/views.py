"""Portal-wide pages: sign-in (password and single sign-on), health and metrics, personal
API tokens and the audit log."""

from __future__ import annotations

import hmac
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.core.validators import MaxLengthValidator
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.template import loader
from django.utils import timezone
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView
from prometheus_client import CONTENT_TYPE_LATEST

from portal.access.permissions import is_platform_admin, sees_every_team, user_id
from portal.access.selectors import (
    audit_events_for_user,
    demo_sign_in,
    pod_names_for,
    teams_seen_by,
)
from portal.access.tokens import create_token, revoke_token
from portal.api.filters import AuditEventFilter
from portal.audit.events import Event
from portal.audit.rows import audit_row, csv_lines
from portal.infra.metrics import exposition
from portal.infra.observability import request_id
from portal.infra.readiness import readiness
from portal.models import ApiToken, AuditEvent


class LoginForm(AuthenticationForm):
    """Django's sign-in form, refusing a username longer than the user model's own (Django
    sets the length on the input only, so a longer one was reported as a wrong password)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        longest = self.fields["username"].max_length  # type: ignore[attr-defined]
        if longest:
            self.fields["username"].validators.append(MaxLengthValidator(longest))


def sign_in_choices() -> dict[str, Any]:
    """How one may sign in here: single sign-on, a local account, or both."""
    return {
        "sso_enabled": settings.QM_OIDC_ENABLED,
        "sso_name": settings.QM_OIDC_PROVIDER_NAME,
        "local_login": settings.QM_LOCAL_LOGIN or not settings.QM_OIDC_ENABLED,
    }


class LoginView(auth_views.LoginView):
    """Username and password, single sign-on, or both (QM_LOCAL_LOGIN, OIDC_RP_CLIENT_ID)."""

    authentication_form = LoginForm

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = {**super().get_context_data(**kwargs), **sign_in_choices()}
        return {**context, "demo": demo_sign_in() if context["local_login"] else None}

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
    """Prometheus metrics of the whole installation (see portal/infra/metrics.py): with a bearer
    token when QM_METRICS_TOKEN is set; without one only where QM_METRICS_PUBLIC says the
    network guards it (the default outside production)."""
    token = settings.QM_METRICS_TOKEN
    if not token and not settings.QM_METRICS_PUBLIC:
        return HttpResponse(
            "metrics are off: set QM_METRICS_TOKEN (and give the scraper that bearer token), "
            "or QM_METRICS_PUBLIC=true where a network policy keeps /metrics private\n",
            status=403,
            content_type="text/plain",
        )
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
    """Readiness: PostgreSQL answers (503 otherwise). Anyone learns ready or not; what each
    check said (clusters' names, addresses, errors) only a platform admin, or whoever holds
    the metrics' bearer token (QM_METRICS_TOKEN)."""
    ready, checks = readiness()
    answer: dict[str, Any] = {"status": "ok" if ready else "unavailable"}
    if _may_read_details(request):
        answer["checks"] = checks
    return JsonResponse(answer, status=200 if ready else 503)


def _may_read_details(request: HttpRequest) -> bool:
    token = settings.QM_METRICS_TOKEN
    offered = request.headers.get("Authorization", "").removeprefix("Bearer ")
    if token and hmac.compare_digest(offered.encode(), token.encode()):
        return True
    return is_platform_admin(request.user)


@login_required
def tokens(request: HttpRequest) -> HttpResponse:
    """Personal API tokens: create (the text is shown once), list, revoke."""
    created_text = ""
    errors: dict[str, list[str]] = {}
    if request.method == "POST":
        if "revoke" in request.POST:
            token_id = request.POST["revoke"]
            if not token_id.isascii() or not token_id.isdigit() or len(token_id) > 18:
                raise Http404("No such token.")
            revoke_token(user=request.user, token_id=int(token_id))
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
            "tokens": ApiToken.objects.filter(user_id=user_id(request.user)),
            "created": created_text,
            "errors": errors,
        },
        status=422 if errors else 200,
    )


AUDIT_PAGE_SIZE = 50
AUDIT_CSV_CHUNK = 500


def _audit_events(
    request: HttpRequest,
) -> tuple[QuerySet[AuditEvent], dict[str, str], dict[str, str]]:
    """The events the user may see, filtered as asked: the page and its CSV share them."""
    shown = AuditEventFilter(
        request.GET, queryset=audit_events_for_user(request.user), request=request
    )
    errors = {name: messages[0] for name, messages in shown.errors.items()}
    events = shown.qs if not errors else shown.queryset.none()
    filters = {key: request.GET.get(key, "").strip() for key in AuditEventFilter.base_filters}
    return events, filters, errors


@login_required
def audit(request: HttpRequest) -> HttpResponse:
    """The audit log, filtered by team, event, actor, source and day; newest first. Each row
    says what changed field by field and links to its object."""
    events, filters, errors = _audit_events(request)
    names = pod_names_for(request.user)
    page = Paginator(events, AUDIT_PAGE_SIZE).get_page(request.GET.get("page"))
    query = urlencode({k: v for k, v in filters.items() if v})
    return render(
        request,
        "portal/audit.html",
        {
            "page": page,
            "rows": [audit_row(event, names) for event in page.object_list],
            "filters": filters,
            "errors": errors,
            "query": query,
            "sources": AuditEvent.Source.choices,
            "events": list(Event),  # the filter suggests each event with its label
            "user_sees_everything": sees_every_team(request.user),
            "teams": teams_seen_by(request.user),
        },
    )


@login_required
def audit_csv(request: HttpRequest) -> HttpResponseBase:
    """The Audit page's rows (same scope, same filters, every page) as a streamed CSV."""
    events, _, errors = _audit_events(request)
    if errors:
        return HttpResponse(
            "".join(f"{name}: {message}\n" for name, message in errors.items()),
            status=400,
            content_type="text/plain; charset=utf-8",
        )
    response = StreamingHttpResponse(
        csv_lines(events.iterator(chunk_size=AUDIT_CSV_CHUNK), pod_names_for(request.user)),
        content_type="text/csv; charset=utf-8",
    )
    response["Content-Disposition"] = (
        f'attachment; filename="audit-{timezone.now():%Y%m%d-%H%M%S}.csv"'
    )
    return response


NOT_FOUND = "There is no page at this address."
SERVER_ERROR = (
    "Something went wrong on our side and nothing was changed. It has been logged: try again "
    "in a moment, or tell your platform admin the request id below."
)


def _reason(exception: Exception, default: str) -> str:
    """The sentence a page's error says: the one the portal raised it with, or ``default``
    (Django's own "No Team matches the given query." names a model, and a URL nobody routes
    carries the patterns tried)."""
    message = exception.args[0] if exception.args else ""
    if not isinstance(message, str) or not message or message.endswith("matches the given query."):
        return default
    return message


def _error_page(
    request: HttpRequest, exception: Exception, *, status: int, code: str, default: str
) -> HttpResponse:
    reason = _reason(exception, default)
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": reason, "code": code}, status=status)
    return render(
        request, f"{status}.html", {"reason": reason, "path": request.path}, status=status
    )


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """404: the API answers in its own error format, pages with the navigation and why."""
    default = "Not found." if request.path.startswith("/api/") else NOT_FOUND
    return _error_page(request, exception, status=404, code="not_found", default=default)


def forbidden(request: HttpRequest, exception: Exception) -> HttpResponse:
    """403: what the user may not do, as the portal said it, with the navigation."""
    return _error_page(
        request,
        exception,
        status=403,
        code="permission_denied",
        default="You do not have permission to open this page.",
    )


def server_error(request: HttpRequest) -> HttpResponse:
    """500, rendered without the database (it may be what failed): no user, no context
    processors, the navigation drawn from the URL map alone."""
    page = loader.get_template("500.html").render(
        {"reason": SERVER_ERROR, "request_id": request_id.get()}
    )
    return HttpResponse(page, status=500)
