"""The real-control-plane tier: the portal's loop against a real kube-apiserver, scheduler,
controller-manager and Kueue (``kit.py``), as the least-privilege ServiceAccount of
``deploy/base/rbac.yaml`` with a ``kubectl create token`` credential. Without the kit every test
here is skipped with one line saying how to get it."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from typing import Any

import pytest

from kube import Gateway, connect
from loop.apply import apply_desired_state
from loop.poll import poll_cluster
from tests.realcluster.kit import LOCK, ROOT, RealCluster, kit_folder, running
from tests.realcluster.player import Kubelet, MigManager, admin_api

RBAC = ROOT / "deploy" / "base" / "rbac.yaml"
PORTAL_NAMESPACE = "quartermaster"
KIT = kit_folder()
SERIAL = LOCK.with_suffix(".test")


@pytest.fixture(scope="session")
def real_cluster() -> Iterator[RealCluster]:
    assert KIT is not None
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid-{os.getpid()}"
    with running(KIT, ROOT / ".data" / "realcluster", run_id) as cluster:
        yield cluster


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


@pytest.fixture(scope="session")
def portal_token(real_cluster: RealCluster) -> str:
    """A token of the portal's ServiceAccount, bound to the ClusterRole it ships and nothing else."""
    namespace = f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {PORTAL_NAMESPACE}\n"
    real_cluster.kube("apply", "-f", "-", stdin=namespace)
    real_cluster.kube("apply", "-n", PORTAL_NAMESPACE, "-f", str(RBAC))
    return real_cluster.kube(
        "create", "token", "quartermaster", "-n", PORTAL_NAMESPACE, "--duration=2h"
    ).strip()


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
