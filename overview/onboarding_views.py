"""Pages of onboarding a team (platform admins), offboarding it, and a team's members (its
leads and platform admins). Every write goes through ``overview.onboarding`` and the
tenants' services."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import urlencode

from cluster.models import Cluster
from overview.onboarding import (
    NamespacePlan,
    OnboardingPlan,
    offboard_team,
    offboarding_of,
    onboard_team,
)
from portal.access.permissions import is_platform_admin, sees_every_team, user_id
from portal.vocabulary.errors import DomainError
from queues.models import ClusterQueue
from tenants.models import Membership, Namespace, Team
from tenants.rules import LimitSpec
from tenants.services import remove_team_member, require_team_lead, set_team_member

FIELDS = (
    "slug",
    "name",
    "description",
    "cluster",
    "namespace",
    "hard",
    "limits",
    "queues",
    "members",
)
STEPS = ("Team", "Cluster", "Namespace", "Quota", "LimitRange", "LocalQueues", "Members")


def _pairs(text: str, where: str, errors: dict[str, list[str]]) -> dict[str, str]:
    """``key=value`` per line (blank lines skipped)."""
    out = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip() or not value.strip():
            errors.setdefault(where, []).append(f"Line {n}: write it as name=value.")
            continue
        out[key.strip()] = value.strip()
    return out


def _limits(text: str, errors: dict[str, list[str]]) -> list[LimitSpec]:
    """``<Container|Pod> <resource> max=.. default=.. default_request=.. min=..`` per line."""
    specs = []
    for n, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if not words:
            continue
        if len(words) < 2:
            errors.setdefault("limits", []).append(f"Line {n}: type, resource, then key=value.")
            continue
        values = _pairs("\n".join(words[2:]), "limits", errors)
        unknown = set(values) - {"max", "min", "default", "default_request"}
        if unknown:
            errors.setdefault("limits", []).append(
                f"Line {n}: only max, min, default and default_request."
            )
            continue
        specs.append(LimitSpec(limit_type=words[0], resource=words[1], **values))
    return specs


def _checked(form: dict[str, str], clusters: list[Cluster]) -> dict[str, list[str]]:
    """Each one-line field against its model field (length, DNS label), and the cluster
    against the clusters there are, so that every wrong field is named at once."""
    errors: dict[str, list[str]] = {}
    for name, model_field in (
        ("slug", Team._meta.get_field("slug")),
        ("name", Team._meta.get_field("name")),
        ("namespace", Namespace._meta.get_field("name")),
    ):
        if name == "namespace" and not form[name]:
            continue
        try:
            model_field.clean(form[name], None)
        except ValidationError as error:
            errors[name] = list(error.messages)
    if form["cluster"] not in {c.name for c in clusters}:
        errors["cluster"] = ["Choose one of the clusters listed."]
    return errors


def _plan(
    form: dict[str, str], clusters: list[Cluster]
) -> tuple[OnboardingPlan, dict[str, list[str]]]:
    errors = _checked(form, clusters)
    namespace = NamespacePlan(
        name=form["namespace"],
        hard=_pairs(form["hard"], "hard", errors),
        limits=_limits(form["limits"], errors),
        local_queues=_pairs(form["queues"], "queues", errors),
    )
    plan = OnboardingPlan(
        slug=form["slug"],
        name=form["name"],
        description=form["description"],
        cluster=form["cluster"],
        namespaces=[namespace] if form["namespace"] else [],
        members=_pairs(form["members"], "members", errors),
    )
    return plan, errors


def _field_of(key: str) -> str:
    """The page's field for a service's error key (``namespaces[0].hard[x]`` -> hard)."""
    for prefix, name in (
        ("team.", ""),
        ("namespaces[0].hard", "hard"),
        ("namespaces[0].limits", "limits"),
        ("namespaces[0].local_queues", "queues"),
        ("namespaces[0]", "namespace"),
        ("members", "members"),
    ):
        if key.startswith(prefix):
            return name or key.removeprefix(prefix)
    return key if key in FIELDS else "general"


def _named(error: ValidationError) -> dict[str, list[str]]:
    """Field errors by field; errors of no field under ``general``."""
    if not hasattr(error, "error_dict"):
        return {"general": list(error.messages)}
    return {
        ("general" if key == "__all__" else key): found for key, found in error.message_dict.items()
    }


@login_required
def onboard(request: HttpRequest) -> HttpResponse:
    """The guided onboarding: fill the steps, preview what the cluster loop will apply (the
    YAML diff, the rules' warnings, the field errors), then onboard in one audited story."""
    if not is_platform_admin(request.user):
        raise PermissionDenied("Onboarding a team is for platform admins.")
    clusters = list(Cluster.objects.order_by("name"))
    form = {name: request.POST.get(name, "").strip() for name in FIELDS}
    if not form["cluster"] and clusters:
        form["cluster"] = clusters[0].name
    context: dict[str, Any] = {"form": form, "clusters": clusters, "steps": STEPS, "errors": {}}
    cluster = next((c for c in clusters if c.name == form["cluster"]), None)
    context["cluster_queues"] = (
        list(ClusterQueue.objects.on(cluster).order_by("name")) if cluster else []
    )
    if request.method != "POST":
        return render(request, "overview/onboard.html", context)
    plan, errors = _plan(form, clusters)
    dry = request.POST.get("action") != "onboard"
    if not errors:
        try:
            done = onboard_team(actor=request.user, plan=plan, source="web", dry_run=dry)
        except ValidationError as error:
            for key, found in _named(error).items():
                errors.setdefault(_field_of(key), []).extend(found)
        else:
            if not dry:
                messages.success(request, f"Team {done.team.slug} onboarded.")
                return redirect(f"{reverse('audit')}?{urlencode({'request': done.story})}")
            context.update(preview=done, diff=done.diff)
    context["errors"] = errors
    return render(request, "overview/onboard.html", context, status=422 if errors else 200)


@login_required
def offboard(request: HttpRequest, slug: str) -> HttpResponse:
    """What offboarding the team removes and keeps, and the typed confirmation."""
    if not is_platform_admin(request.user):
        raise PermissionDenied("Offboarding a team is for platform admins.")
    team = get_object_or_404(Team, slug=slug)
    errors: dict[str, list[str]] = {}
    if request.method == "POST":
        try:
            story = offboard_team(
                actor=request.user,
                team_id=team.pk,
                typed_slug=request.POST.get("confirm_slug", ""),
                version=request.POST.get("version", ""),
                source="web",
            )
        except ValidationError as error:
            errors = _named(error)
        except DomainError as error:
            errors = {"general": [str(error)]}
        else:
            messages.success(request, f"Team {slug} offboarded; its history stays.")
            return redirect(f"{reverse('audit')}?{urlencode({'request': story})}")
    return render(
        request,
        "overview/offboard.html",
        {"what": offboarding_of(team), "errors": errors},
        status=422 if errors else 200,
    )


@login_required
def members(request: HttpRequest, slug: str) -> HttpResponse:
    """A team's members: its leads (and platform admins) add people, change their team role
    and remove them; everyone else in the team reads the list."""
    team = get_object_or_404(Team, slug=slug)
    if (
        not sees_every_team(request.user)
        and not team.memberships.filter(user_id=user_id(request.user)).exists()
    ):
        raise Http404("No such team.")  # another team's members: as if it did not exist
    try:
        require_team_lead(request.user, team)
        manages = True
    except PermissionDenied:
        manages = False
    errors: dict[str, list[str]] = {}
    if request.method == "POST":
        try:
            if request.POST.get("remove"):
                remove_team_member(
                    actor=request.user,
                    membership_id=int(request.POST["remove"]),
                    team=team,
                    source="web",
                )
            else:
                set_team_member(
                    actor=request.user,
                    team=team,
                    username=request.POST.get("username", ""),
                    role=request.POST.get("role", ""),
                    source="web",
                )
        except ValidationError as error:
            errors = _named(error)
        except (DomainError, ValueError) as error:
            errors = {"general": [str(error)]}
        else:
            return redirect("team-members", slug=team.slug)
    rows = team.memberships.select_related("user").order_by("role", "user__username")
    return render(
        request,
        "overview/members.html",
        {
            "team": team,
            "rows": rows,
            "manages": manages,
            "roles": Membership.Role.choices,
            "errors": errors,
            "form": request.POST if errors else {},
        },
        status=422 if errors else 200,
    )
