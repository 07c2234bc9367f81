from django.urls import path

from overview import home, planner_views, views, workspace

urlpatterns = [
    path("", home.home, name="home"),
    path("fleet/", views.fleet, name="fleet"),
    path("fleet/nodes/", views.fleet_nodes, name="fleet-nodes"),
    path("fleet/nodes/<str:name>/", views.node_detail, name="fleet-node"),
    path("queues/", views.queues, name="queues"),
    path("workspace/", workspace.workspace, name="workspace"),
    path("start/", workspace.start, name="start"),
    path("planner/", planner_views.planner, name="planner"),
]
