from budgets.api import BudgetExtensionViewSet, BudgetViewSet
from portal.api.routers import app_router

router = app_router()
router.register("budgets", BudgetViewSet, basename="budget")
router.register("budget-extensions", BudgetExtensionViewSet, basename="budget-extension")
urlpatterns = router.urls
