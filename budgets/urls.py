from django.urls import path

from budgets import views

urlpatterns = [
    path("budgets/", views.budget_list, name="budgets"),
    path("budgets/<int:pk>/", views.budget_detail, name="budget-page"),
    path("budgets/<int:pk>/delete/", views.budget_delete, name="budget-page-delete"),
    path("budgets/<int:pk>/extend/", views.extension_new, name="budget-page-extend"),
    path(
        "budgets/extensions/<int:pk>/<str:action>/",
        views.extension_decide,
        name="budget-extension-action",
    ),
]
