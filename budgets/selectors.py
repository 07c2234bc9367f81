"""Reads of budgets: who sees which (platform admins every team's, a lead their own teams'),
what each team has used in its budget's period, and where each budget stands. A page of
any number of budgets reads them in the same few queries."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Sequence

from django.db.models import Q, QuerySet, Sum
from django.http import Http404
from django.utils import timezone

from budgets.models import Budget, BudgetExtension
from budgets.standing import HOUR, Standing, Window, custom_window, monthly_window
from changes.approval import User, teams_user_may_request_for
from costs.selectors import chargeback, policy
from portal.infra.round_trips import Read
from queues.models import LocalQueue
from tenants.models import Team
from usage.models import Rollup, Sample, SamplingState


def teams_for_budgets(user: User) -> QuerySet[Team]:
    """The teams whose budgets ``user`` reads: every team for a platform admin, the teams
    they lead for anyone else (the rule of who asks for a team's changes)."""
    return teams_user_may_request_for(user)


def budgets_for_user(user: User) -> QuerySet[Budget]:
    return (
        Budget.objects.filter(team__in=teams_for_budgets(user))
        .select_related("team")
        .order_by("team__slug")
    )


def budgets_read(teams: Sequence[Team]) -> Read:
    """The budgets of ``teams`` (shown to their members on their home), as a read the page
    sends with its others in one round trip."""
    table = Budget._meta.db_table
    return Read(f"SELECT * FROM {table} WHERE team_id = ANY(%s)", [[t.pk for t in teams]], Budget)


def get_budget_for_user(user: User, pk: int) -> Budget:
    """A budget ``user`` reads (another's, or none: 404)."""
    budget = budgets_for_user(user).filter(pk=pk).first()
    if budget is None:
        raise Http404("No such budget.")
    return budget


def window_of(budget: Budget, now: dt.datetime) -> Window:
    """The budget's period that holds ``now`` (a custom budget's one period, whenever now
    is)."""
    if budget.period == Budget.Period.CUSTOM and budget.starts and budget.ends:
        return custom_window(budget.starts, budget.ends)
    return monthly_window(now)


def _measured_to(now: dt.datetime) -> dt.datetime | None:
    """The end of the last hour the usage history has rolled up (None: nothing yet)."""
    upto = SamplingState.objects.values_list("rolled_up_to", flat=True).first()
    return min(upto, now) if upto is not None else None


def _team_gpu_seconds(
    slugs: Sequence[str], since: dt.datetime, upto: dt.datetime
) -> dict[str, list[tuple[dt.datetime, float]]]:
    """Each team's GPU-seconds (MIG slices weighted by their share of a GPU), summed over
    its namespaces on every cluster, per daily rollup before ``upto``'s day and per hourly
    one of that day up to ``upto`` (the usage reports' rule: a day counts once). One query."""
    day = upto.astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    rows = (
        Rollup.objects.on_every_cluster()
        .filter(kind=Sample.Kind.TEAM, owner__in=list(slugs))
        .filter(
            Q(period=Rollup.Period.DAY, start__gte=since, start__lt=day)
            | Q(period=Rollup.Period.HOUR, start__gte=max(day, since), start__lt=upto)
        )
        .values_list("owner", "start")
        .annotate(gpu=Sum("gpu_seconds"))
        .order_by()
    )
    out: dict[str, list[tuple[dt.datetime, float]]] = defaultdict(list)
    for owner, start, gpu in rows:
        out[owner].append((start, float(gpu or 0)))
    return out


def _money_spent(budgets: Sequence[Budget], windows: dict[int, Window]) -> dict[int, float]:
    """What each money budget's team cost in its window so far, as its invoice says it
    (``costs``' chargeback: allocated hours at each day's price and the team's share of
    idle capacity by the cost policy). One chargeback per distinct window (every monthly
    budget shares one), whatever the number of teams."""
    teams_in: dict[tuple[dt.date, dt.date], list[str]] = defaultdict(list)
    for b in budgets:
        w = windows[b.pk]
        teams_in[(w.start.date(), w.end.date())].append(b.team.slug)
    bills = {
        days: chargeback(days[0], days[1], teams=slugs).teams for days, slugs in teams_in.items()
    }
    out = {}
    for b in budgets:
        w = windows[b.pk]
        bill = bills[(w.start.date(), w.end.date())].get(b.team.slug)
        out[b.pk] = float(bill.total) if bill is not None else 0.0
    return out


def spend(
    budgets: Sequence[Budget], windows: dict[int, Window], upto: dt.datetime | None
) -> dict[int, float]:
    """What each budget's team has spent in its window up to ``upto``, in the budget's
    unit. The one place spend is computed: GPU-hours from the usage history, money from
    the chargeback at the prices that held each day (never without prices: a money budget
    is refused until there are some)."""
    if upto is None or not budgets:
        return {b.pk: 0.0 for b in budgets}
    money = [b for b in budgets if b.unit == Budget.Unit.MONEY]
    budgets = [b for b in budgets if b.unit != Budget.Unit.MONEY]
    spent = _money_spent(money, windows) if money else {}
    if not budgets:
        return spent
    since = min(w.start for w in windows.values())
    used = _team_gpu_seconds([b.team.slug for b in budgets], since, upto)
    return spent | {
        b.pk: round(
            sum(s for start, s in used.get(b.team.slug, []) if windows[b.pk].holds(start)) / HOUR,
            3,
        )
        for b in budgets
    }


def unit_words(budgets: Sequence[Budget]) -> dict[int, str]:
    """What each budget's amounts count, in words: GPU-hours, or the prices' currency (read
    once, and only when a money budget is among them)."""
    currency = policy().currency if any(b.unit == Budget.Unit.MONEY for b in budgets) else ""
    return {b.pk: currency if b.unit == Budget.Unit.MONEY else "GPU-hours" for b in budgets}


def _granted(budgets: Sequence[Budget], windows: dict[int, Window]) -> dict[int, float]:
    """The extensions granted for each budget's window. One query."""
    rows = (
        BudgetExtension.objects.filter(
            budget__in=[b.pk for b in budgets], state=BudgetExtension.State.APPROVED
        )
        .values_list("budget_id", "period_start")
        .annotate(total=Sum("amount"))
        .order_by()
    )
    out: dict[int, float] = defaultdict(float)
    for budget_id, start, total in rows:
        if windows[budget_id].start == start:
            out[budget_id] += float(total)
    return out


def standings(budgets: Sequence[Budget], now: dt.datetime | None = None) -> dict[int, Standing]:
    """Where each budget stands now. Three queries, whatever the number of budgets."""
    now = now or timezone.now()
    windows = {b.pk: window_of(b, now) for b in budgets}
    upto = _measured_to(now)
    spent = spend(budgets, windows, upto)
    granted = _granted(budgets, windows)
    units = unit_words(budgets)
    return {
        b.pk: Standing(
            window=windows[b.pk],
            amount=float(b.amount),
            extended=granted.get(b.pk, 0.0),
            spent=spent[b.pk],
            measured_to=min(upto, windows[b.pk].end) if upto else windows[b.pk].start,
            thresholds=tuple(b.thresholds or ()),
            unit=units[b.pk],
        )
        for b in budgets
    }


def queues_of(teams: Sequence[Team]) -> dict[int, list[LocalQueue]]:
    """Each team's LocalQueues on every cluster (what its budget holds). One query."""
    out: dict[int, list[LocalQueue]] = defaultdict(list)
    rows = (
        LocalQueue.objects.filter(namespace__team__in=list(teams))
        .select_related("namespace__team", "namespace__cluster")
        .order_by("namespace__name", "name")
    )
    for lq in rows:
        out[lq.namespace.team_id].append(lq)
    return out


def budget_deletion(budget: Budget) -> list[str]:
    """What removing ``budget`` changes, said before it is confirmed (a platform admin
    reads it: queue names are theirs to read): the hold it lifts or the enforcement that
    stops, the warnings that stop, the extensions that go with it, and what stays."""
    queues = queues_of([budget.team])[budget.team_id]
    held = [lq for lq in queues if lq.budget_hold]
    lines = []
    if held:
        names = ", ".join(f"{lq.namespace.name}/{lq.name}" for lq in held)
        lines.append(
            f"The team's held LocalQueues ({names}) admit new work again at once: the hold "
            "is lifted before the budget goes."
        )
    elif budget.enforce:
        lines.append(
            "Enforcement stops: the team's LocalQueues are no longer held when the budget is spent."
        )
    percents = [f"{t} %" for t in budget.thresholds or []]
    thresholds = (
        ", ".join(percents[:-1]) + f" and {percents[-1]}"
        if len(percents) > 1
        else "".join(percents)
    )
    if thresholds:
        lines.append(f"The team is no longer warned at {thresholds} of the budget.")
    extensions = list(budget.extensions.values_list("state", flat=True))
    if extensions:
        pending = extensions.count(BudgetExtension.State.PENDING)
        said = (
            "Its extension goes with it"
            if len(extensions) == 1
            else f"Its {len(extensions)} extensions go with it"
        )
        if pending:
            said += f" ({pending} still waiting for a decision)"
        lines.append(f"{said}.")
    lines.append(
        "The team's GPU-hours and costs stay in the reports and invoices; the removal is audited."
    )
    return lines
