"""When could it start? A range with its basis for a waiting Kueue workload or a Pending pod,
or "no estimate" with why. Pure functions: the selector passes the facts in.

The model is simple on purpose, and the basis sentence says what it rests on:

- A ClusterQueue admits in line order (its place from Kueue's visibility API, else by
  priority and age): under StrictFIFO the head waits until it fits, under BestEffortFIFO
  whatever fits goes. It admits from its quota: nominal plus what it could borrow from its
  cohort now.
- A workload it admitted ends after its typical run: the run times of the queue's finished
  workloads (the team's namespace's when the queue has too few), given how long it has run
  already (only the runs longer than that count). A workload admitted later runs a typical
  run too.
- Run once with every run at the quick end (the 25th percentile) and once at the slow end
  (the 75th): the range lies between. Fewer than ``MIN_SAMPLES`` finished runs give no
  estimate, and nothing is said more precisely than it is known (5-minute steps under 90
  minutes, whole hours under 36 hours, whole days beyond; a range that rounds to one value
  is "about" it).
- A stopped queue, a workload that can never fit (the explainer says why), a pod outside
  Kueue (the portal keeps run times of Kueue workloads only) get "no estimate" and the why;
  an approved capacity change not done yet (a MIG change that adds the profile, or raises
  the queue's quota) is named: "after MIG change #12".
"""

from __future__ import annotations

import bisect
import datetime as dt
import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

MIN_SAMPLES = 5  # finished runs needed before their spread means anything
QUICK, SLOW = 0.25, 0.75  # the quantiles of the range's two ends
NO_ESTIMATE = "no estimate"
DASH = "\u2013"  # an en dash: "2-3 h" reads as a range
SLOT = 300  # seconds: the finest unit a wait is told in
MAX_LINE = 200  # places in line played out: further back, the runs' spread says nothing


@dataclass(frozen=True)
class Estimate:
    """From now until it could start, in seconds: ``low_s`` to ``high_s`` (``high_s`` None
    with ``low_s`` set: not before ``low_s``, after a change whose length nobody knows), or
    neither with ``summary`` "no estimate"; ``basis`` says what the range rests on, or why
    there is none."""

    summary: str
    basis: str
    low_s: int | None = None
    high_s: int | None = None
    earliest: dt.datetime | None = None  # now + low_s, to 5 minutes (see ``dated``)
    latest: dt.datetime | None = None

    @property
    def known(self) -> bool:
        return self.low_s is not None

    @property
    def far(self) -> bool:
        """Far enough off that the time it could start says more than "now"."""
        return max(self.low_s or 0, self.high_s or 0) >= SLOT

    @property
    def text(self) -> str:
        return f"{self.summary}: {self.basis}"


@dataclass(frozen=True)
class Runs:
    """Run times in seconds (admitted to finished) of finished workloads, and whose."""

    seconds: Sequence[float]
    source: str  # "cq-train", "namespace team-a"

    @cached_property
    def ordered(self) -> list[float]:
        """The run times sorted (once: a history serves every workload of its queue)."""
        return sorted(self.seconds)


@dataclass(frozen=True)
class Running:
    """A workload the queue admitted and that still holds its quota."""

    requests: Mapping[str, int]
    elapsed_s: float


@dataclass(frozen=True)
class QueueChange:
    """An approved MIG change, not done yet, that raises a ClusterQueue's quota."""

    request_id: int
    nodes: Sequence[str]
    adds: Mapping[str, float]  # resource -> quota added
    starts_in_s: int | None = None  # its window opens then; None: when it runs
    running: bool = False


@dataclass(frozen=True)
class NodeChange:
    """An approved MIG change, not done yet, and what one of its nodes offers after it."""

    request_id: int
    node: str
    config: str
    offers: Mapping[str, int]
    starts_in_s: int | None = None
    running: bool = False


@dataclass(frozen=True)
class Line:
    """A ClusterQueue as the estimate needs it: one for every workload waiting in it (the
    line is played out once per history and quantile, whoever asks)."""

    cluster_queue: str
    capacity: Mapping[str, float]  # resource -> nominal quota plus what it could borrow now
    running: Sequence[Running] = ()
    most: Mapping[str, float] | None = None  # borrowing all its cohort may lend (None: capacity)
    waiting: Sequence[Mapping[str, int]] = ()  # the requests of every one in line, in order
    strict: bool = False  # StrictFIFO
    stopped: str = ""  # "ClusterQueue cq-x is stopped (Hold)"
    changes: Sequence[QueueChange] = field(default_factory=tuple)
    played: dict[tuple[str, float], list[float | None]] = field(
        default_factory=dict, compare=False, repr=False
    )  # (history, quantile) -> when each one in line starts


