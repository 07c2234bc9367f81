"""A demo GPU cluster that speaks the Kubernetes REST API (see ``python -m devcluster -h``).

It imports nothing from the portal, and the portal imports nothing from it: the portal
talks to it over HTTP exactly as to a real API server.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from devcluster.cluster import Cluster
from devcluster.controllers import Controllers, Options
from devcluster.inference import load_inference
from devcluster.resources import Served
from devcluster.scenario import generate_fleet, load_seed
from devcluster.server import API, Server, serve

__all__ = ["API", "DemoCluster", "Options", "Served", "start"]


@dataclass
class DemoCluster:
    cluster: Cluster
    controllers: Controllers
    server: Server

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def api(self) -> API:
        return self.server.RequestHandlerClass.api  # type: ignore[attr-defined,no-any-return]

    def stop(self) -> None:
        self.controllers.stop()
        self.server.close()

    def settle(self, timeout: float = 10.0) -> None:
        """Wait until the controllers have caught up with every write so far: a pass of
        theirs began after this call and found nothing new to act on (what each write set
        off, and what that set off, is in the state). A client's LISTs then read one state,
        not a queue's status from before a workload that another LIST already shows.
        (Timers go on: a retry or a kubelet's delay may write later.)"""
        asked = self.controllers.ticks
        deadline = time.monotonic() + timeout
        while self.controllers.quiet_tick < asked:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the demo cluster did not settle within {timeout} s")
            time.sleep(self.controllers.options.tick / 2)

    def pause(self) -> None:
        """An outage: the API stops answering (state and controllers keep going)."""
        self.server.close()

    def resume(self) -> None:
        """Answer again on the same address, with the same state."""
        host, port = self.server.server_address[:2]
        self.server = serve(self.server.RequestHandlerClass.api, str(host), int(port))  # type: ignore[attr-defined]


def start(
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    scenario: str = "seed",
    nodes: int = 0,
    pods: int = 0,
    claims: int = 0,
    token: str = "",
    users: dict[str, tuple[str, Any]] | None = None,
    options: Options | None = None,
    continue_ttl: float = 300.0,
    served: Served | None = None,
    idle_notebook: bool = False,
) -> DemoCluster:
    """Start a demo cluster in this process (threads) and return it: ``scenario`` is
    ``seed`` (the training cluster of the seed's incident), ``inference`` or ``empty``;
    ``served`` leaves Kueue's versions or Volcano out of its API (default: all of them);
    ``idle_notebook``: the seed with team-dev's and team-a's idle notebooks too (the run
    command's)."""
    cluster = Cluster(continue_ttl=continue_ttl)
    controllers = Controllers(cluster, options or Options())
    controllers.install()
    if scenario == "seed":
        load_seed(cluster, controllers, idle_notebook=idle_notebook)
    elif scenario == "inference":
        load_inference(cluster, controllers)
    if nodes:
        generate_fleet(cluster, controllers, nodes=nodes, pods=pods, claims=claims)
    api = API(cluster, controllers, token=token, users=users, served=served)
    server = serve(api, host, port)
    controllers.start()
    return DemoCluster(cluster, controllers, server)
