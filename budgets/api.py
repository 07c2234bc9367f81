"""Budgets over the REST API: the same rows as the budgets page (platform admins: every
team's; a lead: their own teams'), set by platform admins and extended by a lead's request
and an admin's decision, each through the budgets' services."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from budgets import services
from budgets.models import Budget, BudgetExtension
from budgets.rows import Row, rows_of
from budgets.selectors import budgets_for_user, get_budget_for_user, teams_for_budgets
from portal.api.safety import StrictInput


class BudgetSerializer(serializers.ModelSerializer[Budget]):
    """A budget with where it stands now (in its unit, ``counted_in``: GPU-hours or the
    prices' currency; ``forecast``: linear, null until an
    hour of the period is measured) and what enforcement does or would do."""

    team = serializers.CharField(source="team.slug", read_only=True)
    standing = serializers.SerializerMethodField()

    class Meta:
        model = Budget
        fields = [
            "id",
            "team",
            "unit",
            "amount",
            "period",
            "starts",
            "ends",
            "thresholds",
            "enforce",
            "updated_at",
            "standing",
        ]

    def get_standing(self, budget: Budget) -> dict[str, Any]:
        row: Row = self.context["rows"][budget.pk]
        s = row.standing
        return {
            "period": s.window.label,
            "counted_in": s.unit,
            "period_start": s.window.start.isoformat(),
            "period_end": s.window.end.isoformat(),
            "spent": round(s.spent, 3),
            "limit": round(s.limit, 3),
            "extended": round(s.extended, 3),
            "percent": round(s.percent, 1),
            "forecast": round(s.forecast, 3) if s.forecast is not None else None,
            "forecast_method": s.how_forecast,
            "measured_to": s.measured_to.isoformat(),
            "held": row.held,
            "queues": [f"{lq.namespace.name}/{lq.name}" for lq in row.queues],
            "enforcement": row.enforcement,
        }


class BudgetInput(StrictInput, serializers.Serializer[Any]):
    team = serializers.SlugField(max_length=63, required=False)
    unit = serializers.ChoiceField(choices=Budget.Unit.choices, required=False)
    amount = serializers.DecimalField(max_digits=14, decimal_places=2, required=False)
    period = serializers.ChoiceField(choices=Budget.Period.choices, required=False)
    starts = serializers.DateField(required=False, allow_null=True)
    ends = serializers.DateField(required=False, allow_null=True)
    thresholds = serializers.ListField(
        child=serializers.IntegerField(), required=False, max_length=20
    )
    enforce = serializers.BooleanField(required=False)


class ExtensionSerializer(serializers.ModelSerializer[BudgetExtension]):
    team = serializers.CharField(source="budget.team.slug", read_only=True)
    requested_by = serializers.CharField(source="requested_by.username", read_only=True)
    decided_by = serializers.CharField(
        source="decided_by.username", read_only=True, allow_null=True
    )

    class Meta:
        model = BudgetExtension
        fields = [
            "id",
            "budget",
            "team",
            "period_start",
            "amount",
            "reason",
            "state",
            "requested_by",
            "decided_by",
            "decided_at",
            "decision_comment",
            "created_at",
        ]


class ExtensionInput(StrictInput, serializers.Serializer[Any]):
    amount = serializers.DecimalField(max_digits=14, decimal_places=2)
    reason = serializers.CharField(max_length=2000)


class ExtensionDecision(StrictInput, serializers.Serializer[Any]):
    comment = serializers.CharField(allow_blank=True, required=False, default="", max_length=2000)


class BudgetViewSet(
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.ReadOnlyModelViewSet[Budget],
):
    """Budgets: list and read (your teams' as their lead; every team's as a platform admin);
    create, change (PATCH) and delete as a platform admin. A money budget is refused (400)
    until a price is set (Costs)."""

    serializer_class = BudgetSerializer
    lookup_value_regex = r"\d+"
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self) -> Any:
        return budgets_for_user(self.request.user)

    def _answer(self, budgets: list[Budget], many: bool, code: int = 200) -> Response:
        rows = {row.budget.pk: row for row in rows_of(budgets)}
        context = {**dict(self.get_serializer_context()), "rows": rows}
        data = BudgetSerializer(budgets if many else budgets[0], many=many, context=context).data
        return Response(data, status=code)

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        budgets = list(page if page is not None else self.get_queryset())
        answer = self._answer(budgets, many=True)
        return self.get_paginated_response(answer.data) if page is not None else answer

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return self._answer([self.get_object()], many=False)

    @extend_schema(request=BudgetInput, responses={201: BudgetSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = BudgetInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        team = teams_for_budgets(request.user).filter(slug=values.pop("team", "")).first()
        if team is None:
            raise serializers.ValidationError({"team": ["No such team."]})
        budget = Budget(team=team, **values)
        services.save_budget(actor=request.user, budget=budget, source="api")
        return self._answer([budget], many=False, code=status.HTTP_201_CREATED)

    @extend_schema(request=BudgetInput, responses={200: BudgetSerializer})
    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        budget = self.get_object()
        data = BudgetInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        if "team" in values:
            raise serializers.ValidationError({"team": ["A budget stays its team's."]})
        for key, value in values.items():
            setattr(budget, key, value)
        services.save_budget(actor=request.user, budget=budget, source="api")
        return self._answer([budget], many=False)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        services.delete_budget(
            actor=request.user, budget=self.get_object(), source="api", confirmed=True
        )
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=ExtensionInput, responses={201: ExtensionSerializer})
    @action(detail=True, methods=["post"])
    def extend(self, request: Request, pk: str) -> Response:
        """Ask for more of this period's budget (the team's lead, or a platform admin)."""
        budget = get_budget_for_user(request.user, int(pk))
        data = ExtensionInput(data=request.data)
        data.is_valid(raise_exception=True)
        extension = services.request_budget_extension(
            actor=request.user,
            team=budget.team,
            amount=data.validated_data["amount"],
            reason=data.validated_data["reason"],
            source="api",
        )
        return Response(ExtensionSerializer(extension).data, status=status.HTTP_201_CREATED)


class BudgetExtensionViewSet(viewsets.ReadOnlyModelViewSet[BudgetExtension]):
    """Extensions of the budgets you read; a platform admin grants or refuses one (never
    their own), the person who asked withdraws it."""

    serializer_class = ExtensionSerializer
    lookup_value_regex = r"\d+"

    def get_queryset(self) -> Any:
        return (
            BudgetExtension.objects.filter(budget__in=budgets_for_user(self.request.user))
            .select_related("budget__team", "requested_by", "decided_by")
            .order_by("-created_at")
        )

    def _decided(self, request: Request, pk: str, verb: str) -> Response:
        self.get_object()  # 404 beyond the budgets you read
        data = ExtensionDecision(data=request.data)
        data.is_valid(raise_exception=True)
        if verb == "cancel":
            services.cancel_budget_extension(actor=request.user, extension_id=int(pk), source="api")
        else:
            services.decide_budget_extension(
                actor=request.user,
                extension_id=int(pk),
                approve=verb == "approve",
                comment=data.validated_data["comment"],
                source="api",
            )
        return Response(ExtensionSerializer(self.get_object()).data)

    @extend_schema(request=ExtensionDecision, responses={200: ExtensionSerializer})
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk: str) -> Response:
        return self._decided(request, pk, "approve")

    @extend_schema(request=ExtensionDecision, responses={200: ExtensionSerializer})
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str) -> Response:
        return self._decided(request, pk, "reject")

    @extend_schema(request=ExtensionDecision, responses={200: ExtensionSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        return self._decided(request, pk, "cancel")
