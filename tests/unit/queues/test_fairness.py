"""Cohort totals, what each queue lends, fair-sharing shares and the cohort tree, read from
Kueue's own objects (the recorded rc-research cohort: team-b borrows 2 GPUs of team-c's
idle 4)."""

from __future__ import annotations

import copy
from fractions import Fraction
from typing import Any

from queues.fairness import (
    INFINITE_SHARE,
    Facts,
    cohort_tree,
    queue_rows,
    share_of,
    walk,
)
from tests.unit.diagnostics.recorded import kueue


def facts(recorded: dict[str, Any], *, cohort: str | None = None, weight: str = "") -> Facts:
    return Facts(
        recorded["metadata"]["name"],
        recorded["spec"].get("cohortName", "") if cohort is None else cohort,
        weight,
        recorded["spec"]["resourceGroups"],
        recorded.get("status") or {},
    )


def by_resource(rows: list[Any]) -> dict[str, tuple[Any, ...]]:
    return {r.resource: (r.nominal, r.used, r.borrowed, r.lent) for r in rows}


def test_a_borrower_lends_nothing_of_what_it_uses_and_an_idle_queue_lends_its_quota() -> None:
    borrower = by_resource(queue_rows(facts(kueue("clusterqueue-borrowing.json"))))
    assert borrower["nvidia.com/gpu"] == (4, 6, 2, 0)  # 6 in use, 2 of them borrowed
    assert borrower["cpu"] == (32, 1, 0, 31)
    assert borrower["memory"] == (256 * 2**30, 2**30, 0, 255 * 2**30)
    lender = by_resource(queue_rows(facts(kueue("clusterqueue-lender.json"))))
    assert lender["nvidia.com/gpu"] == (4, 0, 0, 4)


