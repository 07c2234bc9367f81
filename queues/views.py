"""Editing queues and priority classes (platform admins): always through a preview of the
rendered YAML diff, saved with the same validation as the API, and only the diff that was
shown (a change in between asks for a second look)."""

from __future__ import annotations

import contextlib
import copy
import re
from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core import signing
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse

from cluster.scope import chosen_cluster, cluster_id_of
from cluster.selectors import device_classes_read, first_reads
from portal.access.permissions import is_platform_admin
from portal.infra.process_cache import ProcessCache
from portal.infra.round_trips import read_kept
from queues import preview
from queues.dra import quota_notes_from
from queues.kueue_config import counter_text
from queues.merge import Merge, three_way
from queues.models import ClusterQueue, StopPolicy
from queues.rules import quota_entries, quota_key
from queues.selectors import (
    cluster_queue_what_if,
    editor_kept_under_read,
    editor_queue_from,
    editor_queue_reads,
    quota_rows,
    simulates_kueue,
)
from queues.services import promises_read, respelled, save_cluster_queue
from tenants.manifests import render_priority_class
from tenants.models import PriorityClass
from tenants.services import save_priority_class


def _require_admin(request: HttpRequest) -> None:
    if not is_platform_admin(request.user):
        raise PermissionDenied("Only platform admins edit queues and priority classes.")


def _edited_cluster_queue(cq: ClusterQueue, data: Any) -> ClusterQueue:
    """A copy of ``cq`` with the form's quotas (nothing saved)."""
    edited = copy.deepcopy(cq)
    groups = copy.deepcopy(cq.resource_groups or [])
    for key, _, quota in quota_entries(groups):
        quota["nominalQuota"] = data.get(f"{key}_nominal", "").strip()
        for form_name, field in (("borrowing", "borrowingLimit"), ("lending", "lendingLimit")):
            value = data.get(f"{key}_{form_name}", "").strip()
            if value:
                quota[field] = value
            else:
                quota.pop(field, None)
    edited.resource_groups = respelled(groups)
    edited.fair_sharing_weight = data.get("fair_sharing_weight", "").strip()
    edited.stop_policy = data.get("stop_policy", cq.stop_policy)
    return edited


BASE_SALT = "queues.cluster_queue_edit.base"


def form_values(cq: ClusterQueue) -> dict[str, str]:
    """The edit form's inputs as they show ``cq`` (what a three-way merge compares)."""
    values = {
        f"{row['key']}_{name}": row[name]
        for row in quota_rows(cq, {})
        for name in ("nominal", "borrowing", "lending")
    }
    values["fair_sharing_weight"] = str(cq.fair_sharing_weight or "")
    values["stop_policy"] = str(cq.stop_policy)
    return values


def _shown_base(data: Any) -> dict[str, str] | None:
    """The values the form showed when it was opened (signed in the form: ``base``), or
    None when the form carries none (or a forged one)."""
    try:
        base = signing.loads(data.get("base", ""), salt=BASE_SALT)
    except signing.BadSignature:
        return None
    return base if isinstance(base, dict) else None


def _merged(cq: ClusterQueue, data: Any) -> tuple[Any, Merge | None]:
    """The values to edit with: the form's own, or, when the queue was saved by someone
    else since the form was opened, the three-way merge of the form over the stored queue
    (their fields kept where this admin touched nothing). The merge is None when nothing
    changed in between (or the form carries no base: it is taken as sent)."""
    base, theirs = _shown_base(data), form_values(cq)
    if base is None or base == theirs:
        return data, None
    mine = {
        name: str(data[name]).strip() if name in data else shown for name, shown in base.items()
    }
    merge = three_way(base, mine, theirs)
    return merge.values, merge


def _changed_since(cq: ClusterQueue, merge: Merge) -> list[str]:
    """What another save changed since the form was opened, in words."""
    rows = {row["key"]: row for row in quota_rows(cq, {})}
    words = {"nominal": "nominal quota", "borrowing": "borrowing limit", "lending": "lending limit"}
    unset = {"borrowing": "unlimited", "lending": "all of it"}
    lines = []
    for name, shown, now in merge.changed:
        key, _, part = name.rpartition("_")
        row = rows.get(key)
        if row is None:
            what = {"fair_sharing_weight": "fair-sharing weight"}.get(name, name.replace("_", " "))
            gone = "1" if name == "fair_sharing_weight" else "none"
            lines.append(f"{what}: {shown or gone} → {now or gone}")
            continue
        gone = unset.get(part, "none")
        line = f"{words[part]} of {row['resource']} in {row['flavor']}: "
        line += f"{shown or gone} → {now or gone}"
        if name in merge.conflicts:
            line += " (you changed it too: yours is in the form)"
        lines.append(line)
    return lines