def dated(estimate: Estimate, now: dt.datetime) -> Estimate:
    """The estimate with the moments it could start between, the earliest rounded down and
    the latest up to 5 minutes (a moment no more precise than the range)."""

    def at(seconds: int | None, up: bool) -> dt.datetime | None:
        if seconds is None:
            return None
        moment = now + dt.timedelta(seconds=seconds)
        slots = moment.timestamp() / SLOT
        rounded = (math.ceil(slots) if up else math.floor(slots)) * SLOT
        return dt.datetime.fromtimestamp(rounded, tz=moment.tzinfo)

    return replace(estimate, earliest=at(estimate.low_s, False), latest=at(estimate.high_s, True))


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile by linear interpolation between the closest ranks."""
    return _ranked(sorted(values), q)


def _ranked(ordered: Sequence[float], q: float, first: int = 0, minus: float = 0.0) -> float:
    """:func:`quantile` of ``ordered[first:]`` (sorted), each less ``minus``, without
    copying them."""
    at = (len(ordered) - first - 1) * q
    below, above = math.floor(at), math.ceil(at)
    low, high = ordered[first + below] - minus, ordered[first + above] - minus
    return low + (high - low) * (at - below)


def _step(seconds: float) -> int:
    """The unit a duration is told in: 5 minutes under 90 minutes, then hours, then days."""
    if seconds < 90 * 60:
        return 300
    if seconds < 36 * 3600:
        return 3600
    return 86400


def _unit(seconds: int, step: int) -> str:
    if step == 300:
        return f"{seconds // 60} min"
    if step == 3600:
        return f"{seconds // 3600} h"
    days = seconds // 86400
    return f"{days} day{'s' if days != 1 else ''}"


def between(low: float, high: float) -> str:
    """``low`` to ``high`` seconds as words, each end rounded to its unit (5 minutes, an hour,
    a day): "50-80 min", "2-3 h", "40 min-2 h", "under 5 min", "about 2 h" (an en dash)."""
    high_step = _step(high)
    top = max(high_step, round(high / high_step) * high_step)
    low_step = high_step if low >= high_step else _step(low)  # "1-2 h", not "65 min-2 h"
    bottom = round(low / low_step) * low_step
    if bottom <= 0:
        return f"under {_unit(top, high_step)}"
    if low_step == high_step:
        if bottom >= top:
            return f"about {_unit(top, high_step)}"
        return f"{_unit(bottom, low_step).split(' ')[0]}{DASH}{_unit(top, high_step)}"
    return f"{_unit(bottom, low_step)}{DASH}{_unit(top, high_step)}"


def _about(words: str) -> str:
    return words if words.startswith(("under", "about")) else f"about {words}"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _remaining(ordered: Sequence[float], elapsed: float, q: float) -> float:
    """What is left of a run that has lasted ``elapsed``: the quantile of the runs
    (``ordered``: sorted) that lasted longer; one that outlasted nearly all of them may end
    now or run a median run more (the quick and the slow end)."""
    first = bisect.bisect_right(ordered, elapsed)
    if len(ordered) - first >= MIN_SAMPLES:
        return _ranked(ordered, q, first, elapsed)
    return 0.0 if q <= 0.5 else _ranked(ordered, 0.5)


def _fits(requests: Mapping[str, float], free: Mapping[str, float]) -> bool:
    # A loop, not all(): it runs for each in line at each step, and a generator costs twice.
    for r, n in requests.items():  # noqa: SIM110
        if free.get(r, 0) < n:
            return False
    return True


def _charged(requests: Mapping[str, int], capacity: Mapping[str, float]) -> dict[str, float]:
    """What the queue counts of a workload's requests (the resources it has quota for)."""
    return {r: float(n) for r, n in requests.items() if n > 0 and r in capacity}


def start_times(line: Line, runs: Runs, q: float) -> list[float | None]:
    """Seconds until each of the first ``MAX_LINE`` in line is admitted, every run at the
    ``q`` quantile of ``runs``: workloads end, their quota comes back, the line moves (in
    order; past what does not fit unless StrictFIFO). None for one that never fits (it
    holds no one up). Played once per line, history and quantile."""
    key = (runs.source, q)
    if key not in line.played:
        line.played[key] = _play(line, runs.ordered, q)
    return line.played[key]


