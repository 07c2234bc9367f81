"""The quota what-if against Kueue's documented behaviour. Each answer is worked out from
the Kueue docs (v0.19) named in the test's docstring:

* CQ  = concepts/cluster_queue.md (sections named after the ``#``)
* PRE = concepts/preemption.md (sections named after the ``#``)
* COH = concepts/cohort.md (hierarchical cohorts; docs/reference/kueue-hierarchical-cohorts.md)
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from queues.whatif import (
    Cohort,
    Group,
    Outcome,
    Queue,
    Quota,
    Refusal,
    Workload,
    World,
    namespace_quota_fit,
    what_if,
)

CPU = "cpu"


def queue(name: str, nominal: int, cohort: str = "team-ab", **options: Any) -> Queue:
    """One flavor ``default`` of cpu (the docs' examples)."""
    limits = {
        k: Fraction(options.pop(k)) for k in ("borrowing_limit", "lending_limit") if k in options
    }
    return Queue(
        name=name,
        groups=(Group((CPU,), ("default",)),),
        quotas={("default", CPU): Quota(Fraction(nominal), **limits)},
        cohort=cohort,
        **options,
    )


def wl(
    key: str,
    q: str,
    cpu: int,
    *,
    priority: int = 0,
    created: float = 0,
    admitted: bool = False,
    flavor: str = "default",
    at: float = 0,
) -> Workload:
    return Workload(
        key=key,
        queue=q,
        requests={CPU: Fraction(cpu)},
        priority=priority,
        created=created,
        admitted=admitted,
        flavors={CPU: flavor} if admitted else {},
        admitted_at=at,
    )


def run(queues: list[Queue], workloads: list[Workload], **world: Any) -> Outcome:
    w = World(tuple(queues), tuple(workloads), **world)
    return what_if(w, w)


def admitted(outcome: Outcome) -> list[str]:
    return [a.workload for a in outcome.admitted]


def preempted(outcome: Outcome) -> dict[str, str]:
    return {p.workload: p.reason for p in outcome.preempted}


# ----------------------------------------------------------------------------- borrowing


def test_borrowing_up_to_the_cohorts_unused_quota() -> None:
    """CQ#borrowing-example: with team-b-cq idle, team-a-cq (9 cpu) admits up to 12+9=21."""
    a, b = queue("team-a-cq", 9), queue("team-b-cq", 12)
    out = run([a, b], [wl("a/big", "team-a-cq", 21), wl("a/more", "team-a-cq", 1, created=1)])
    assert admitted(out) == ["a/big"]
    assert out.admitted[0].borrows
    assert [w.workload for w in out.waiting] == ["a/more"]
    row = next(r for r in out.borrowing if r.queue == "team-a-cq")
    assert (row.borrowed_before, row.borrowed_after) == (0, 12)


def test_borrowing_limit_caps_what_a_queue_borrows() -> None:
    """CQ#borrowinglimit: team-a-cq with nominal 9 and borrowingLimit 1 admits 9+1=10."""
    a, b = queue("team-a-cq", 9, borrowing_limit=1), queue("team-b-cq", 12)
    assert admitted(run([a, b], [wl("a/ten", "team-a-cq", 10)])) == ["a/ten"]
    out = run([a, b], [wl("a/eleven", "team-a-cq", 11)])
    assert admitted(out) == []
    assert "needs 11 cpu on default, 10 free" in out.waiting[0].why


def test_lending_limit_keeps_the_rest_for_the_lender() -> None:
    """CQ#lendinglimit: team-b-cq (12, lendingLimit 1) lends only 1: team-a-cq (9) admits
    9+1=10; without a lending limit team-b-cq may use 9+12."""
    a, b = queue("team-a-cq", 9), queue("team-b-cq", 12, lending_limit=1)
    assert admitted(run([a, b], [wl("a/ten", "team-a-cq", 10)])) == ["a/ten"]
    assert admitted(run([a, b], [wl("a/eleven", "team-a-cq", 11)])) == []
    assert admitted(run([a, b], [wl("b/all", "team-b-cq", 21)])) == ["b/all"]


def test_no_cohort_no_borrowing() -> None:
    """CQ#cohort: a ClusterQueue without a cohort cannot borrow."""
    alone = queue("solo", 4, cohort="")
    other = queue("idle", 100, cohort="")
    assert admitted(run([alone, other], [wl("s/five", "solo", 5)])) == []


def test_a_nominal_increase_admits_who_waits_and_others_may_borrow_less() -> None:
    """CQ#flavors-and-borrowing-semantics: a request fits within the queue's unused nominal
    quota; the cohort's members may borrow only what is left unused."""
    a_now, b = queue("team-a-cq", 4), queue("team-b-cq", 4)
    waiting = wl("a/six", "team-a-cq", 6)
    busy_b = wl("b/four", "team-b-cq", 4, admitted=True)
    current = World((a_now, b), (waiting, busy_b))
    assert what_if(current, current).admitted == ()
    proposed = current.with_queue(queue("team-a-cq", 8))
    out = what_if(current, proposed)
    assert admitted(out) == ["a/six"]
    assert not out.admitted[0].borrows
    b_row = next(r for r in out.borrowing if r.queue == "team-b-cq")
    assert (b_row.may_borrow_before, b_row.may_borrow_after) == (4, 2)


# ----------------------------------------------------------------------------- order


def test_priority_first_then_oldest_first() -> None:
    """CQ#queueing-strategy: both strategies order by priority, then creation time."""
    q = queue("q", 4, cohort="")
    out = run(
        [q],
        [
            wl("old-low", "q", 4, priority=0, created=1),
            wl("new-high", "q", 4, priority=10, created=5),
            wl("older-high", "q", 4, priority=10, created=2),
        ],
    )
    assert admitted(out) == ["older-high"]
    assert [w.workload for w in out.waiting] == ["new-high", "old-low"]


def test_best_effort_fifo_admits_what_fits_behind_a_big_one() -> None:
    """CQ#queueing-strategy: BestEffortFIFO: an older workload that does not fit does not
    block newer ones that do."""
    q = queue("q", 4, cohort="")
    out = run([q], [wl("big", "q", 6, created=1), wl("small", "q", 2, created=2)])
    assert admitted(out) == ["small"]


def test_strict_fifo_blocks_behind_the_head() -> None:
    """CQ#queueing-strategy: StrictFIFO: the older workload that does not fit blocks the
    newer ones."""
    q = queue("q", 4, cohort="", strategy="StrictFIFO")
    out = run([q], [wl("big", "q", 6, created=1), wl("small", "q", 2, created=2)])
    assert admitted(out) == []
    assert out.waiting[1].workload == "small" and "StrictFIFO" in out.waiting[1].why


def test_flavors_in_order_and_fungibility() -> None:
    """CQ#flavorfungibility: flavors are tried in order; a flavor that fits without
    borrowing is taken at once; ``whenCanBorrow: MayStopSearch`` stops at a flavor that fits
    by borrowing, ``TryNextFlavor`` looks on."""

    def two(name: str, **options: Any) -> Queue:
        return Queue(
            name=name,
            groups=(Group((CPU,), ("spot", "on-demand")),),
            quotas={("spot", CPU): Quota(Fraction(2)), ("on-demand", CPU): Quota(Fraction(4))},
            cohort="c",
            **options,
        )

    lender = Queue("lender", (Group((CPU,), ("spot",)),), {("spot", CPU): Quota(Fraction(8))}, "c")
    job = wl("j", "q", 3)
    out = run([two("q"), lender], [job])
    assert out.admitted[0].flavors == {CPU: "spot"} and out.admitted[0].borrows
    out = run([two("q", when_can_borrow="TryNextFlavor"), lender], [job])
    assert out.admitted[0].flavors == {CPU: "on-demand"} and not out.admitted[0].borrows


# ----------------------------------------------------------------------------- preemption


def test_within_cluster_queue_lower_priority() -> None:
    """CQ#preemption ``withinClusterQueue: LowerPriority``: only lower-priority workloads of
    the same ClusterQueue; PRE#classic-preemption: the most recently admitted goes first."""
    q = queue("q", 4, cohort="", within_cluster_queue="LowerPriority")
    running = [
        wl("low-old", "q", 2, priority=1, admitted=True, at=1),
        wl("low-new", "q", 2, priority=1, admitted=True, at=2),
    ]
    out = run([q], [*running, wl("high", "q", 2, priority=5)])
    assert admitted(out) == ["high"]
    assert preempted(out) == {"low-new": "InClusterQueue"}
    assert out.preempted[0].policy == "withinClusterQueue: LowerPriority"
    same = run([q], [*running, wl("peer", "q", 2, priority=1, created=-5)])
    assert admitted(same) == [] and preempted(same) == {}


def test_within_cluster_queue_lower_or_newer_equal_priority() -> None:
    """CQ#preemption ``LowerOrNewerEqualPriority``: equal priority and newer than the
    pending workload may be preempted too."""
    q = queue("q", 2, cohort="", within_cluster_queue="LowerOrNewerEqualPriority")
    newer = wl("newer", "q", 2, priority=1, created=10, admitted=True)
    out = run([q], [newer, wl("older", "q", 2, priority=1, created=1)])
    assert preempted(out) == {"newer": "InClusterQueue"}
    older = wl("older-run", "q", 2, priority=1, created=0, admitted=True)
    assert preempted(run([q], [older, wl("late", "q", 2, priority=1, created=1)])) == {}


def test_never_preempts_by_default() -> None:
    """CQ#preemption: ``Never`` is the default for every policy."""
    q = queue("q", 2, cohort="")
    out = run([q], [wl("low", "q", 2, admitted=True), wl("high", "q", 2, priority=9)])
    assert preempted(out) == {} and admitted(out) == []


def _reclaim_world(policy: str, borrower_priority: int) -> Outcome:
    a = queue("team-a-cq", 9)
    b = queue("team-b-cq", 12, reclaim_within_cohort=policy)
    borrowing = [
        wl("a/nominal", "team-a-cq", 9, priority=borrower_priority, admitted=True, at=1),
        wl("a/borrowed", "team-a-cq", 6, priority=borrower_priority, admitted=True, at=2),
        wl("b/running", "team-b-cq", 6, admitted=True, at=0),
    ]
    return run([a, b], [*borrowing, wl("b/back", "team-b-cq", 6, priority=5)])


def test_reclaim_within_cohort_any() -> None:
    """CQ#preemption ``reclaimWithinCohort: Any``: a workload within its queue's nominal
    quota takes it back from a borrowing queue, whatever the priority."""
    out = _reclaim_world("Any", borrower_priority=100)
    assert admitted(out) == ["b/back"]
    assert preempted(out) == {"a/borrowed": "InCohortReclamation"}


def test_reclaim_within_cohort_lower_priority() -> None:
    """CQ#preemption ``reclaimWithinCohort: LowerPriority``: only lower-priority workloads
    of the borrowing queue."""
    assert preempted(_reclaim_world("LowerPriority", borrower_priority=1)) == {
        "a/borrowed": "InCohortReclamation"
    }
    assert preempted(_reclaim_world("LowerPriority", borrower_priority=100)) == {}
    assert preempted(_reclaim_world("Never", borrower_priority=0)) == {}


def _borrow_world(**preemption: Any) -> Outcome:
    a = queue("a", 2, **preemption)
    b, c = queue("b", 6), queue("c", 4)
    admitted_now = [
        wl("b/main", "b", 6, priority=5, admitted=True, at=1),
        wl("b/extra", "b", 4, priority=0, admitted=True, at=2),
        wl("c/main", "c", 2, priority=0, admitted=True, at=1),
    ]
    return run([a, b, c], [*admitted_now, wl("a/needs-to-borrow", "a", 3, priority=10)])


def test_borrow_within_cohort_preempts_while_borrowing() -> None:
    """CQ#preemption ``borrowWithinCohort: LowerPriority`` with ``maxPriorityThreshold``;
    PRE#classic-preemption: a workload above its nominal quota preempts only when
    ``borrowWithinCohort`` is enabled, and only workloads up to the threshold."""
    out = _borrow_world(
        reclaim_within_cohort="Any", borrow_within_cohort="LowerPriority", borrow_max_priority=3
    )
    assert preempted(out) == {"b/extra": "InCohortReclaimWhileBorrowing"}
    assert out.admitted[0].borrows
    assert "maxPriorityThreshold 3" in out.preempted[0].policy
    below = _borrow_world(
        reclaim_within_cohort="Any", borrow_within_cohort="LowerPriority", borrow_max_priority=-1
    )
    assert preempted(below) == {}
    assert preempted(_borrow_world(reclaim_within_cohort="Any")) == {}


def test_targets_are_minimised() -> None:
    """PRE#targets: the greedy list is walked back and any workload the preemptor fits
    without is spared."""
    q = queue("q", 6, cohort="", within_cluster_queue="LowerPriority")
    running = [
        wl("big", "q", 4, priority=0, admitted=True, at=1),
        wl("small", "q", 2, priority=0, admitted=True, at=2),
    ]
    out = run([q], [*running, wl("high", "q", 4, priority=9)])
    assert preempted(out) == {"big": "InClusterQueue"}


# ----------------------------------------------------------------------------- fair sharing


def _fair(weight_a: str, weight_b: str) -> Outcome:
    a = queue("a", 0, weight=Fraction(weight_a), reclaim_within_cohort="Any")
    b = queue("b", 0, weight=Fraction(weight_b))
    lender = queue("lender", 12)
    running = [
        wl("a/1", "a", 3, admitted=True, at=1),
        wl("a/2", "a", 3, admitted=True, at=2),
        wl("b/1", "b", 3, admitted=True, at=1),
        wl("b/2", "b", 3, admitted=True, at=2),
    ]
    return run([a, b, lender], [*running, wl("a/3", "a", 3)], fair_sharing=True)


def test_fair_sharing_equal_weights_do_not_preempt() -> None:
    """PRE#fair-sharing, preemption strategies: with equal weights a's share with its new
    workload (9/12) is above b's without its workload (3/12) and above b's now (6/12)."""
    out = _fair("1", "1")
    assert preempted(out) == {} and admitted(out) == []


def test_fair_sharing_weights_decide() -> None:
    """PRE#fair-sharing: weight 2 halves a's share (9/12/2 = 375 < b's 500):
    LessThanInitialShare allows preempting b's most recently admitted workload."""
    out = _fair("2", "1")
    assert admitted(out) == ["a/3"]
    assert preempted(out) == {"b/2": "InCohortFairSharing"}


def test_fair_sharing_admits_the_lowest_share_first() -> None:
    """PRE#clusterqueue-share-value: Kueue admits from the queue with the lowest share
    first; b's weight 2 halves its share, so b's younger workload goes before a's."""
    a, b = queue("a", 0), queue("b", 0, weight=Fraction(2))
    lender = queue("lender", 10)
    workloads = [wl("a/six", "a", 6, created=1), wl("b/six", "b", 6, created=2)]
    out = run([a, b, lender], workloads, fair_sharing=True)
    assert admitted(out) == ["b/six"]
    out = run([a, queue("b", 0), lender], workloads, fair_sharing=True)
    assert admitted(out) == ["a/six"]


# ----------------------------------------------------------------------------- limits of the model


def test_says_what_it_does_not_model() -> None:
    out = run([queue("q", 1)], [])
    text = " ".join(out.not_modelled)
    for word in ("TAS", "Admission checks", "Partial admission"):
        assert word in text


def test_stopped_queue_and_uncovered_resource_wait() -> None:
    """CQ#stoppolicy: a stopped queue admits nothing; CQ#resources: a queue admits only the
    resources it has quota for."""
    stopped = queue("s", 10, cohort="", stopped=True)
    gpu = Workload("g", "q", {"nvidia.com/gpu": Fraction(1)})
    out = run([stopped, queue("q", 10, cohort="")], [wl("w", "s", 1), gpu])
    assert admitted(out) == []
    whys = {w.workload: w.why for w in out.waiting}
    assert whys["w"] == "Its ClusterQueue is stopped."
    assert "nvidia.com/gpu is not in ClusterQueue q's quota" in whys["g"]


def test_a_namespace_quota_counts_waiting_workloads_in_kueues_order() -> None:
    """A ResourceQuota is checked at pod creation, after Kueue admits (kueue-semantics §7):
    the pods refused now first, then the higher-priority workload; one refused uses
    nothing (4 used + 2 + 8 > 10 now; 4 + 2 + 8 + 4 > 16 after)."""
    gpu = "nvidia.com/gpu"
    workloads = [
        Workload("team-a/low", "q", {gpu: Fraction(4)}, priority=0, created=1),
        Workload("team-a/high", "q", {gpu: Fraction(8)}, priority=5, created=2),
        Workload("team-a/running", "q", {gpu: Fraction(4)}, admitted=True),
        Workload("team-b/other", "q", {gpu: Fraction(1)}),
    ]
    refused = [Refusal("team-a", "Job team-a/eval-sweep", {f"requests.{gpu}": Fraction(2)})]
    rows = namespace_quota_fit(
        workloads,
        namespace="team-a",
        item=f"requests.{gpu}",
        resource=gpu,
        refused=refused,
        used=Fraction(4),
        before=Fraction(10),
        after=Fraction(16),
    )
    assert [(r.workload, r.fits_before, r.fits_after) for r in rows] == [
        ("Job team-a/eval-sweep (its next pod)", True, True),
        ("team-a/high", False, True),
        ("team-a/low", True, False),
    ]


def test_a_workload_that_waits_for_its_victims_is_admitted_after_one_that_fits_now() -> None:
    """Finding 11, as real Kueue 0.19 did it (tests/realcluster): cq-train at 18 with
    ``withinClusterQueue: LowerPriority`` in a cohort with cq-infer (4, in use) and cq-dev
    (0, borrowing). team-a's ``high`` must preempt team-b's ``victim``; team-dev's ``dev``
    fits now by borrowing. Kueue admits ``dev`` in that cycle and ``high`` once its victim
    is gone; the what-if said ``high`` first."""
    train = queue("cq-train", 18, cohort="ai", within_cluster_queue="LowerPriority")
    infer = queue("cq-infer", 4, cohort="ai")
    dev = queue("cq-dev", 0, cohort="ai")
    out = run(
        [train, infer, dev],
        [
            wl("team-b/victim", "cq-train", 4, priority=100, admitted=True, at=1),
            wl("team-a/first", "cq-train", 8, priority=1000, admitted=True, at=2),
            wl("team-infer/serve", "cq-infer", 4, priority=500, admitted=True, at=3),
            wl("team-a/high", "cq-train", 8, priority=1000, created=4),
            wl("team-dev/dev", "cq-dev", 2, priority=100, created=5),
        ],
    )
    assert admitted(out) == ["team-dev/dev", "team-a/high"]
    assert preempted(out) == {"team-b/victim": "InClusterQueue"}


# ----------------------------------------------------------------------------- cohort trees


def tree(**limits: Any) -> dict[str, Cohort]:
    """A root over two cohorts: ``lab`` (its limits toward the root: ``limits``) and
    ``research``."""
    quota = {("default", CPU): Quota(0, **limits)} if limits else {}
    return {"root": Cohort(), "lab": Cohort("root", quota), "research": Cohort("root")}


def test_a_queue_borrows_through_the_tree_within_its_cohorts_lending_limit() -> None:
    """COH: a queue of one cohort borrows what a sibling cohort's queues leave unused,
    through their common parent; the lending cohort's ``lendingLimit`` bounds what its
    subtree lends up (its ``nominal - lendingLimit`` stays its own)."""
    lab, res = queue("lab-cq", 8, cohort="lab"), queue("res-cq", 0, cohort="research")
    asks = [wl(f"r/{i}", "res-cq", 4, created=i) for i in range(3)]
    assert admitted(run([lab, res], asks, cohorts=tree())) == ["r/0", "r/1"]
    limited = run([lab, res], asks, cohorts=tree(lending_limit=4))
    assert admitted(limited) == ["r/0"]
    assert limited.waiting[0].why.endswith("needs 4 cpu on default, 0 free.")
    # Without the tree (each cohort on its own), nothing is lent across.
    assert admitted(run([lab, res], asks)) == []


def test_a_cohorts_borrowing_limit_and_own_quota_count_for_its_whole_subtree() -> None:
    """COH: a cohort's ``nominalQuota`` is extra quota its subtree's queues share; its
    ``borrowingLimit`` bounds what the subtree takes from its parent, whichever queue
    takes it."""
    lab = queue("lab-cq", 0, cohort="lab")
    other = queue("lab-cq-2", 0, cohort="lab")
    res = queue("res-cq", 8, cohort="research")
    cohorts = {
        "root": Cohort(),
        "lab": Cohort("root", {("default", CPU): Quota(2, borrowing_limit=4)}),
        "research": Cohort("root"),
    }
    asks = [wl("a/0", "lab-cq", 3, created=0), wl("b/0", "lab-cq-2", 4, created=1)]
    out = run([lab, other, res], [*asks, wl("b/1", "lab-cq-2", 3, created=2)], cohorts=cohorts)
    assert admitted(out) == ["a/0", "b/1"]  # 2 own + 4 from the root: 6 (the root has 10)
    assert [w.workload for w in out.waiting] == ["b/0"]


def test_a_change_reaches_the_whole_tree_on_its_flavors_only() -> None:
    """A change to one queue reaches the queues of its cohort tree that share its
    (flavor, resource), whatever cohort of the tree they are in; a queue of the tree on
    another flavor, and another tree, are left out."""
    lab, res = queue("lab-cq", 8, cohort="lab"), queue("res-cq", 0, cohort="research")
    elsewhere = Queue(
        "gpu-cq",
        (Group((CPU,), ("other",)),),
        {("other", CPU): Quota(Fraction(4))},
        cohort="research",
    )
    cohorts = {**tree(), "apart": Cohort()}
    far = queue("far-cq", 4, cohort="apart")
    current = World(
        (lab, res, elsewhere, far),
        (wl("r/0", "res-cq", 4), wl("g/0", "gpu-cq", 2), wl("f/0", "far-cq", 2)),
        cohorts=cohorts,
    )
    out = what_if(current, current.with_queue(queue("res-cq", 4, cohort="research")))
    assert out.scope == ("lab", "research")
    assert admitted(out) == ["r/0"]


# ----------------------------------------------------------------------------- reach and size


def test_only_the_changed_queues_cohort_is_simulated() -> None:
    """Queues of different cohorts share no quota: a change in one cohort leaves the others'
    workloads as they are, and the outcome says which cohort it simulated. With nothing
    changed, every queue is simulated."""
    a, b = queue("team-a-cq", 4, cohort="one"), queue("team-b-cq", 4, cohort="two")
    c, lone = queue("team-c-cq", 4, cohort="one"), queue("solo", 4, cohort="")
    waiting = [wl("a/six", "team-a-cq", 6), wl("b/two", "team-b-cq", 2), wl("s/one", "solo", 1)]
    current = World((a, b, c, lone), tuple(waiting))
    out = what_if(current, current.with_queue(queue("team-a-cq", 8, cohort="one")))
    assert out.scope == ("one",)
    assert admitted(out) == ["a/six"]
    assert [w.workload for w in out.waiting] == []
    assert {r.queue for r in out.borrowing} == {"team-c-cq"}  # may borrow 4, then 2
    alone = what_if(current, current.with_queue(queue("solo", 0, cohort="")))
    assert (alone.scope, admitted(alone), [w.workload for w in alone.waiting]) == (
        ("solo",),
        [],
        ["s/one"],
    )
    everything = what_if(current, current)
    assert everything.scope == ()
    assert sorted(admitted(everything)) == ["a/six", "b/two", "s/one"]


def test_gives_up_past_the_most_workloads_it_takes_on() -> None:
    """More workloads where the change reaches than ``most``: nothing is simulated, and the
    outcome says how many and where; the other cohorts' workloads do not count."""
    a, b = queue("team-a-cq", 4, cohort="one"), queue("team-b-cq", 4, cohort="two")
    crowd = [wl(f"b/{i}", "team-b-cq", 1, created=i) for i in range(5)]
    current = World((a, b), (wl("a/one", "team-a-cq", 1), wl("a/two", "team-a-cq", 1), *crowd))
    proposed = current.with_queue(queue("team-a-cq", 8, cohort="one"))
    assert admitted(what_if(current, proposed, most=2)) == ["a/one", "a/two"]
    out = what_if(current, proposed, most=1)
    assert (out.admitted, out.preempted, out.waiting, out.borrowing) == ((), (), (), ())
    assert out.gave_up.startswith("2 workloads are in one, more than the 1 ")


def test_fractions_of_a_unit_are_exact() -> None:
    """Quantities below one unit (500m cpu) are counted exactly: two of a quarter and one of
    half fill a nominal quota of one; what is left is said in the same units."""
    a, b = queue("team-a-cq", 1), queue("team-b-cq", 0)
    quarter, half = Fraction(1, 4), Fraction(1, 2)
    work = [
        Workload(f"a/{i}", "team-a-cq", {CPU: size}, created=i)
        for i, size in enumerate((quarter, quarter, half, quarter))
    ]
    out = run([a, b], work)
    assert admitted(out) == ["a/0", "a/1", "a/2"]
    assert out.waiting[0].why.endswith("needs 0.25 cpu on default, 0 free.")
    with_half = run([queue("team-a-cq", half), queue("team-b-cq", 1)], work)
    row = next(r for r in with_half.borrowing if r.queue == "team-a-cq")
    assert row.borrowed_after == Fraction(3, 4)