_QUOTA_PATH = re.compile(
    r"^resourceGroups\[(\d+)\]\.flavors\[(\d+)\]\.resources\[(\d+)\]"
    r"(?:\.(nominalQuota|borrowingLimit|lendingLimit))?: (.*)$",
    re.S,
)
_INPUT_OF = {"nominalQuota": "nominal", "borrowingLimit": "borrowing", "lendingLimit": "lending"}
CLUSTER_QUEUE_INPUTS = {"fair_sharing_weight": "weight", "stop_policy": "stop_policy"}
PRIORITY_CLASS_INPUTS = {
    f: f for f in ("value", "preemption_policy", "description", "global_default")
}


def place_errors(
    message_dict: dict[str, list[str]], inputs: dict[str, str]
) -> tuple[dict[str, list[str]], list[str]]:
    """The model's errors next to the inputs they are about: ``resourceGroups[0].flavors[1]
    .resources[0].nominalQuota: must be …`` becomes ``{"g0f1r0_nominal": ["must be …"]}``;
    ``inputs`` maps the other model fields to their inputs; what belongs to no input is
    returned for the top of the form."""
    by_input: dict[str, list[str]] = {}
    general: list[str] = []
    for field, messages_of_field in message_dict.items():
        for message in messages_of_field:
            found = _QUOTA_PATH.match(message)
            if found:
                g, f, r, key, text = found.groups()
                name = f"{quota_key(g, f, r)}_{_INPUT_OF.get(key, 'nominal')}"
                by_input.setdefault(name, []).append(text)
            elif field in inputs:
                by_input.setdefault(inputs[field], []).append(message)
            else:
                general.append(message)
    return by_input, general


