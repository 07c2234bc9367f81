"""Property tests of the served OpenAPI schema (schemathesis): every operation, every check
(positive-data acceptance included) in every phase (examples, coverage, fuzzing, stateful)
as a platform admin, and in the fuzzing and stateful phases as a team lead too (``HALVES``
says why), against the portal served on the demo cluster. 0 server errors, 0 schema
violations.

The coverage phase sends every value on or inside each boundary the schema states (each
accepted, or refused as documented, and answered as the schema says); the values just
outside them (its negative cases, three in four of its cases and most of this test's time)
are the long run's, ``bench/fuzz.py``, while the fuzzing phase still sends every operation
invalid input each push (refused with a 4xx, never a 5xx).

The demo is freshly loaded, applied and polled; tasks the fuzz queues are never run (no
worker), so nothing reaches the cluster. ``tests/api/schemathesis.toml`` says
what the schema cannot (with reasons); ``bench/fuzz.py`` is the long run."""

from __future__ import annotations

import logging
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import redis
from django.contrib.auth.models import User

from portal.access.tokens import TokenRateThrottle, UserRateThrottle, create_token
from tests.api.fuzzing import fuzz

# A few cases per operation and phase find each class of contract gap this test was built
# on; the coverage phase adds its own (every boundary the schema states) whatever this is.
EXAMPLES = int(os.environ.get("QM_FUZZ_EXAMPLES", "3"))
ADMIN = ("admin",)
BOTH = ("admin", "lead-a")


@pytest.fixture
def served(
    portal_cluster: Any, live_server: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> Any:
    """The portal on the demo scenario and cluster, served over HTTP; the rate limit and the
    access log out of the way (the fuzz measures the contract); the broker emptied of what
    it queued."""
    monkeypatch.setattr(TokenRateThrottle, "THROTTLE_RATES", {"token": "100000000/minute"})
    monkeypatch.setattr(UserRateThrottle, "THROTTLE_RATES", {"user": "100000000/minute"})
    # Thousands of lines; errors still log. setLevel, not the attribute: the logger caches
    # what each level gives, and setting ``level`` alone kept every line (each kept again by
    # pytest's capture).
    access = logging.getLogger("quartermaster.access")
    level = access.level
    access.setLevel(logging.WARNING)
    yield live_server.url
    access.setLevel(level)
    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()


# The examples and coverage phases test each operation on its own, so they run in two
# shards (the reads, the writes) that other test processes take at once; the fuzzing and
# stateful phases take every operation in one run. (The stateful phase is meant to follow
# links from one operation to the next, but with a few cases it follows almost none: of the
# 327 links schemathesis infers, 0 were covered with 3 cases an operation and 1 with 20,
# since a drawn creation is nearly always refused (a team, cluster or node must exist). Its
# cases are the fuzzing phase's in effect; the line each run prints says how many it took.)
# The coverage phase (every valid boundary of every parameter the schema states) runs as
# the admin, who reaches every view: the portal checks
# input the same whoever sends it, and what a lead may not do is answered before the input
# is read (a 403 or 404, tested per route and user in tests/api and the permission matrix).
# The examples phase has no case of its own (the schema gives no examples), so the lead
# takes the fuzzing and stateful phases, where who asks matters: the lead meets there what
# the admin changes on the way.
HALVES = {
    "examples,coverage|reads": ("examples,coverage", ("--include-method", "GET"), 40, ADMIN),
    "examples,coverage|writes": ("examples,coverage", ("--exclude-method", "GET"), 24, ADMIN),
    "fuzzing,stateful": ("fuzzing,stateful", (), 50, BOTH),
}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("half", sorted(HALVES))
def test_every_operation_keeps_its_schema_as_an_admin_and_as_a_lead(served: str, half: str) -> None:
    """Every phase runs, in parts that together test every operation in every phase (the
    examples and coverage phases on the reads and on the writes as the admin, the fuzzing
    and stateful phases on all of them as the admin and a lead at once, as two clients of
    one portal would: the runs wait on the server, not on the cores): each part a test of
    its own, beside the others."""
    phases, operations, at_least, users = HALVES[half]
    tokens = {
        user: create_token(user=User.objects.get(username=user), name="fuzz")[1] for user in users
    }
    with ThreadPoolExecutor(max_workers=len(tokens)) as pool:
        runs = list(
            pool.map(
                lambda user: fuzz(
                    served,
                    tokens[user],
                    user=user,
                    max_examples=EXAMPLES,
                    seed=20261201,
                    phases=phases,
                    operations=operations,
                    unexpected_methods=user == "admin",
                    invalid_boundaries=False,
                ),
                tokens,
            )
        )
    for run in runs:
        print(run.line())
    for run in runs:
        assert run.operations > at_least, run.output
        assert (run.failures, run.errors, run.exit_code) == ([], [], 0), run.output
