from django.urls import path

from overview import home, onboarding_views, planner_views, views, workload_views, workspace

urlpatterns = [
    path("", home.home, name="home"),
    path("fleet/", views.fleet, name="fleet"),
    path("fleet/nodes/", views.fleet_nodes, name="fleet-nodes"),
    path("fleet/nodes/<str:name>/", views.node_detail, name="fleet-node"),
    path("queues/", views.queues, name="queues"),
    path("workloads/", workload_views.workloads, name="workloads"),
    path(
        "workloads/<str:cluster>/<str:namespace>/<str:name>/",
        workload_views.workload_detail,
        name="workload",
    ),
    path("workspace/", workspace.workspace, name="workspace"),
    path("start/", workspace.start, name="start"),
    path("planner/", planner_views.planner, name="planner"),
    path("teams/onboard/", onboarding_views.onboard, name="team-onboard"),
    path("teams/<slug:slug>/offboard/", onboarding_views.offboard, name="team-offboard"),
    path("teams/<slug:slug>/members/", onboarding_views.members, name="team-members"),
]
