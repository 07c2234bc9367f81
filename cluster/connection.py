"""The connection to a cluster: the one the settings name (one gateway per process), or a
registered :class:`~cluster.models.Cluster` row (its credential decrypted only here); and
the read-only "test connection" (what the portal may do there against what it needs)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml
from django.conf import settings
from django.db import connection as db

from cluster import credentials, kubeconfig
from cluster.discovery import RuleCheck, compare_rules
from kube import Gateway, KubeError, PermanentKubeError, connect
from portal.infra import readiness as health

if TYPE_CHECKING:
    from cluster.models import Cluster
    from cluster.selectors import ClusterStatus

# What the portal needs in a cluster: the ClusterRole it ships (deploy/base/rbac.yaml).
NEEDED_RULES = settings.BASE_DIR / "deploy" / "base" / "rbac.yaml"
# The namespace a rules review asks about: cluster-wide grants show in any namespace.
REVIEW_NAMESPACE = "default"


def cluster_configured() -> bool:
    return bool(settings.KUBE_URL or settings.KUBECONFIG or settings.KUBE_IN_CLUSTER)


@functools.cache
def _gateway(
    url: str,
    token: str,
    kubeconfig: str,
    context: str,
    in_cluster: bool,
    verify: bool,
    ca_file: str,
    manager: str,
) -> Gateway:
    return connect(
        url=url,
        token=token,
        kubeconfig=kubeconfig,
        context=context,
        in_cluster=in_cluster,
        verify_tls=verify,
        ca_file=ca_file,
        field_manager=manager,
    )


def get_gateway() -> Gateway:
    """The gateway for the configured cluster; PermanentKubeError when none is configured."""
    if not cluster_configured():
        raise PermanentKubeError(
            "No Kubernetes cluster is configured: set KUBE_URL, KUBECONFIG or KUBE_IN_CLUSTER."
        )
    return _gateway(
        settings.KUBE_URL,
        settings.KUBE_TOKEN,
        settings.KUBECONFIG,
        settings.KUBE_CONTEXT,
        settings.KUBE_IN_CLUSTER,
        settings.KUBE_VERIFY_TLS,
        settings.KUBE_CA_FILE,
        settings.QM_FIELD_MANAGER,
    )


def gateway_for(cluster: Cluster) -> Gateway:
    """The gateway to ``cluster`` as its row says; the settings' cluster gets the settings'
    gateway (so the loop of a single-cluster installation is exactly what it was)."""
    kind = cluster.connection
    if kind == "settings":
        return get_gateway()
    secret = credentials.decrypt(cluster.credential, cluster=cluster.name)
    return _cluster_gateway(
        kind,
        cluster.api_url,
        secret,
        cluster.kubeconfig_context,
        cluster.verify_tls,
        cluster.ca_certificate,
        settings.QM_FIELD_MANAGER,
    )


@functools.lru_cache(maxsize=32)
def _cluster_gateway(
    kind: str, url: str, secret: str, context: str, verify: bool, ca: str, manager: str
) -> Gateway:
    # The key holds the secret: a rotated token or an edited row is a new gateway.
    if kind == "in_cluster":
        return connect(in_cluster=True, field_manager=manager)
    if kind == "kubeconfig":
        if not secret:
            return connect(kubeconfig=settings.KUBECONFIG, context=context, field_manager=manager)
        data, unusable = kubeconfig.parse(secret)
        if data is None:
            raise PermanentKubeError(f"the stored kubeconfig cannot be used: {unusable}")
        # Checked again at every use: a kubeconfig stored before the rule never runs either.
        refused = kubeconfig.refusals(data, allowed_exec=settings.QM_KUBECONFIG_EXEC_ALLOWED)
        if refused:
            raise PermanentKubeError("the stored kubeconfig is refused: " + " ".join(refused))
        return connect(kubeconfig_data=data, context=context, field_manager=manager)
    return connect(url=url, token=secret, verify_tls=verify, ca_data=ca, field_manager=manager)


@dataclass(frozen=True)
class ConnectionTest:
    """What a read-only test of a cluster's connection found."""

    ok: bool
    error: str = ""
    version: str = ""
    checks: list[RuleCheck] = field(default_factory=list)
    incomplete: bool = False
    evaluation_error: str = ""

    @property
    def missing(self) -> list[RuleCheck]:
        return [check for check in self.checks if not check.allowed]


