"""Benchmark: the estimated wait of every waiting workload, at the scale scenario and in one
long line.

    python bench/estimate.py [--waiting 2000] [--running 500] [--runs 200] [--repeat 5]

1. The scale scenario (``bench/scale.py``): all 25,000 waiting workloads of its 1,000
   ClusterQueues estimated, as the poll does (``diagnostics.explainer``): one line per
   queue (its admitted workloads with how long they have run, its waiting ones in order,
   its quota and what its cohort could lend), 100 finished run times per queue and per
   namespace. Goal: under 1 s.
2. One ClusterQueue as plain facts: 500 admitted workloads of 1-8 GPUs that have run up to
   three hours, 2,000 waiting of 1-8 GPUs, 200 finished run times. Goal: under 0.5 s.

Each line is played out once per quantile (the first MAX_LINE places); each estimate reads
its place. Last line: ``estimate_s=… line_s=…`` (medians of ``--repeat`` runs, each printed).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import scale
from smoke import parse

from diagnostics.estimate import Estimate, Line, Running, Runs, estimate_workload

GPU = "nvidia.com/gpu"


def build(waiting: int, running: int, runs: int) -> tuple[Line, list[Runs]]:
    draw = random.Random(19)
    line = Line(
        cluster_queue="cq-train",
        capacity={GPU: float(running * 4)},
        running=[
            Running({GPU: draw.randint(1, 8)}, draw.uniform(0, 3 * 3600)) for _ in range(running)
        ],
        waiting=[{GPU: draw.randint(1, 8)} for _ in range(waiting)],
    )
    history = [Runs([draw.uniform(20, 240) * 60 for _ in range(runs)], "cq-train")]
    return line, history


def scale_lines(s: scale.Scenario) -> tuple[dict[str, Line], dict[str, list[Runs]]]:
    """Per ClusterQueue of the scenario: its line (what the poll builds from the observed
    rows) and its histories (the queue's run times, then each namespace's)."""
    draw = random.Random(23)
    admitted: dict[str, list[Running]] = {q.name: [] for q in s.cluster_queues}
    waiting: dict[str, list[dict[str, int]]] = {q.name: [] for q in s.cluster_queues}
    for w in s.workloads:
        if w.flavor:
            elapsed = draw.uniform(0, 3 * 3600)
            admitted[w.cluster_queue].append(Running({w.resource: w.amount}, elapsed))
        else:
            waiting[w.cluster_queue].append({w.resource: w.amount})
    lines, histories = {}, {}
    for q in s.cluster_queues:
        lines[q.name] = Line(
            cluster_queue=q.name,
            capacity={q.resource: float(2 * q.nominal)},
            most={q.resource: float(2 * q.nominal * 2)},
            running=admitted[q.name],
            waiting=waiting[q.name],
        )
        histories[q.name] = [Runs([draw.uniform(20, 240) * 60 for _ in range(100)], q.name)]
    return lines, histories


def estimate_scale(s: scale.Scenario) -> tuple[list[Estimate], float]:
    """Every waiting workload of the scenario estimated (fresh lines: unplayed), and the
    seconds it took."""
    lines, histories = scale_lines(s)
    by_namespace = Runs([1800.0 * (1 + i % 8) for i in range(100)], "namespace")
    places: dict[str, int] = {}
    started = time.perf_counter()
    estimates = []
    for w in s.workloads:
        if w.flavor:
            continue
        place = places[w.cluster_queue] = places.get(w.cluster_queue, -1) + 1
        estimates.append(
            estimate_workload(
                requests={w.resource: w.amount},
                line=lines[w.cluster_queue],
                place=place,
                histories=[*histories[w.cluster_queue], by_namespace],
            )
        )
    return estimates, time.perf_counter() - started


def estimate_line(waiting: int, running: int, runs: int) -> tuple[list[Estimate], float]:
    line, history = build(waiting, running, runs)  # a fresh line: unplayed
    started = time.perf_counter()
    estimates = [
        estimate_workload(requests=wanted, line=line, place=i, histories=history)
        for i, wanted in enumerate(line.waiting)
    ]
    return estimates, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--waiting", type=int, default=2000)
    parser.add_argument("--running", type=int, default=500)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    args = parse(parser, {"waiting": 60, "running": 20, "runs": 20, "repeat": 1})
    big = scale.build(scale.SMOKE if args.smoke else scale.FULL)
    figures = {}
    for name, run in (
        ("estimate_s", lambda: estimate_scale(big)),
        ("line_s", lambda: estimate_line(args.waiting, args.running, args.runs)),
    ):
        times, cpu = [], []
        for _ in range(args.repeat):
            started = time.process_time()
            estimates, seconds = run()
            cpu.append(time.process_time() - started)  # on a shared machine: alone
            times.append(seconds)
        known = sum(1 for e in estimates if e.known)
        example = estimates[min(150, len(estimates) - 1)].text
        print(
            f"{name}: {len(estimates)} waiting, {known} with a range; e.g. {example}; "
            f"runs {', '.join(f'{t:.3f}' for t in times)} s "
            f"(CPU {', '.join(f'{t:.3f}' for t in cpu)} s, the line built first included)"
        )
        figures[name] = statistics.median(times)
    print(" ".join(f"{k}={v:.3f}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
