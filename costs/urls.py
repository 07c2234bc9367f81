from django.urls import path

from costs import views

urlpatterns = [
    path("costs/", views.costs_page, name="costs"),
    path("costs/prices/", views.prices_page, name="cost-prices"),
    path("costs/prices/<int:pk>/delete/", views.delete_price, name="cost-price-delete"),
    path(
        "costs/invoices/<slug:team>/<str:month>.csv",
        views.invoice_csv,
        name="cost-invoice-csv",
    ),
    path("costs/invoices/<slug:team>/<str:month>/", views.invoice_page, name="cost-invoice"),
    path("costs/panel/<slug:team>/", views.cost_panel, name="cost-panel"),
]
