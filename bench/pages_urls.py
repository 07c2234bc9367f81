"""URLs of ``bench/pages.py``'s server: the portal's, plus minimal Django pages over the
same rows (the baseline): one query set, one template loop, no layout, scoping or extras."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db import connection
from django.db.models import F, Q
from django.http import HttpRequest, HttpResponse
from django.template import engines
from django.urls import path

from changes.models import MigChangeRequest
from cluster.models import ObservedNode, ObservedObject, ObservedPod, ObservedWorkload
from portal.urls import urlpatterns as portal_urlpatterns
from queues.models import ClusterQueue
from tenants.models import Namespace

DJANGO = engines["django"]
HOME = DJANGO.from_string(
    "<html><body>{% for ns in namespaces %}<h2>{{ ns.team.slug }} {{ ns.name }}</h2><table>"
    "{% for q in ns.quota_items.all %}<tr><td>{{ q.resource }}</td><td>{{ q.hard }}</td></tr>"
    "{% endfor %}</table>{% endfor %}<table>{% for p in pods %}<tr><td>{{ p.namespace }}/"
    "{{ p.name }}</td><td>{{ p.phase }}</td><td>{{ p.node_name }}</td><td>{{ p.gpu_requests }}"
    "</td><td>{{ p.explained.why.cause }}</td></tr>{% endfor %}</table><table>"
    "{% for w in workloads %}<tr><td>{{ w.namespace }}/{{ w.name }}</td><td>{{ w.queue_name }}"
    "</td><td>{{ w.admitted }}</td><td>{{ w.requests }}</td><td>{{ w.explained.why.cause }}"
    "</td><td>{{ w.explained.estimate.summary }}</td></tr>{% endfor %}</table></body></html>"
)
FLEET = DJANGO.from_string(
    "<html><body><table>{% for pool, resource, nodes, allocatable, allocated in rows %}<tr>"
    "<td>{{ pool }}</td><td>{{ resource }}</td><td>{{ nodes }}</td><td>{{ allocated }} / "
    "{{ allocatable }}</td></tr>{% endfor %}</table></body></html>"
)
NODES = DJANGO.from_string(
    "<html><body><table>{% for n in page %}<tr><td>{{ n.name }}</td><td>{{ n.gpu_product }}"
    "</td><td>{{ n.mig_config }}</td><td>{{ n.allocatable }}</td><td>{{ n.allocated }}</td>"
    "</tr>{% endfor %}</table></body></html>"
)
# What the Fleet page sums up, at its barest: capacity and allocation per pool label and GPU
# resource over every node, in one query.
FLEET_SQL = f"""
    SELECT n.pool_label, e.key, count(*), sum((e.value #>> '{{}}')::bigint),
           sum(coalesce((n.allocated ->> e.key)::bigint, 0))
    FROM {ObservedNode._meta.db_table} n CROSS JOIN LATERAL jsonb_each(n.allocatable) AS e
    WHERE n.gone_since IS NULL AND starts_with(e.key, 'nvidia.com/')
    GROUP BY 1, 2 ORDER BY 1, 2
"""
WORKLOADS = DJANGO.from_string(
    "<html><body><table>{% for w in page %}<tr><td>{{ w.namespace }}/{{ w.name }}</td><td>"
    "{{ w.queue_name }}</td><td>{{ w.admitted }}</td><td>{{ w.requests }}</td><td>"
    "{{ w.priority }}</td><td>{{ w.created_at }}</td></tr>{% endfor %}</table></body></html>"
)
QUEUES = DJANGO.from_string(
    "<html><body><table>{% for q in queues %}<tr><td>{{ q.cohort.name }}</td><td>{{ q.name }}"
    "</td><td>{{ q.resource_groups }}</td><td>{{ q.status }}</td></tr>{% endfor %}</table>"
    "</body></html>"
)
CLUSTER_QUEUE = DJANGO.from_string(
    "<html><body><h1>{{ q.name }} in {{ q.cohort.name }}</h1><table>"
    "{% for g in q.resource_groups %}{% for f in g.flavors %}{% for r in f.resources %}"
    "<tr><td>{{ f.name }}</td><td>{{ r.name }}</td><td>{{ r.nominalQuota }}</td></tr>"
    "{% endfor %}{% endfor %}{% endfor %}</table></body></html>"
)
INBOX = DJANGO.from_string(
    "<html><body><ul>{% for c in changes %}<li>#{{ c.pk }} {{ c.team.slug }} {{ c.nodes }} "
    "{{ c.target_config }} {{ c.verdict }}</li>{% endfor %}</ul></body></html>"
)


@login_required
def baseline_home(request: HttpRequest) -> HttpResponse:
    """The user's teams' namespaces with their quota items, and the rows of them the home
    draws: their Pending and running GPU pods and their unfinished workloads, each with the
    words the poll explained it with."""
    namespaces = list(
        Namespace.objects.filter(team__memberships__user=request.user)
        .select_related("team")
        .prefetch_related("quota_items")
    )
    mine = Q(pk__in=[])
    for ns in namespaces:
        mine |= Q(cluster_id=ns.cluster_id, namespace=ns.name)
    pods = (
        ObservedPod.objects.on_every_cluster()
        .filter(mine)
        .filter(
            Q(phase="Pending") | Q(phase="Running") & (~Q(gpu_requests={}) | ~Q(resource_claims=[]))
        )
        .order_by("namespace", "name")
    )
    workloads = (
        ObservedWorkload.objects.on_every_cluster()
        .filter(mine, finished=False)
        .order_by("admitted", "namespace", "created_at")
    )
    context = {"namespaces": namespaces, "pods": pods, "workloads": workloads}
    return HttpResponse(HOME.render(context))


@login_required
def baseline_fleet(request: HttpRequest) -> HttpResponse:
    with connection.cursor() as cursor:
        cursor.execute(FLEET_SQL)
        rows = cursor.fetchall()
    return HttpResponse(FLEET.render({"rows": rows}))


@login_required
def baseline_nodes(request: HttpRequest) -> HttpResponse:
    nodes = ObservedNode.objects.filter(
        gone_since__isnull=True, pool_label=request.GET.get("pool", "")
    ).order_by("name")
    return HttpResponse(
        NODES.render({"page": Paginator(nodes, 50).get_page(request.GET.get("page"))})
    )


@login_required
def baseline_workloads(request: HttpRequest) -> HttpResponse:
    workloads = ObservedWorkload.objects.on_every_cluster().order_by(
        F("created_at").desc(nulls_last=True), F("id").desc()
    )
    return HttpResponse(
        WORKLOADS.render({"page": Paginator(workloads, 50).get_page(request.GET.get("page"))})
    )


@login_required
def baseline_inbox(request: HttpRequest) -> HttpResponse:
    changes = MigChangeRequest.objects.filter(state="pending").select_related("team")
    return HttpResponse(INBOX.render({"changes": changes}))


@login_required
def baseline_queues(request: HttpRequest) -> HttpResponse:
    """Every ClusterQueue with its cohort, quota and the status the poll saw of it."""
    statuses = dict(
        ObservedObject.objects.on_every_cluster()
        .filter(kind="ClusterQueue")
        .values_list("name", "status")
    )
    queues = list(ClusterQueue.objects.on_every_cluster().select_related("cohort").order_by("name"))
    for q in queues:
        q.status = statuses.get(q.name, {})  # type: ignore[attr-defined]
    return HttpResponse(QUEUES.render({"queues": queues}))


@login_required
def baseline_cluster_queue(request: HttpRequest, name: str) -> HttpResponse:
    q = ClusterQueue.objects.on_every_cluster().select_related("cohort").get(name=name)
    return HttpResponse(CLUSTER_QUEUE.render({"q": q}))


urlpatterns = [
    *portal_urlpatterns,
    path("baseline/home/", baseline_home),
    path("baseline/fleet/", baseline_fleet),
    path("baseline/nodes/", baseline_nodes),
    path("baseline/inbox/", baseline_inbox),
    path("baseline/workloads/", baseline_workloads),
    path("baseline/queues/", baseline_queues),
    path("baseline/cluster-queues/<str:name>/", baseline_cluster_queue),
]
