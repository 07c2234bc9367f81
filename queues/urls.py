from django.urls import path

from queues import views

urlpatterns = [
    path(
        "queues/cluster-queues/<str:name>/edit/",
        views.cluster_queue_edit,
        name="cluster-queue-edit",
    ),
    path(
        "queues/priority-classes/<str:name>/edit/",
        views.priority_class_edit,
        name="priority-class-edit",
    ),
]