def needed_rules() -> list[dict[str, Any]]:
    """The ClusterRole's rules the portal ships (what it needs in every cluster)."""
    for doc in yaml.safe_load_all(NEEDED_RULES.read_text()):
        if doc and doc.get("kind") == "ClusterRole":
            return list(doc.get("rules") or [])
    return []


def check_connection(cluster: Cluster) -> ConnectionTest:
    """Ask the cluster who the portal is there (read-only: ``/version`` and a
    SelfSubjectRulesReview) and compare with :func:`needed_rules`; ten seconds at most."""
    try:
        gateway = gateway_for(cluster).bounded(connect=3.0, read=10.0)
        version = gateway.version()
        review = gateway.rules_review(REVIEW_NAMESPACE)
    except KubeError as exc:
        return ConnectionTest(ok=False, error=exc.message)
    except credentials.CredentialKeyError as exc:
        return ConnectionTest(ok=False, error=str(exc))
    return ConnectionTest(
        ok=True,
        version=str(version.get("gitVersion") or ""),
        checks=compare_rules(needed_rules(), review),
        incomplete=bool(review.get("incomplete")),
        evaluation_error=str(review.get("evaluationError") or ""),
    )


def interactive_gateway() -> Gateway:
    """The gateway for a read a person waits on: ten seconds at most, then an error to show."""
    return get_gateway().bounded(connect=3.0, read=10.0)


def probed(gateway: Gateway) -> Gateway:
    """``gateway`` once its API server answered ``/version`` within QM_API_PROBE_SECONDS (a
    RetryableKubeError in seconds when it does not: a hung server never holds a worker for
    the longer timeouts of the lists and applies)."""
    probe = settings.QM_API_PROBE_SECONDS
    gateway.bounded(connect=probe, read=probe).version()
    return gateway


def check_kubernetes() -> str | health.Report:
    """What /readyz reports of each cluster's Kubernetes API (reported, never failing
    readiness): what its last polls found, read from PostgreSQL; readiness never waits on an
    API server. One cluster: its words; several: each under ``clusters``, by name."""
    from cluster.selectors import cluster_statuses  # lazy: models load after settings

    try:
        statuses = [
            status
            for status in cluster_statuses()
            if cluster_configured() or status.cluster.connection != "settings"
        ]
    finally:
        db.close()  # the check runs in a pool thread: its connection ends with it
    if not statuses:
        return "not configured"
    said = {status.cluster.name: _said(status) for status in statuses}
    failing = [status for status in statuses if not status.ok]
    detail: dict[str, object] = {
        "clusters": {
            s.cluster.name: {
                "ok": s.ok,
                "state": s.state,
                "since": s.since,
                "last_ok_at": s.last_ok_at,
                "status": said[s.cluster.name],
            }
            for s in statuses
        }
    }
    if len(statuses) == 1:
        words = said[statuses[0].cluster.name]
        text = words if failing else f"ok ({words})"
    else:
        text = "; ".join(f"{s.cluster.name}: {said[s.cluster.name]}" for s in failing)
        text = text or f"ok ({len(statuses)} clusters)"
    return health.Report(ok=not failing, status=text, detail=detail)


def _said(status: ClusterStatus) -> str:
    if status.state == "unreachable" and status.since is not None:
        return f"unreachable since {status.since:%Y-%m-%d %H:%M:%S} UTC: {status.message}"
    return status.message
