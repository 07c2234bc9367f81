"""The real-control-plane tier: the portal's loop against a real kube-apiserver, scheduler,
controller-manager and Kueue (``kit.py``), as the least-privilege ServiceAccount of
``deploy/base/rbac.yaml`` with a ``kubectl create token`` credential. Without the kit every test
here is skipped with one line saying how to get it."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kube import Gateway, connect
from loop.apply import apply_desired_state
from loop.poll import poll_cluster
from tests.realcluster.kit import LOCK, ROOT, RealCluster, kit_folder, running
from tests.realcluster.player import Kubelet, MigManager, admin_api
from tests.support import HeldByAFolder

RBAC = ROOT / "deploy" / "base" / "rbac.yaml"
PORTAL_NAMESPACE = "quartermaster"
KIT = kit_folder()
SERIAL = LOCK.with_suffix(".test")


@contextlib.contextmanager
def _started() -> Iterator[tuple[RealCluster, str]]:
    """The real cluster (started, or shared with the process of this run that started it),
    and a token of the portal's ServiceAccount on it, bound to the ClusterRole it ships and
    nothing else (made once per start: a cluster started again has its own)."""
    assert KIT is not None
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid-{os.getpid()}"
    with running(KIT, ROOT / ".data" / "realcluster", run_id) as cluster:
        namespace = f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {PORTAL_NAMESPACE}\n"
        cluster.kube("apply", "-f", "-", stdin=namespace)
        cluster.kube("apply", "-n", PORTAL_NAMESPACE, "-f", str(RBAC))
        token = cluster.kube(
            "create", "token", "quartermaster", "-n", PORTAL_NAMESPACE, "--duration=2h"
        ).strip()
        yield cluster, token


# The real cluster while this process runs the tier's tests: joined by the first of them,
# left after the last instead of when the run ends, so that it does not idle (about 2.8
# CPU-seconds a minute) beside the rest of the suite. The tier is dealt to one process as
# one run (tests/conftest.py's ``_unit``), so it is joined once; a test of it that
# work-stealing hands over later joins again, starting it again if it was stopped.
_TIER = HeldByAFolder(Path(__file__).parent, _started)
pytest_runtest_teardown = _TIER.teardown_hook()
_tier = _TIER.session_fixture("_tier")


@pytest.fixture
def real_cluster(_tier: HeldByAFolder[tuple[RealCluster, str]]) -> RealCluster:
    return _tier.get()[0]


@pytest.fixture(autouse=True)
def _one_test_at_a_time(real_cluster: RealCluster) -> Iterator[None]:
    """The tier's tests share one cluster: when work-stealing hands some of them to another
    test process, they still run one after the other (each leaves the cluster as it found
    it)."""
    with SERIAL.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture
def portal_token(_tier: HeldByAFolder[tuple[RealCluster, str]]) -> str:
    return _tier.get()[1]


@pytest.fixture
def real_gateway(settings: Any, real_cluster: RealCluster, portal_token: str) -> Gateway:
    """The settings' cluster is the real one, reached as the portal's ServiceAccount."""
    settings.KUBE_URL = real_cluster.url
    settings.KUBE_TOKEN = portal_token
    settings.KUBE_CA_FILE = str(real_cluster.ca_file)
    settings.KUBE_VERIFY_TLS = True
    settings.QM_MIG_POLL_SECONDS = 0
    return connect(url=real_cluster.url, token=portal_token, ca_file=str(real_cluster.ca_file))


@pytest.fixture
def real_portal(demo: None, real_gateway: Gateway) -> Gateway:
    """The demo scenario applied to the real cluster and polled once."""
    report = apply_desired_state(gateway=real_gateway)
    assert not report.failed and not report.conflicts, report
    poll_cluster(gateway=real_gateway)
    return real_gateway


@pytest.fixture
def kubelet(real_cluster: RealCluster) -> Kubelet:
    return Kubelet(admin_api(real_cluster))


@pytest.fixture
def mig_manager(real_cluster: RealCluster) -> MigManager:
    return MigManager(admin_api(real_cluster))
