"""The estimated wait on hand-made histories: the range and its exact basis sentence, and
"no estimate" with why (no history, too few runs, never fits, a stopped queue, a pod outside
Kueue), and an approved MIG change named as what it waits for."""

from __future__ import annotations

import datetime as dt

import pytest

from diagnostics.estimate import (
    Estimate,
    Line,
    NodeChange,
    QueueChange,
    Running,
    Runs,
    between,
    dated,
    estimate_pod,
    estimate_refused,
    estimate_workload,
    quantile,
    start_times,
)

MIN = 60
GPU = "nvidia.com/gpu"
SLICE = "nvidia.com/mig-3g.40gb"
# five finished runs: 50, 60, 70, 80, 90 min -> p25 60 min, p75 80 min
RUNS = [50 * MIN, 60 * MIN, 70 * MIN, 80 * MIN, 90 * MIN]
HISTORY = [Runs(RUNS, "cq-train"), Runs([], "namespace team-a")]


def test_quantiles_interpolate_between_ranks() -> None:
    assert quantile(RUNS, 0.25) == 60 * MIN
    assert quantile(RUNS, 0.75) == 80 * MIN
    assert quantile([10, 20], 0.5) == 15


@pytest.mark.parametrize(
    ("low", "high", "words"),
    [
        (50 * MIN, 80 * MIN, "50–80 min"),
        (2 * 3600, 3 * 3600, "2–3 h"),
        (2 * 3600 - 1, 2 * 3600 + 100, "about 2 h"),  # each end to its unit
        (2 * 3600, 2 * 3600, "about 2 h"),
        (40 * MIN, 2 * 3600, "40 min–2 h"),
        (100, 200, "under 5 min"),
        (0, 30 * MIN, "under 30 min"),
        (2 * 86400, 3 * 86400 + 1, "2–3 days"),
        (65 * MIN, 100 * MIN, "1–2 h"),  # one unit for both ends once the low is one
    ],
)
def test_a_range_is_told_no_more_precisely_than_it_is_known(
    low: float, high: float, words: str
) -> None:
    assert between(low, high) == words


def test_third_in_line_with_two_ahead_waits_for_them_to_run() -> None:
    line = Line(
        cluster_queue="cq-train",
        capacity={GPU: 4},
        running=[Running({GPU: 4}, elapsed_s=0)],
        waiting=[{GPU: 4}, {GPU: 4}, {GPU: 4}],
    )
    estimate = estimate_workload(requests={GPU: 4}, line=line, place=2, histories=HISTORY)
    # quick: the running one ends at 60 min, the two ahead run 60 each: 180 min; slow: 240
    assert (estimate.low_s, estimate.high_s) == (180 * MIN, 240 * MIN)
    assert estimate.text == (
        "about 3–4 h: 3rd in line; the two ahead and the one running usually run 60–80 min "
        "(5 finished in cq-train)"
    )


def test_first_in_line_waits_for_what_runs_given_how_long_it_has_run() -> None:
    line = Line(
        cluster_queue="cq-train",
        capacity={GPU: 8},
        running=[Running({GPU: 4}, elapsed_s=45 * MIN), Running({GPU: 4}, elapsed_s=10 * MIN)],
        waiting=[{GPU: 4}],
    )
    estimate = estimate_workload(requests={GPU: 4}, line=line, histories=HISTORY)
    # the one 45 min in: runs longer than 45 min are all five, 5-45 min left .. p25 15 min
    assert (estimate.low_s, estimate.high_s) == (15 * MIN, 35 * MIN)
    assert estimate.text == (
        "about 15–35 min: first in line; the two running usually run 60–80 min "
        "(5 finished in cq-train)"
    )


def test_first_in_line_with_room_starts_as_soon_as_kueue_looks() -> None:
    line = Line(
        cluster_queue="cq-train",
        capacity={GPU: 8},
        running=[Running({GPU: 4}, 0)],
        waiting=[{GPU: 4}],
    )
    estimate = estimate_workload(requests={GPU: 4}, line=line, histories=HISTORY)
    assert (estimate.low_s, estimate.high_s) == (0, 0)
    assert estimate.summary == "now, once Kueue looks at it"


def test_beside_kueues_more_needed_it_is_never_now() -> None:
    """Finding 5: when Kueue says its queue lacks unused quota for it now, the estimate does
    not say "now" even where the portal's count of the cohort leaves room."""
    line = Line(
        cluster_queue="cq-train",
        capacity={GPU: 8},
        running=[Running({GPU: 4}, 0)],
        waiting=[{GPU: 4}],
    )
    estimate = estimate_workload(requests={GPU: 4}, line=line, histories=HISTORY, short_now=True)
    assert estimate.summary == "no estimate"
    assert estimate.basis.startswith("Kueue finds too little unused quota for it in cq-train now")


def test_a_run_longer_than_any_before_may_end_now_or_run_a_median_run_more() -> None:
    line = Line(
        cluster_queue="cq-train",
        capacity={GPU: 4},
        running=[Running({GPU: 4}, 5 * 3600)],
        waiting=[{GPU: 4}],
    )
    estimate = estimate_workload(requests={GPU: 4}, line=line, histories=HISTORY)
    assert (estimate.low_s, estimate.high_s) == (0, 70 * MIN)


