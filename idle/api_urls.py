from django.urls import path

from idle.api import IdleView

urlpatterns = [path("idle/", IdleView.as_view(), name="idle")]
