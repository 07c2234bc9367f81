"""The Clusters pages (platform admins): the list, one cluster (what was discovered and how
fresh, and a read-only test of its connection), and registering or editing one (the
credential is write-only: the form never shows it back)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from cluster.connection import check_connection
from cluster.models import PURPOSE_MEANING, Cluster
from cluster.selectors import (
    discovery_age,
    get_cluster_for_user,
    list_clusters_for_user,
    rendering_for,
)
from cluster.services import EDITABLE, save_cluster
from portal.access.permissions import is_platform_admin


@login_required
def cluster_list(request: HttpRequest) -> HttpResponse:
    clusters = list(list_clusters_for_user(request.user))
    rows = [{"cluster": c, "age": discovery_age(c)} for c in clusters]
    return render(request, "cluster/cluster_list.html", {"rows": rows})


def _detail_context(cluster: Cluster) -> dict[str, Any]:
    backend, version = rendering_for(cluster)
    return {
        "cluster": cluster,
        "age": discovery_age(cluster),
        "backend": backend,
        "version": version,
    }


@login_required
def cluster_detail(request: HttpRequest, name: str) -> HttpResponse:
    cluster = get_cluster_for_user(request.user, name)
    return render(request, "cluster/cluster_detail.html", _detail_context(cluster))


@login_required
@require_POST
def cluster_test(request: HttpRequest, name: str) -> HttpResponse:
    """Test the connection (read-only in the cluster; a POST because it reaches out, and so
    a link cannot set it off). htmx swaps the result into the page."""
    cluster = get_cluster_for_user(request.user, name)
    result = check_connection(cluster)
    if getattr(request, "htmx", False):
        context = {"cluster": cluster, "test": result}
        response = render(request, "cluster/cluster_detail.html#connection-test", context)
    else:
        context = {**_detail_context(cluster), "test": result}
        response = render(request, "cluster/cluster_detail.html", context)
    response["Vary"] = "HX-Request"
    return response


def _form_context(cluster: Cluster, errors: dict[str, list[str]]) -> dict[str, Any]:
    return {
        "cluster": cluster,
        "errors": errors,
        "purposes": [
            (value, label, PURPOSE_MEANING[value]) for value, label in Cluster.Purpose.choices
        ],
        "connections": [
            c for c in Cluster.Connection.choices if c[0] != Cluster.Connection.SETTINGS
        ],
        "from_settings": cluster.connection == Cluster.Connection.SETTINGS,
    }


def _edited(cluster: Cluster, data: Any) -> Cluster:
    fields = list(EDITABLE)
    if cluster.pk is not None:
        fields.remove("name")  # it names the cluster in URLs and the audit log
    if cluster.connection == Cluster.Connection.SETTINGS:
        fields = ["display_name", "purpose"]  # the settings say how to connect
    for field in fields:
        if field == "verify_tls":
            cluster.verify_tls = data.get("verify_tls") == "on"
        else:
            setattr(cluster, field, data.get(field, "").strip())
    return cluster


def _save(request: HttpRequest, cluster: Cluster, *, created: bool) -> HttpResponse:
    if not is_platform_admin(request.user):
        raise PermissionDenied("Only platform admins register and edit clusters.")
    if request.method != "POST":
        return render(request, "cluster/cluster_form.html", _form_context(cluster, {}))
    from_settings = cluster.connection == Cluster.Connection.SETTINGS
    cluster = _edited(cluster, request.POST)
    try:
        save_cluster(
            actor=request.user,
            cluster=cluster,
            # the settings' cluster has no credential field (the settings hold it)
            credential=None if from_settings else request.POST.get("credential", ""),
            source="web",
        )
    except ValidationError as exc:
        errors = dict(exc.message_dict)
        errors["all"] = errors.pop("__all__", [])
        context = _form_context(cluster, errors)
        return render(request, "cluster/cluster_form.html", context, status=422)
    messages.success(request, f"Cluster {cluster.name} {'registered' if created else 'saved'}.")
    return redirect("cluster-page", name=cluster.name)


@login_required
def cluster_create(request: HttpRequest) -> HttpResponse:
    return _save(
        request, Cluster(connection=Cluster.Connection.TOKEN, purpose="general"), created=True
    )


@login_required
def cluster_edit(request: HttpRequest, name: str) -> HttpResponse:
    return _save(request, get_cluster_for_user(request.user, name), created=False)
