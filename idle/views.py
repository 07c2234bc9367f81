"""Pages of idle GPUs: the list (a lead's own teams, everyone's for platform admins and
approvers) and a team's idle policy (its grace, exemptions, switch-on and approval)."""

from __future__ import annotations

from decimal import Decimal

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from idle import policy as policies
from idle.selectors import money, policies_of, rows_of, spells_for, team_seen_by
from portal.access.selectors import teams_seen_by
from portal.vocabulary.errors import DomainError, user_message
from tenants.models import Team


@login_required
def idle_list(request: HttpRequest) -> HttpResponse:
    """Idle workloads and pods, with the GPU-hours they have wasted so far (``?team=``: one
    of the user's teams)."""
    slug = request.GET.get("team", "")
    team = team_seen_by(request.user, slug) if slug else None
    rows = rows_of(spells_for(request.user, team=team))
    teams = (
        [team]
        if team is not None
        else list(Team.objects.filter(pk__in=teams_seen_by(request.user).values("pk")))
    )
    policy_by_team = policies_of(teams)
    now_idle = [r for r in rows if r.state != "ended"]
    priced = [r.cost for r in now_idle if r.cost is not None]
    return render(
        request,
        "idle/list.html",
        {
            "rows": rows,
            "team": team,
            "teams": [(t, policy_by_team.get(t.pk)) for t in teams],
            "wasted": round(sum(r.gpu_hours for r in now_idle), 2),
            "wasted_money": money(sum(priced, Decimal(0))) if priced else None,
            "unpriced": len(priced) < len(now_idle),
            "currency": rows[0].currency if rows else "",
            "several_clusters": len({r.spell.cluster_id for r in rows}) > 1,
            "exempt_label": policies.EXEMPT_LABEL,
        },
    )


def _lines(text: str) -> list[str]:
    return [part.strip() for part in text.replace(",", "\n").splitlines() if part.strip()]


@login_required
@require_http_methods(["GET", "POST"])
def idle_policy(request: HttpRequest, slug: str) -> HttpResponse:
    """A team's idle policy: platform admins set it and switch it on; the first switch-on
    waits for another platform admin or the team's lead to approve it."""
    team = team_seen_by(request.user, slug)
    errors: dict[str, list[str]] = {}
    if request.method == "POST":
        # The settings' form is the one that carries them, whatever its button says.
        action = "save" if "grace_minutes" in request.POST else request.POST.get("action", "")
        try:
            if action == "save":
                try:
                    grace = int(request.POST.get("grace_minutes", ""))
                except ValueError:
                    raise ValidationError(
                        {"grace_minutes": ["Give a whole number of minutes."]}
                    ) from None
                policies.save_idle_policy(
                    actor=request.user,
                    team=team,
                    grace_minutes=grace,
                    exempt_namespaces=_lines(request.POST.get("exempt_namespaces", "")),
                    exempt_priority_classes=_lines(request.POST.get("exempt_priority_classes", "")),
                    source="web",
                )
            elif action == "on":
                policies.switch_on(actor=request.user, team=team, source="web")
            elif action == "approve":
                policies.approve(actor=request.user, team=team, source="web")
            elif action == "off":
                policies.switch_off(actor=request.user, team=team, source="web")
            else:
                errors = {"general": ["Choose what to do."]}
        except ValidationError as error:
            errors = (
                dict(error.message_dict)
                if hasattr(error, "error_dict")
                else {"general": error.messages}
            )
        except DomainError as error:  # a refused person is a 403 (PermissionDenied)
            errors = {"general": [user_message(error)]}
        if not errors:
            return redirect("idle-policy", slug=team.slug)
    policy = policies.policy_of(team)
    return render(
        request,
        "idle/policy.html",
        {
            "team": team,
            "policy": policy,
            "actions": policies.policy_actions(request.user, policy),
            "errors": errors,
            "form": request.POST if errors else {},
            "exempt_label": policies.EXEMPT_LABEL,
            "namespaces_text": "\n".join(policy.exempt_namespaces),
            "classes_text": "\n".join(policy.exempt_priority_classes),
        },
        status=422 if errors else 200,
    )
