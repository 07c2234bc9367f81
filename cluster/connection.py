"""The connection to the cluster, built from settings (one gateway per process)."""

from __future__ import annotations

import functools

from django.conf import settings

from kube import Gateway, PermanentKubeError, connect


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


def interactive_gateway() -> Gateway:
    """The gateway for a read a person waits on: ten seconds at most, then an error to show."""
    return get_gateway().bounded(connect=3.0, read=10.0)


def check_kubernetes() -> str:
    """What /readyz reports of the Kubernetes API (reported, never failing readiness): what
    the last polls found, read from PostgreSQL; readiness never waits on the API server."""
    from cluster.selectors import api_status  # lazy: models load after settings

    if not cluster_configured():
        return "not configured"
    status = api_status()
    if status.state == "unreachable" and status.since is not None:
        raise RuntimeError(
            f"unreachable since {status.since:%Y-%m-%d %H:%M:%S} UTC: {status.message}"
        )
    if status.state != "ok":
        raise RuntimeError(status.message)
    return f"ok ({status.message})"
