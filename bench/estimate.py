"""Benchmark: the estimated wait of every workload in one long line.

    python bench/estimate.py [--waiting 2000] [--running 500] [--runs 200]

Builds a ClusterQueue as plain facts (no database): 500 admitted workloads of 1-8 GPUs that
have run up to three hours, 2,000 waiting of 1-8 GPUs (a team's page shows them all), and
200 finished run times; then estimates every waiting one, as the home page and
/api/v1/waiting/ do. The line is played out once per quantile (the first MAX_LINE places);
each estimate reads its place. Last line: ``estimate_s=…`` (best of 5). Goal: under 0.5 s.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from smoke import parse

from diagnostics.estimate import Line, Running, Runs, estimate_workload

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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--waiting", type=int, default=2000)
    parser.add_argument("--running", type=int, default=500)
    parser.add_argument("--runs", type=int, default=200)
    args = parse(parser, {"waiting": 60, "running": 20, "runs": 20})
    best = float("inf")
    for _ in range(5):
        line, history = build(args.waiting, args.running, args.runs)  # a fresh line: unplayed
        started = time.perf_counter()
        estimates = [
            estimate_workload(requests=wanted, line=line, place=i, histories=history)
            for i, wanted in enumerate(line.waiting)
        ]
        best = min(best, time.perf_counter() - started)
    known = sum(1 for e in estimates if e.known)
    example = estimates[min(150, len(estimates) - 1)].text
    print(f"{len(estimates)} waiting, {known} with a range; e.g. {example}")
    print(f"estimate_s={best:.3f}")


if __name__ == "__main__":
    main()
