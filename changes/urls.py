from django.urls import path

from changes import views

urlpatterns = [
    path("quota/", views.quota_list, name="quota-list"),
    path("quota/new/", views.quota_new, name="quota-new"),
    path("quota/<int:pk>/", views.quota_detail, name="quota-detail"),
    path("quota/<int:pk>/<str:action>/", views.quota_action, name="quota-action"),
    path("changes/mig-policy/", views.mig_policy_page, name="mig-policy"),
    path(
        "changes/mig-policy/<str:cluster>/propose/",
        views.mig_policy_propose,
        name="mig-policy-propose",
    ),
    path(
        "changes/mig-policy/changes/<int:pk>/<str:action>/",
        views.mig_policy_decide,
        name="mig-policy-decide",
    ),
    path("changes/", views.change_list, name="change-list"),
    path("changes/new/", views.change_new, name="change-new"),
    path("changes/preview/", views.change_preview, name="change-preview"),
    path("changes/<int:pk>/", views.change_detail, name="change-detail"),
    path("changes/<int:pk>/<str:action>/", views.change_action, name="change-action"),
]
