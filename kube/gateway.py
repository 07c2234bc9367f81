"""Gateway: server-side apply, paginated LIST decoded straight from JSON, patches, eviction.

Requests go through the official client's HTTP layer (configuration, TLS, auth) but skip
its model classes: large lists are decoded with orjson into plain dicts, which is several
times faster than building typed objects for thousands of nodes and pods.
"""

from __future__ import annotations

import copy
import functools
import gc
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import orjson
import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from kube.errors import (
    KubeError,
    NotFound,
    PermanentKubeError,
    RetryableKubeError,
    from_response,
)

MANAGED_BY = ("app.kubernetes.io/managed-by", "quartermaster")
# A Warning header's value (RFC 7234): code, agent, quoted text; the API server sends
# `299 - "kueue.x-k8s.io/v1beta1 ClusterQueue is deprecated; use kueue.x-k8s.io/v1beta2"`.
Warnings = list[str]  # the texts of a response's Warning headers, collected by the caller
_WARNING = re.compile(r'\d{3} \S+ "((?:[^"\\]|\\.)*)"')

# apiVersion, kind -> (plural, namespaced) for every kind the portal reads or writes.
KINDS: dict[tuple[str, str], tuple[str, bool]] = {
    ("v1", "Namespace"): ("namespaces", False),
    ("v1", "Node"): ("nodes", False),
    ("v1", "Pod"): ("pods", True),
    ("v1", "Event"): ("events", True),
    ("v1", "ResourceQuota"): ("resourcequotas", True),
    ("v1", "LimitRange"): ("limitranges", True),
    ("v1", "ConfigMap"): ("configmaps", True),  # Kueue's Configuration, read by name
    ("scheduling.k8s.io/v1", "PriorityClass"): ("priorityclasses", False),
    ("policy/v1", "PodDisruptionBudget"): ("poddisruptionbudgets", True),
    ("batch/v1", "Job"): ("jobs", True),
    ("scheduling.volcano.sh/v1beta1", "Queue"): ("queues", False),
    ("scheduling.volcano.sh/v1beta1", "PodGroup"): ("podgroups", True),
    ("nvidia.com/v1", "ClusterPolicy"): ("clusterpolicies", False),
    # Dynamic Resource Allocation: devices a DRA driver publishes, the classes that select
    # them and the claims the scheduler allocates from them.
    ("resource.k8s.io/v1", "DeviceClass"): ("deviceclasses", False),
    ("resource.k8s.io/v1", "ResourceSlice"): ("resourceslices", False),
    ("resource.k8s.io/v1", "ResourceClaim"): ("resourceclaims", True),
    ("resource.k8s.io/v1", "ResourceClaimTemplate"): ("resourceclaimtemplates", True),
}
for _version in ("v1beta2", "v1beta1"):
    for _kind, _plural, _namespaced in (
        ("ResourceFlavor", "resourceflavors", False),
        ("Cohort", "cohorts", False),
        ("ClusterQueue", "clusterqueues", False),
        ("LocalQueue", "localqueues", True),
        ("Workload", "workloads", True),
    ):
        KINDS[(f"kueue.x-k8s.io/{_version}", _kind)] = (_plural, _namespaced)


@dataclass(frozen=True, order=True)
class ObjectRef:
    """Names one object: enough to build its URL."""

    api_version: str
    kind: str
    name: str
    namespace: str = ""

    @classmethod
    def of(cls, manifest: dict[str, Any]) -> ObjectRef:
        meta = manifest["metadata"]
        return cls(
            manifest["apiVersion"], manifest["kind"], meta["name"], meta.get("namespace", "")
        )

    def collection_path(self) -> str:
        return collection_path(self.api_version, self.kind, self.namespace)

    def path(self) -> str:
        return f"{self.collection_path()}/{quote(self.name, safe='')}"

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