def test_the_lending_limit_caps_what_a_queue_lends_and_no_cohort_lends_nothing() -> None:
    recorded = copy.deepcopy(kueue("clusterqueue-lender.json"))
    gpu = recorded["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]
    gpu["lendingLimit"] = "1"
    assert by_resource(queue_rows(facts(recorded)))["nvidia.com/gpu"][3] == 1
    alone = by_resource(queue_rows(facts(kueue("clusterqueue-lender.json"), cohort="")))
    assert alone["nvidia.com/gpu"][3] == 0


def test_a_queue_the_poll_has_not_seen_has_its_quota_and_no_use() -> None:
    recorded = copy.deepcopy(kueue("clusterqueue-lender.json"))
    del recorded["status"]
    assert by_resource(queue_rows(facts(recorded)))["nvidia.com/gpu"] == (4, None, None, None)


def test_kueues_weighted_share_where_it_reports_one() -> None:
    assert share_of("", {}) == share_of("1", {"pendingWorkloads": 0})
    assert share_of("", {}).weight == "1" and share_of("", {}).value is None
    assert share_of("80", {"fairSharing": {"weightedShare": 125}}).value == 125
    assert share_of("0", {"fairSharing": {"weightedShare": INFINITE_SHARE}}).infinite
    assert share_of("2", {"fairSharing": {}}).value == 0  # reported, not borrowing
    assert share_of("2", {"fairSharing": {"weightedShare": "x"}}).value is None


def test_cohort_totals_add_up_the_whole_subtree_and_the_cohorts_own_quota() -> None:
    borrower = facts(kueue("clusterqueue-borrowing.json"), cohort="rc-research")
    lender = facts(kueue("clusterqueue-lender.json"), cohort="rc-lab")
    extra = [
        {
            "coveredResources": ["nvidia.com/gpu"],
            "flavors": [
                {"name": "rc-h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "2"}]}
            ],
        }
    ]
    cohorts = [
        Facts("rc-lab", "rc-research", "3", [], {"fairSharing": {"weightedShare": 0}}),
        Facts("rc-research", "rc-org", "", extra, {}),
        Facts("rc-org", "", "", [], {}),
    ]
    queues = [borrower, lender]
    roots = cohort_tree(cohorts, queues, {q.name: queue_rows(q) for q in queues})
    assert [(n.name, n.depth, n.within) for n in walk(roots)] == [
        ("rc-org", 0, ""),
        ("rc-research", 1, "rc-org"),
        ("rc-lab", 2, "rc-org \u203a rc-research"),
    ]
    org, research, lab = walk(roots)
    assert (research.queues, lab.queues) == (["rc-cq-team-b"], ["rc-cq-team-c"])
    assert (lab.share.weight, lab.share.value, research.share.value) == ("3", 0, None)
    gpu = {n.name: by_resource(n.totals)["nvidia.com/gpu"] for n in (org, research, lab)}
    # rc-research: 4 + 4 of its queues and 2 of its own; 6 in use, 2 borrowed, 4 lent
    assert gpu == {"rc-org": (10, 6, 2, 4), "rc-research": (10, 6, 2, 4), "rc-lab": (4, 0, 0, 4)}
    # rc-org holds nothing of its own: its totals are rc-research's; rc-research has quota
    assert (org.same_as, research.same_as, lab.same_as) == ("rc-research", "", "")
    assert all(n.observed for n in (org, research, lab))


def test_an_implicit_cohort_and_a_cycle_still_make_a_tree() -> None:
    """A cohortName with no Cohort object is a cohort all the same; a parent cycle (Kueue
    deactivates it) is shown as roots, never as a page that loops."""
    queue = facts(kueue("clusterqueue-lender.json"), cohort="rc-implicit")
    cohorts = [Facts("a", "b", "", [], {}), Facts("b", "a", "", [], {})]
    roots = cohort_tree(cohorts, [queue], {queue.name: queue_rows(queue)})
    assert [(n.name, n.queues) for n in walk(roots)] == [
        ("a", []),
        ("b", []),
        ("rc-implicit", ["rc-cq-team-c"]),
    ]
    assert walk(roots)[0].totals == [] and not walk(roots)[0].observed
    assert by_resource(walk(roots)[2].totals)["nvidia.com/gpu"] == (4, 0, 0, 4)


def test_an_unobserved_subtree_has_quota_and_no_use() -> None:
    recorded = copy.deepcopy(kueue("clusterqueue-lender.json"))
    del recorded["status"]
    queue = facts(recorded)
    roots = cohort_tree(
        [Facts("rc-research", "", "", [], {})], [queue], {queue.name: queue_rows(queue)}
    )
    assert by_resource(roots[0].totals)["nvidia.com/gpu"] == (Fraction(4), None, None, None)
    assert not roots[0].observed


def test_part_amounts_add_up_exactly_with_whole_ones_in_a_cohorts_totals() -> None:
    """One queue's 1.5 CPUs (0.25 in use) beside another's 2.5 (all in use): the cohort's
    totals are exact (4 cores nominal, 2.75 in use, 1.25 lent: no float on the way), and
    the whole GPU amounts beside them stay whole numbers."""
    lender = copy.deepcopy(kueue("clusterqueue-lender.json"))
    cpu = lender["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert cpu["name"] == "cpu"
    cpu["nominalQuota"] = "1500m"
    lender["status"]["flavorsUsage"][0]["resources"][0]["total"] = "250m"
    other = copy.deepcopy(lender)
    other["metadata"]["name"] = "other"
    other["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "2500m"
    other["status"]["flavorsUsage"][0]["resources"][0]["total"] = "2500m"
    queues = [facts(lender), facts(other)]
    rows = {q.name: queue_rows(q) for q in queues}
    lent = by_resource(rows[queues[0].name])["cpu"][3]
    assert lent == Fraction(5, 4) and isinstance(lent, Fraction)
    (root,) = cohort_tree([], queues, rows)
    nominal, used, _, lent = by_resource(root.totals)["cpu"]
    assert (nominal, used, lent) == (4, Fraction(11, 4), Fraction(5, 4))
    assert isinstance(used, Fraction) and isinstance(lent, Fraction)
    gpus = by_resource(root.totals)["nvidia.com/gpu"]
    assert gpus == (8, 0, 0, 8) and all(type(v) is int for v in gpus)