def test_strict_fifo_waits_behind_a_big_head_best_effort_goes_past_it() -> None:
    common = {
        "cluster_queue": "cq-train",
        "capacity": {GPU: 8},
        "running": [Running({GPU: 6}, 0)],
        "waiting": [{GPU: 8}, {GPU: 2}],
    }
    past = start_times(Line(**common), HISTORY[0], 0.25)  # type: ignore[arg-type]
    behind = start_times(Line(**common, strict=True), HISTORY[0], 0.25)  # type: ignore[arg-type]
    # 2 GPUs are free now: BestEffortFIFO admits the 2-GPU one past the 8-GPU head
    assert past == [60 * MIN, 0]
    # StrictFIFO: the head once the running one ends at 60, the 2-GPU one after the head
    assert behind == [60 * MIN, 120 * MIN]


def test_the_line_is_played_once_for_everyone_in_it() -> None:
    line = Line(cluster_queue="cq-train", capacity={GPU: 4}, waiting=[{GPU: 4}] * 300)
    first = start_times(line, HISTORY[0], 0.75)
    assert len(first) == 200  # MAX_LINE: further back is not played out
    assert first[:3] == [0, 80 * MIN, 160 * MIN]
    assert start_times(line, HISTORY[0], 0.75) is first
    far = estimate_workload(requests={GPU: 4}, line=line, place=250, histories=HISTORY)
    assert far.text == ("no estimate: it is 251st in line: too far back for run times to say when")


def test_a_workload_ahead_that_never_fits_holds_no_one_up() -> None:
    line = Line(cluster_queue="cq-train", capacity={GPU: 4}, waiting=[{GPU: 16}, {GPU: 4}])
    assert start_times(line, HISTORY[0], 0.75) == [None, 0]


def test_without_the_visibility_api_the_place_is_guessed_and_says_so() -> None:
    line = Line(
        cluster_queue="cq-train",
        capacity={GPU: 4},
        running=[Running({GPU: 4}, 0)],
        waiting=[{GPU: 4}, {GPU: 4}],
    )
    estimate = estimate_workload(
        requests={GPU: 4}, line=line, place=1, exact=False, histories=HISTORY
    )
    assert estimate.basis.startswith("about 2nd in line by priority and age; the one ahead and")


def test_the_back_off_after_an_eviction_comes_first() -> None:
    line = Line(cluster_queue="cq-train", capacity={GPU: 4}, waiting=[{GPU: 4}])
    estimate = estimate_workload(
        requests={GPU: 4}, line=line, histories=HISTORY, requeue_in_s=10 * MIN
    )
    assert (estimate.low_s, estimate.high_s) == (10 * MIN, 10 * MIN)


def test_no_history_is_no_estimate() -> None:
    line = Line(cluster_queue="cq-train", capacity={GPU: 4})
    estimate = estimate_workload(
        requests={GPU: 4}, line=line, histories=[Runs([], "cq-train"), Runs([], "namespace a")]
    )
    assert not estimate.known
    assert estimate.text == (
        "no estimate: no workload of cq-train or namespace a has finished yet to learn run "
        "times from"
    )


def test_too_few_runs_is_no_estimate_unless_the_team_has_enough() -> None:
    line = Line(
        cluster_queue="cq-train",
        capacity={GPU: 4},
        running=[Running({GPU: 4}, 0)],
        waiting=[{GPU: 4}],
    )
    few = estimate_workload(
        requests={GPU: 4},
        line=line,
        histories=[Runs(RUNS[:3], "cq-train"), Runs(RUNS[:2], "namespace team-a")],
    )
    assert few.text == (
        "no estimate: too few finished workloads to go by (3 in cq-train, 2 in namespace "
        "team-a; 5 needed)"
    )
    team = estimate_workload(
        requests={GPU: 4},
        line=line,
        histories=[Runs(RUNS[:3], "cq-train"), Runs(RUNS, "namespace team-a")],
    )
    assert team.basis.endswith("usually runs 60–80 min (5 finished in namespace team-a)")


def test_a_workload_larger_than_the_queue_can_hold_never_fits() -> None:
    line = Line(cluster_queue="cq-train", capacity={GPU: 8})
    estimate = estimate_workload(requests={GPU: 12}, line=line, histories=HISTORY)
    assert estimate.text == (
        "no estimate: it can never fit because it asks for 12 nvidia.com/gpu and cq-train can "
        "hold at most 8, borrowing included"
    )


def test_what_the_explainer_knows_never_fits_gets_its_words() -> None:
    line = Line(cluster_queue="cq-train", capacity={GPU: 8})
    never = "it can never start as it is: namespace team-a may not use that queue"
    estimate = estimate_workload(requests={GPU: 1}, line=line, histories=HISTORY, never=never)
    assert estimate.text == f"no estimate: {never}"


