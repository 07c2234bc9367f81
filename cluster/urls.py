from django.urls import path

from cluster import views

urlpatterns = [
    path("clusters/", views.cluster_list, name="clusters"),
    path("clusters/new/", views.cluster_create, name="cluster-create"),
    path("clusters/<str:name>/", views.cluster_detail, name="cluster-page"),
    path("clusters/<str:name>/edit/", views.cluster_edit, name="cluster-edit"),
    path("clusters/<str:name>/test/", views.cluster_test, name="cluster-test"),
]