def collection_path(api_version: str, kind: str, namespace: str = "") -> str:
    try:
        plural, namespaced = KINDS[(api_version, kind)]
    except KeyError:
        raise PermanentKubeError(
            f"the portal does not know the kind {kind} ({api_version})"
        ) from None
    prefix = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    if namespaced and namespace:
        return f"{prefix}/namespaces/{quote(namespace, safe='')}/{plural}"
    return f"{prefix}/{plural}"


def _transport_error(exc: ApiException) -> KubeError:
    """A failure before any HTTP answer, in the words a person can act on."""
    words = " ".join(str(exc.body or exc.reason or exc).split())
    if "CERTIFICATE_VERIFY_FAILED" in words or "SSL" in str(exc.reason):
        return RetryableKubeError(
            f"cannot reach the Kubernetes API: TLS failed ({words}); check KUBE_CA_FILE, "
            "KUBE_VERIFY_TLS or the kubeconfig's certificate-authority"
        )
    return RetryableKubeError(f"cannot reach the Kubernetes API: {words}")


class Gateway:
    """Every call the portal makes to a Kubernetes API server."""

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        field_manager: str = "quartermaster",
        timeout: tuple[float, float] = (5.0, 60.0),
    ) -> None:
        self.api = api_client
        self.field_manager = field_manager
        # Non-apply writes are attributed to the User-Agent's product name in managedFields.
        self.api.user_agent = f"{field_manager}/1.0"
        self.timeout = timeout

    def bounded(self, *, connect: float, read: float) -> Gateway:
        """The same client with shorter timeouts, for a person waiting on a page or a quick
        probe (a hung API server answers them with a RetryableKubeError, never a hang)."""
        twin = copy.copy(self)
        twin.timeout = (connect, read)
        return twin

    # ------------------------------------------------------------------ transport

    def request(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        decode: bool = True,
        warnings: Warnings | None = None,
    ) -> Any:
        """One HTTP request; returns the decoded JSON body or raises a KubeError. The API
        server's ``Warning`` headers (a deprecated version, an unknown field) go into
        ``warnings`` when one is given."""
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        method, url, headers, payload, _ = self.api.param_serialize(
            method,
            path,
            query_params=query or [],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            response = self.api.call_api(
                method, url, header_params=headers, body=payload, _request_timeout=self.timeout
            )
            data = response.read()
        except urllib3.exceptions.HTTPError as exc:
            raise RetryableKubeError(f"cannot reach the Kubernetes API: {exc}") from exc
        except OSError as exc:
            raise RetryableKubeError(f"cannot reach the Kubernetes API: {exc}") from exc
        except ApiException as exc:  # the client wraps transport failures (TLS) as status 0
            raise _transport_error(exc) from exc
        status = response.status
        if warnings is not None:
            warnings.extend(warnings_of(response.headers))
        if 200 <= status < 300:
            return self._decode(data) if decode else data
        try:
            error_body = orjson.loads(data) if data else {}
        except orjson.JSONDecodeError:
            error_body = {"message": data.decode(errors="replace")[:500]}
        raise from_response(
            status,
            error_body if isinstance(error_body, dict) else {},
            fallback=f"HTTP {status} from {method} {path}",
        )

    @staticmethod
    def _decode(data: bytes) -> Any:
        # The collector would walk every new dict of a large list several times over.
        enabled = gc.isenabled()
        gc.disable()
        try:
            return orjson.loads(data) if data else None
        finally:
            if enabled:
                gc.enable()

    # ------------------------------------------------------------------ reads

    def version(self) -> dict[str, Any]:
        return dict(self.request("GET", "/version"))

    def api_groups(self) -> dict[str, Any]:
        """The API server's group discovery (an APIGroupList: every group and its versions)."""
        return dict(self.request("GET", "/apis"))

    def rules_review(self, namespace: str) -> dict[str, Any]:
        """What this client's identity may do in ``namespace`` (cluster-wide grants
        included): a SelfSubjectRulesReview's status (resourceRules, nonResourceRules,
        incomplete, evaluationError). Read-only: the API server stores nothing."""
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectRulesReview",
            "spec": {"namespace": namespace},
        }
        path = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
        return dict(self.request("POST", path, body=body).get("status") or {})

    def get(self, ref: ObjectRef) -> dict[str, Any]:
        return dict(self.request("GET", ref.path()))

    def pending_workloads(
        self, cluster_queue: str, version: str = "v1beta2"
    ) -> list[dict[str, Any]]:
        """Kueue's visibility API: a ClusterQueue's pending workloads with their positions."""
        group = f"/apis/visibility.kueue.x-k8s.io/{version}"
        path = f"{group}/clusterqueues/{cluster_queue}/pendingworkloads"
        return list(self.request("GET", path).get("items") or [])

    def pod_proxy_get(self, namespace: str, pod: str, port: int, path: str) -> str:
        """GET ``path`` from a pod's port through the API server's proxy (``pods/proxy``),
        e.g. a DCGM exporter's ``metrics`` on 9400; the body as text."""
        ref = ObjectRef("v1", "Pod", f"{pod}:{port}", namespace)
        data = self.request("GET", f"{ref.path()}/proxy/{path.lstrip('/')}", decode=False)
        return bytes(data).decode("utf-8", errors="replace")

    def list_pages(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str = "",
        label_selector: str = "",
        field_selector: str = "",
        page_size: int = 500,
    ) -> Iterator[list[dict[str, Any]]]:
        """LIST in pages of ``page_size``; restarts once if a continue token expires (410)."""
        path = collection_path(api_version, kind, namespace)
        for attempt in range(2):
            token = ""
            try:
                while True:
                    query = [("limit", str(page_size))]
                    if label_selector:
                        query.append(("labelSelector", label_selector))
                    if field_selector:
                        query.append(("fieldSelector", field_selector))
                    if token:
                        query.append(("continue", token))
                    page = self.request("GET", path, query=query)
                    yield page.get("items") or []
                    token = (page.get("metadata") or {}).get("continue") or ""
                    if not token:
                        return
            except KubeError as exc:
                if exc.status == 410 and attempt == 0:
                    continue
                raise

    def list(self, api_version: str, kind: str, **kwargs: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for page in self.list_pages(api_version, kind, **kwargs):
            items.extend(page)
        return items

    # ------------------------------------------------------------------ writes

    def apply(
        self, manifest: dict[str, Any], *, force: bool = False, warnings: Warnings | None = None
    ) -> dict[str, Any]:
        """Server-side apply under the portal's field manager.

        Conflicts with another manager raise :class:`ApplyConflict` (unless ``force``); a 409
        for any other reason is retried once at once, then left to the caller's retry. The
        API server's warnings go into ``warnings`` when one is given.
        """
        ref = ObjectRef.of(manifest)
        query = [("fieldManager", self.field_manager)]
        if force:
            query.append(("force", "true"))
        body = orjson.dumps(manifest).decode()  # JSON is YAML: the apply patch type takes it
        for attempt in range(2):
            try:
                return dict(
                    self.request(
                        "PATCH",
                        ref.path(),
                        query=query,
                        body=body,
                        content_type="application/apply-patch+yaml",
                        warnings=warnings,
                    )
                )
            except RetryableKubeError as exc:
                if exc.status != 409 or attempt:
                    raise
        raise AssertionError("unreachable")

    def delete(self, ref: ObjectRef) -> bool:
        """Delete; False when it was already gone."""
        try:
            self.request("DELETE", ref.path())
        except NotFound:
            return False
        return True

    def delete_if_managed(self, ref: ObjectRef) -> bool:
        """Delete only an object that carries the portal's managed-by label."""
        try:
            live = self.get(ref)
        except NotFound:
            return False
        labels = (live.get("metadata") or {}).get("labels") or {}
        if labels.get(MANAGED_BY[0]) != MANAGED_BY[1]:
            return False
        return self.delete(ref)

    def merge_patch(self, ref: ObjectRef, patch: dict[str, Any]) -> dict[str, Any]:
        return dict(
            self.request(
                "PATCH", ref.path(), body=patch, content_type="application/merge-patch+json"
            )
        )

    def patch_node_labels(self, node: str, labels: dict[str, str | None]) -> dict[str, Any]:
        """Set (or, with None, remove) node labels in one merge patch."""
        return self.merge_patch(ObjectRef("v1", "Node", node), {"metadata": {"labels": labels}})

    def cordon(self, node: str, unschedulable: bool = True) -> dict[str, Any]:
        return self.merge_patch(
            ObjectRef("v1", "Node", node), {"spec": {"unschedulable": unschedulable or None}}
        )

    def evict(self, namespace: str, pod: str) -> None:
        """Evict through the Eviction API: PodDisruptionBudgets are respected (429 raises
        :class:`EvictionBlocked`); a pod already gone is fine."""
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod, "namespace": namespace},
        }
        try:
            self.request(
                "POST", f"{ObjectRef('v1', 'Pod', pod, namespace).path()}/eviction", body=body
            )
        except NotFound:
            return


