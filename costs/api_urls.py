from django.urls import path

from costs.api import InvoiceView, PolicyView, PriceViewSet, SummaryView
from portal.api.routers import app_router

router = app_router()
router.register("costs/prices", PriceViewSet, basename="cost-price")
urlpatterns = [
    *router.urls,
    path("costs/policy/", PolicyView.as_view(), name="cost-policy"),
    path("costs/summary/", SummaryView.as_view(), name="cost-summary"),
    path("costs/invoices/<slug:team>/<str:month>/", InvoiceView.as_view(), name="cost-invoice-api"),
]