def _play(line: Line, runs: Sequence[float], q: float) -> list[float | None]:
    """:func:`start_times` (``runs``: sorted)."""
    typical = _ranked(runs, q)
    free = dict(line.capacity)
    ends: list[tuple[float, int, dict[str, float]]] = []
    for index, held in enumerate(line.running):
        charged = _charged(held.requests, line.capacity)
        for r, n in charged.items():
            free[r] -= n
        ends.append((_remaining(runs, held.elapsed_s, q), -1 - index, charged))
    heapq.heapify(ends)
    starts: list[float | None] = [None] * min(len(line.waiting), MAX_LINE)
    pending = [
        (i, item)
        for i, item in enumerate(_charged(w, line.capacity) for w in line.waiting[:MAX_LINE])
        if _fits(item, line.capacity if line.most is None else line.most)  # never: no one's wait
    ]
    now = 0.0
    while pending:
        still: list[tuple[int, dict[str, float]]] = []
        for i, item in pending:
            if (still and line.strict) or not _fits(item, free):
                still.append((i, item))
                continue
            starts[i] = now
            for r, n in item.items():
                free[r] -= n
            heapq.heappush(ends, (now + typical, i, item))
        pending = still
        if not pending or not ends:  # everything ends in the end: ``ends`` runs out last
            break
        now, _, item = heapq.heappop(ends)
        for r, n in item.items():
            free[r] += n
    return starts


def _history(histories: Sequence[Runs]) -> Runs | Estimate:
    """The first history with enough runs, or the "no estimate" that says what is missing."""
    for runs in histories:
        if len(runs.seconds) >= MIN_SAMPLES:
            return runs
    if not any(r.seconds for r in histories):
        where = " or ".join(r.source for r in histories) or "its queue"
        return Estimate(
            NO_ESTIMATE, f"no workload of {where} has finished yet to learn run times from"
        )
    counts = ", ".join(f"{len(r.seconds)} in {r.source}" for r in histories)
    return Estimate(
        NO_ESTIMATE,
        f"too few finished workloads to go by ({counts}; {MIN_SAMPLES} needed)",
    )


def _when(starts_in_s: int | None, running: bool) -> str:
    if running:
        return ", running now"
    if starts_in_s and starts_in_s > 0:
        return f", due to start in {_about(between(starts_in_s, starts_in_s))}"
    return ""


def _after_queue_change(line: Line, need: Mapping[str, float]) -> Estimate | None:
    """The approved change that raises the queue's quota enough for ``need``, if any."""
    most = line.capacity if line.most is None else line.most
    for change in line.changes:
        after = {r: most.get(r, 0) + change.adds.get(r, 0) for r in most}
        if _fits(need, after):
            nodes = ", ".join(change.nodes)
            added = ", ".join(f"{n:g} {r}" for r, n in sorted(change.adds.items()) if n > 0)
            return Estimate(
                f"after MIG change #{change.request_id}",
                f"{line.cluster_queue} cannot hold it now; the approved change on {nodes} "
                f"adds {added} to its quota{_when(change.starts_in_s, change.running)}",
                low_s=max(0, change.starts_in_s or 0),
            )
    return None


def estimate_workload(
    *,
    requests: Mapping[str, int],
    line: Line | None,
    place: int | None = 0,
    exact: bool = True,
    histories: Sequence[Runs],
    never: str = "",
    held: str = "",
    requeue_in_s: int | None = None,
    short_now: bool = False,
) -> Estimate:
    """A Kueue workload not admitted: when it could be, from its ``place`` in ``line``
    (0-based, None when the line does not hold it; ``exact`` when it is Kueue's, from its
    visibility API) and the run times of
    ``histories`` (its queue's first, then its team's); ``never`` is the explainer's reason
    it can never start as it is (empty: waiting may do), ``held`` what stops its LocalQueue;
    ``short_now``: Kueue says its queue lacks unused quota for it now, so "now" is never
    the answer (the estimate agrees with the cause)."""
    stopped = held or (line.stopped if line is not None else "")
    if stopped:
        return Estimate(
            NO_ESTIMATE, f"{stopped}: it admits nothing until a platform admin lets it run again"
        )
    if line is None:
        return Estimate(NO_ESTIMATE, "its queue has no ClusterQueue the portal knows")
    need = _charged(requests, line.capacity)
    most = line.capacity if line.most is None else line.most
    if not _fits(need, most):
        return _after_queue_change(line, need) or Estimate(
            NO_ESTIMATE, never or _too_big(line, need, most)
        )
    if never:
        return Estimate(NO_ESTIMATE, never)
    if place is None:
        return Estimate(NO_ESTIMATE, "it was not in its queue's line at the last poll")
    if place >= MAX_LINE:
        return Estimate(
            NO_ESTIMATE,
            f"it is {_ordinal(place + 1)} in line: too far back for run times to say when",
        )
    runs = _history(histories)
    if isinstance(runs, Estimate):
        return runs
    quick, slow = start_times(line, runs, QUICK)[place], start_times(line, runs, SLOW)[place]
    if quick is None or slow is None:
        return Estimate(
            NO_ESTIMATE,
            f"it waits for quota the other queues of {line.cluster_queue}'s cohort use now "
            "(to lend it, or to the workload ahead that needs it), and their run times do not "
            "tell when they free it",
        )
    back = float(requeue_in_s or 0)
    low, high = max(quick, back), max(slow, back)
    if short_now and high < 60:
        return Estimate(
            NO_ESTIMATE,
            f"Kueue finds too little unused quota for it in {line.cluster_queue} now, though "
            "the portal's count of its cohort leaves room: it starts when running work frees "
            "quota, and the run times do not tell which",
        )
    summary = "now, once Kueue looks at it" if high < 60 else _about(between(low, high))
    return Estimate(
        summary, _basis(line, place, exact, runs, low), low_s=int(low), high_s=int(high)
    )