def warnings_of(headers: Any) -> list[str]:
    """The texts of a response's ``Warning`` headers, in order (none: empty)."""
    if headers is None:
        return []
    values = headers.getlist("Warning") if hasattr(headers, "getlist") else []
    if not values and headers.get("Warning"):
        values = [headers.get("Warning")]
    texts: list[str] = []
    for value in values:
        found = _WARNING.findall(value)
        texts.extend(t.replace('\\"', '"').replace("\\\\", "\\") for t in found)
        if not found and value.strip():
            texts.append(value.strip())
    return texts


def connect(
    *,
    url: str = "",
    token: str = "",
    kubeconfig: str = "",
    kubeconfig_data: dict[str, Any] | None = None,
    context: str = "",
    in_cluster: bool = False,
    verify_tls: bool = True,
    ca_file: str = "",
    ca_data: str = "",
    field_manager: str = "quartermaster",
) -> Gateway:
    """A gateway from an explicit URL + token, a kubeconfig (a file, or its parsed content
    in ``kubeconfig_data``), or the in-cluster service account. ``ca_data`` is a PEM
    certificate given as text (kept in a private temporary file: the client reads a path)."""
    configuration = client.Configuration()
    if url:
        configuration.host = url
        if token:
            configuration.api_key = {"BearerToken": token}
            configuration.api_key_prefix = {"BearerToken": "Bearer"}
        configuration.verify_ssl = verify_tls
        if ca_file or ca_data:
            configuration.ssl_ca_cert = ca_file or _pem_file(ca_data)
    elif in_cluster:
        try:
            config.load_incluster_config(client_configuration=configuration)
        except config.ConfigException as exc:
            raise PermanentKubeError(f"no in-cluster service account here: {exc}") from exc
    elif kubeconfig_data is not None:
        try:
            config.load_kube_config_from_dict(
                kubeconfig_data, context=context or None, client_configuration=configuration
            )
        except config.ConfigException as exc:
            raise PermanentKubeError(f"the kubeconfig cannot be used: {exc}") from exc
    else:
        config.load_kube_config(
            config_file=kubeconfig or None,
            context=context or None,
            client_configuration=configuration,
        )
    configuration.retries = False  # type: ignore[assignment]  # Celery owns retries
    if hasattr(configuration, "client_go_retries"):
        configuration.client_go_retries = 0  # type: ignore[assignment]
    return Gateway(client.ApiClient(configuration), field_manager=field_manager)


@functools.cache
def _pem_file(pem: str) -> str:
    """A file holding ``pem`` (one per certificate per process, readable by its owner only)."""
    handle = tempfile.NamedTemporaryFile(  # noqa: SIM115  # lives as long as the process
        "w", prefix="qm-ca-", suffix=".pem", delete=False
    )
    with handle:
        handle.write(pem)
    return handle.name


__all__ = ["Gateway", "NotFound", "ObjectRef", "connect"]
