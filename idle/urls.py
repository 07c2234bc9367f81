from django.urls import path

from idle import views

urlpatterns = [
    path("idle/", views.idle_list, name="idle-list"),
    path("idle/teams/<slug:slug>/policy/", views.idle_policy, name="idle-policy"),
]