def _too_big(line: Line, need: Mapping[str, float], limit: Mapping[str, float]) -> str:
    over = [r for r, n in sorted(need.items()) if n > limit.get(r, 0)]
    parts = ", ".join(f"{need[r]:g} {r}" for r in over)
    most = ", ".join(f"{limit.get(r, 0):g}" for r in over)
    return (
        f"it can never fit because it asks for {parts} and {line.cluster_queue} can hold at "
        f"most {most}, borrowing included"
    )


def _count(n: int) -> str:
    return {1: "one", 2: "two", 3: "three"}.get(n, str(n))


def _basis(line: Line, ahead: int, exact: bool, runs: Runs, low: float) -> str:
    """What the range rests on: "3rd in line; the two ahead usually run 50-80 min (24
    finished in cq-train)"."""
    place = (
        f"{'first' if ahead == 0 else _ordinal(ahead + 1)} in line"
        if exact
        else f"about {_ordinal(ahead + 1)} in line by priority and age"
    )
    mentioned = [(ahead, "ahead")]
    if low > 0 or not ahead:
        mentioned.append((len(line.running), "running"))
    who = [(n, f"the {_count(n)} {what}") for n, what in mentioned if n]
    typical = between(_ranked(runs.ordered, QUICK), _ranked(runs.ordered, SLOW))
    subject = " and ".join(words for _, words in who) or f"the workloads of {runs.source}"
    verb = "runs" if len(who) == 1 and who[0][0] == 1 else "run"
    basis = (
        f"{place}; {subject} usually {verb} {typical} "
        f"({len(runs.seconds)} finished in {runs.source})"
    )
    if line.changes:
        change = line.changes[0]
        basis += (
            f"; approved MIG change #{change.request_id} raises its quota and may start it sooner"
        )
    return basis


def estimate_pod(
    *,
    wanted: Mapping[str, int],
    never: str = "",
    topic: str = "",
    changes: Sequence[NodeChange] = (),
    gang: bool = False,
    admitted_workload: str = "",
) -> Estimate:
    """A Pending pod outside a waiting workload: the scheduler places it when a node has
    room, and the portal keeps no run times of what holds the nodes. What it can say: an
    approved MIG change that puts a node on a layout offering all the pod asks for ("after
    MIG change #12"), or why there is no estimate."""
    gpu = {r: n for r, n in wanted.items() if n > 0 and r.startswith("nvidia.com/")}
    if gpu and topic in ("mig-mismatch", "insufficient-gpu"):
        for change in changes:
            if all(change.offers.get(r, 0) >= n for r, n in gpu.items()):
                return Estimate(
                    f"after MIG change #{change.request_id}",
                    f"the approved change puts {change.node} on {change.config}, which offers "
                    f"what it asks for{_when(change.starts_in_s, change.running)}",
                    low_s=max(0, change.starts_in_s or 0),
                )
    if never:
        return Estimate(NO_ESTIMATE, never)
    if gang:
        return Estimate(NO_ESTIMATE, "the portal keeps no run times of Volcano gangs")
    if admitted_workload:
        return Estimate(
            NO_ESTIMATE,
            f"Kueue admitted its workload {admitted_workload}; the nodes hold it, and the "
            "portal keeps no run times of what runs on them",
        )
    return Estimate(
        NO_ESTIMATE,
        "it waits for room on the nodes outside any Kueue queue, and the portal keeps run "
        "times of Kueue workloads only",
    )


def estimate_refused(*, never: str = "") -> Estimate:
    """A controller whose pods the API server refuses (a namespace quota): they are created
    once the quota has room, and the portal keeps no run times of what holds it."""
    return Estimate(
        NO_ESTIMATE,
        never
        or "its pods are created when the namespace's quota has room, and the portal keeps "
        "run times of Kueue workloads only",
    )
