"""Integration fixtures: a demo cluster on a free loopback port, and the gateway to it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import devcluster
from devcluster.controllers import Options
from kube import Gateway, connect


@pytest.fixture
def cluster() -> Iterator[devcluster.DemoCluster]:
    demo = devcluster.start(
        options=Options(
            mig_delay_seconds=0.3,
            retry_seconds=0.5,
            kubelet_start_seconds=0.1,
            kubelet_stop_seconds=0.2,
            tick=0.05,
        )
    )
    yield demo
    demo.stop()


@pytest.fixture
def gateway(cluster: devcluster.DemoCluster) -> Gateway:
    return connect(url=cluster.url, token="any")