def _diff_context(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    before_text, after_text = preview.as_yaml(before), preview.as_yaml(after)
    return {
        "diff": preview.yaml_diff(before_text, after_text),
        "before_hash": preview.digest(before_text),
        "after_hash": preview.digest(after_text),
    }


def _preview_or_save(
    request: HttpRequest,
    context: dict[str, Any],
    template: str,
    edited: Any,
    *,
    before: Callable[[], dict[str, Any]],
    after: Callable[[], dict[str, Any]],
    save: Callable[[], Any],
    saved: str,
    inputs: dict[str, str],
    shown: Callable[[], dict[str, Any]] | None = None,
    refused: bool = False,
) -> HttpResponse:
    """Validate the edited object (field errors, 422), show its YAML diff (and what else
    ``shown`` adds to a valid edit's page), and save only what was shown: the hashes of the
    diff the admin saw must still match (409 otherwise). ``refused``: the object was saved by
    someone else since the form was opened: the merged edit is shown, not saved (409). What
    the service still refuses (a promise beyond the fleet without its confirmation) is said
    at the top, 422."""
    try:
        edited.full_clean()
    except ValidationError as exc:
        context["errors"], context["general_errors"] = place_errors(exc.message_dict, inputs)
        if "rows" in context:
            for row in context["rows"]:
                row["errors"] = {
                    name: context["errors"].get(f"{row['key']}_{name}", [])
                    for name in ("nominal", "borrowing", "lending")
                }
        return render(request, template, context, status=422)
    context.update(_diff_context(before(), after()))
    if shown is not None:
        context.update(shown())
    if refused:
        return render(request, template, context, status=409)
    if request.POST.get("action") != "save":
        return render(request, template, context)
    seen = (request.POST.get("before_hash"), request.POST.get("after_hash"))
    if seen != (context["before_hash"], context["after_hash"]):
        context["stale"] = True
        return render(request, template, context, status=409)
    try:
        with transaction.atomic(durable=True):  # the page's entry point: never inside another
            save()
    except ValidationError as exc:
        context["general_errors"] = [m for ms in exc.message_dict.values() for m in ms]
        return render(request, template, context, status=422)
    messages.success(request, saved)
    if getattr(request, "htmx", False):  # a full page change, not a swap into the form
        return HttpResponse(status=204, headers={"HX-Redirect": reverse("queues")})
    return redirect("queues")


@login_required
def cluster_queue_edit(request: HttpRequest, name: str) -> HttpResponse:
    # The first round trip: what every page shows, with the queues of this name (one per
    # cluster at most: two clusters may each have one) and their cohorts.
    *queues, (version,) = first_reads(request, *editor_queue_reads(name), editor_kept_under_read())
    under = tuple(tuple(v) if isinstance(v, list) else v for v in version)
    _require_admin(request)
    chosen = chosen_cluster(request)
    cq = editor_queue_from(queues, chosen.pk if chosen is not None else None)
    if cq is None:
        raise Http404("No ClusterQueue of that name.")
    context: dict[str, Any] = {
        "cq": cq,
        "rows": quota_rows(cq, {}),
        "errors": {},
        "diff": None,
        "stop_policies": list(StopPolicy.choices),
    }
    if request.method != "POST":
        context.update(weight=cq.fair_sharing_weight, stop_policy=cq.stop_policy)
        context["base"] = signing.dumps(form_values(cq), salt=BASE_SALT)
        _with_capacity(context, cq, cq, under)
        return render(request, "queues/cluster_queue_edit.html", context)
    values, merge = _merged(cq, request.POST)
    # The form now stands on the stored queue: a merge is shown, and saved on the next post.
    context["base"] = signing.dumps(form_values(cq), salt=BASE_SALT)
    if merge is not None:
        context["changed_since"] = _changed_since(cq, merge)
    edited = _edited_cluster_queue(cq, values)
    context.update(
        rows=quota_rows(edited, {}),
        weight=edited.fair_sharing_weight,
        stop_policy=edited.stop_policy,
        override_reason=request.POST.get("override_reason", "").strip(),
    )
    with contextlib.suppress(ValidationError, ValueError):  # no quantity: its field error
        _with_capacity(context, cq, edited, under)  # says so below
    return _preview_or_save(
        request,
        context,
        "queues/cluster_queue_edit.html",
        edited,
        before=lambda: preview.cluster_queue_manifest(cq),
        after=lambda: preview.cluster_queue_manifest(edited),
        save=lambda: save_cluster_queue(
            actor=request.user,
            cluster_queue=edited,
            source="web",
            override_reason=context["override_reason"],
            promise_more_than_exists=request.POST.get("confirm_unbacked") == "yes",
        ),
        saved=f"ClusterQueue {cq.name} saved: the cluster loop applies it.",
        inputs=CLUSTER_QUEUE_INPUTS,
        shown=(lambda: {"what_if": cluster_queue_what_if(request.user, edited)})
        if simulates_kueue()
        else None,
        refused=merge is not None,
    )


# The rows of the editor's reads of every other queue and of every node (what they promise,
# what the fleet offers behind each flavor), under the version of what they read
# (``editor_kept_under_read``, in the page's first round trip)
_KEPT: ProcessCache[tuple[Any, ...], tuple[Any, ...]] = ProcessCache("the editor's reads", 512)


def _with_capacity(
    context: dict[str, Any], cq: ClusterQueue, edited: ClusterQueue, under: tuple[Any, ...]
) -> None:
    """Each GPU row with the fleet behind its flavor (see ``promises_of``) and what Kueue's
    configuration says of its resource: the second round trip, without the reads kept
    under ``under`` (``_KEPT``)."""
    resources = {r["resource"] for r in context["rows"]}
    asked = promises_read(cq, edited)
    cluster_id = cluster_id_of(edited.cluster_id)
    reads = (device_classes_read(cluster_id, resources), *asked.reads)
    classes, *rows = read_kept(_KEPT, under, reads, (False, *asked.kept))
    shown, config, dra = asked.answer(rows)
    context["promises"] = shown
    for row in context["rows"]:
        row["promise"] = shown.get((row["flavor"], row["resource"]))
    counted = {r: c.amount for r, c in dra.items() if c.counted}  # summed once, above
    notes = quota_notes_from(cluster_id, classes, resources, lambda: config, counted)
    for row in context["rows"]:
        row["dra_classes"] = ", ".join(
            config.mapped.get(row["resource"], ()) if config.enabled else ()
        )
        promise = row["promise"]
        if promise is not None and promise.unit not in ("", "devices"):
            row["dra_counter"] = {
                "unit": promise.unit,
                "offered": counter_text(promise.offered or 0),
                "promised": counter_text(promise.promised),
            }
        row["kueue_note"] = notes.get(row["resource"], "")
    context["kueue_notes"] = sorted(set(notes.values()))
    context["unbacked"] = [r for r in context["rows"] if r["promise"] and r["promise"].unbacked]
    context["beyond"] = [r for r in context["rows"] if r["promise"] and r["promise"].beyond_ceiling]


@login_required
def priority_class_edit(request: HttpRequest, name: str) -> HttpResponse:
    _require_admin(request)
    pc = get_object_or_404(PriorityClass, name=name)
    context: dict[str, Any] = {
        "pc": pc,
        "errors": {},
        "diff": None,
        "preemption_policies": [c for c, _ in PriorityClass.Preemption.choices],
        "values": {
            "value": str(pc.value),
            "preemption_policy": pc.preemption_policy,
            "description": pc.description,
            "global_default": pc.global_default,
        },
    }
    if request.method == "POST":
        edited = copy.deepcopy(pc)
        values: dict[str, Any] = {
            "value": request.POST.get("value", "").strip(),
            "preemption_policy": request.POST.get("preemption_policy", pc.preemption_policy),
            "description": request.POST.get("description", "").strip(),
            "global_default": request.POST.get("global_default") == "on",
        }
        context["values"] = values
        try:
            edited.value = int(values["value"])
        except ValueError:
            context["errors"] = {"value": ["A whole number, e.g. 1000."]}
            return render(request, "queues/priority_class_edit.html", context, status=422)
        edited.preemption_policy = values["preemption_policy"]
        edited.description = values["description"]
        edited.global_default = values["global_default"]
        return _preview_or_save(
            request,
            context,
            "queues/priority_class_edit.html",
            edited,
            before=lambda: render_priority_class(pc),
            after=lambda: render_priority_class(edited),
            save=lambda: save_priority_class(
                actor=request.user, priority_class=edited, source="web"
            ),
            saved=f"PriorityClass {pc.name} saved: the cluster loop applies it.",
            inputs=PRIORITY_CLASS_INPUTS,
        )
    return render(request, "queues/priority_class_edit.html", context)