def test_an_approved_mig_change_that_raises_the_quota_is_what_it_waits_for() -> None:
    line = Line(
        cluster_queue="cq-infer",
        capacity={SLICE: 8},
        changes=[QueueChange(7, ["gpu-a100-03"], {SLICE: 16}, starts_in_s=40 * MIN)],
    )
    estimate = estimate_workload(requests={SLICE: 12}, line=line, histories=HISTORY)
    assert (estimate.low_s, estimate.high_s) == (40 * MIN, None)
    assert estimate.text == (
        "after MIG change #7: cq-infer cannot hold it now; the approved change on gpu-a100-03 "
        "adds 16 nvidia.com/mig-3g.40gb to its quota, due to start in about 40 min"
    )


def test_a_stopped_cluster_queue_admits_nothing() -> None:
    line = Line(
        cluster_queue="cq-train",
        capacity={GPU: 8},
        stopped="ClusterQueue cq-train is stopped (Hold)",
    )
    estimate = estimate_workload(requests={GPU: 1}, line=line, histories=HISTORY)
    assert estimate.text == (
        "no estimate: ClusterQueue cq-train is stopped (Hold): it admits nothing until a "
        "platform admin lets it run again"
    )
    running = Line(cluster_queue="cq-train", capacity={GPU: 8}, waiting=[{GPU: 1}])
    held = estimate_workload(
        requests={GPU: 1},
        line=running,
        histories=HISTORY,
        held="LocalQueue team-a-train is stopped (HoldAndDrain)",
    )
    assert held.basis.startswith("LocalQueue team-a-train is stopped (HoldAndDrain): it admits")
    gone = estimate_workload(requests={GPU: 1}, line=running, place=None, histories=HISTORY)
    assert gone.text == "no estimate: it was not in its queue's line at the last poll"


def test_a_queue_the_portal_does_not_know_is_no_estimate() -> None:
    estimate = estimate_workload(requests={GPU: 1}, line=None, histories=HISTORY)
    assert estimate.text == "no estimate: its queue has no ClusterQueue the portal knows"


def test_a_pod_without_kueue_has_no_run_times_to_go_by() -> None:
    estimate = estimate_pod(wanted={GPU: 1}, topic="insufficient-gpu")
    assert estimate.text == (
        "no estimate: it waits for room on the nodes outside any Kueue queue, and the portal "
        "keeps run times of Kueue workloads only"
    )


def test_a_pod_that_can_never_fit_says_why() -> None:
    never = "it can never fit because it asks for 12 gpu on one node and the largest node offers 8"
    estimate = estimate_pod(wanted={GPU: 12}, never=never, topic="insufficient-gpu")
    assert estimate.text == f"no estimate: {never}"


def test_a_pod_waiting_for_a_profile_an_approved_change_adds_waits_for_that_change() -> None:
    change = NodeChange(12, "gpu-a100-03", "all-3g.40gb", {SLICE: 16}, running=True)
    other = NodeChange(11, "gpu-a100-04", "all-1g.10gb", {"nvidia.com/mig-1g.10gb": 56})
    estimate = estimate_pod(
        wanted={SLICE: 1},
        never="it can never fit because no node offers nvidia.com/mig-3g.40gb",
        topic="mig-mismatch",
        changes=[other, change],
    )
    assert (estimate.low_s, estimate.high_s) == (0, None)
    assert estimate.text == (
        "after MIG change #12: the approved change puts gpu-a100-03 on all-3g.40gb, which "
        "offers what it asks for, running now"
    )
    # a pod the change does not help (a node selector no node matches) is not told so
    blocked = estimate_pod(
        wanted={SLICE: 1},
        never="it can never start as it is: no node matches its node selector or affinity",
        topic="pod-pending",
        changes=[change],
    )
    assert not blocked.known


def test_gangs_and_pods_of_admitted_workloads_and_refused_creations_say_why_not() -> None:
    assert estimate_pod(wanted={GPU: 1}, gang=True).basis == (
        "the portal keeps no run times of Volcano gangs"
    )
    assert estimate_pod(wanted={GPU: 1}, admitted_workload="job-a").basis == (
        "Kueue admitted its workload job-a; the nodes hold it, and the portal keeps no run "
        "times of what runs on them"
    )
    assert estimate_refused().basis.startswith("its pods are created when the namespace's quota")


def test_an_estimate_is_dated_no_more_precisely_than_five_minutes() -> None:
    now = dt.datetime(2026, 12, 2, 1, 2, 3, tzinfo=dt.UTC)
    range_ = dated(Estimate("about 3–4 h", "", low_s=3 * 3600, high_s=4 * 3600), now)
    assert (range_.earliest, range_.latest) == (
        dt.datetime(2026, 12, 2, 4, 0, tzinfo=dt.UTC),
        dt.datetime(2026, 12, 2, 5, 5, tzinfo=dt.UTC),
    )
    assert range_.far
    after = dated(Estimate("after MIG change #3", "", low_s=0), now)
    assert (after.earliest, after.latest, after.far) == (
        dt.datetime(2026, 12, 2, 1, 0, tzinfo=dt.UTC),
        None,
        False,
    )
    none = dated(Estimate("no estimate", "why"), now)
    assert (none.earliest, none.latest, none.known) == (None, None, False)
