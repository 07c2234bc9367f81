"""HTTP front of the demo cluster: Kubernetes REST paths, verbs, content types, Status errors."""

from __future__ import annotations

import contextlib
import json
import select
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import orjson
import yaml

from devcluster import crd, kueue, openapi, rbac, resources, table, watch
from devcluster.cluster import Cluster
from devcluster.controllers import Controllers
from devcluster.errors import APIError

VERSION = {
    "major": "1",
    "minor": "36",
    "emulationMajor": "1",
    "emulationMinor": "36",
    "minCompatibilityMajor": "1",
    "minCompatibilityMinor": "35",
    "gitVersion": "v1.36.2",
    "gitCommit": "devcluster",
    "gitTreeState": "clean",
    "buildDate": "2026-11-30T00:00:00Z",
    "goVersion": "go1.26.10",
    "compiler": "gc",
    "platform": "linux/amd64",
}


class Response:
    def __init__(
        self,
        status: int,
        body: Any,
        headers: dict[str, str] | None = None,
        *,
        raw: bytes | None = None,
        stream: Callable[[Callable[[], bool]], Iterator[bytes]] | None = None,
    ) -> None:
        self.status = status
        self.body = body
        self.headers = headers or {}
        self.raw = raw
        # A watch: called with ``alive`` (is the client still connected?), yields lines.
        self.stream = stream


VISIBILITY = "visibility.kueue.x-k8s.io"
RULES_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
# For RBAC and error messages: the aggregated group's ClusterQueue view.
VISIBILITY_CQ = resources.Resource(
    VISIBILITY, "v1beta2", "clusterqueues", "ClusterQueue", False, "clusterqueue"
)
VISIBILITY_LQ = resources.Resource(
    VISIBILITY, "v1beta2", "localqueues", "LocalQueue", True, "localqueue"
)


class API:
    """Routes one request to the cluster; independent of the HTTP transport (testable)."""

    def __init__(
        self,
        cluster: Cluster,
        controllers: Controllers,
        *,
        token: str = "",
        users: Mapping[str, tuple[str, Any]] | None = None,
        served: resources.Served | None = None,
    ) -> None:
        """``token``: the admin's bearer token; ``users``: token -> (user, allowed verbs or
        a ClusterRole's PolicyRules), for RBAC refusals (403) as the API server words them;
        ``served``: which optional APIs (Kueue's versions, Volcano) the cluster serves."""
        self.served = served or resources.Served()
        self.cluster = cluster
        self.controllers = controllers
        self.token = token
        self.users = {
            t: rbac.Subject.of(name, grants) for t, (name, grants) in (users or {}).items()
        }
        self.log = watch.Log(cluster)

    def handle(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Response:
        self.cluster.warnings.items = []
        delay = self.controllers.options.write_delay_seconds
        if delay and method in ("POST", "PUT", "PATCH", "DELETE"):
            time.sleep(delay)
        try:
            response = self._route(method, target, headers, body)
        except APIError as error:
            response = Response(error.code, error.status())
            if error.code == 403 and error.reason == "Forbidden":
                response.headers["X-Content-Type-Options"] = "nosniff"
        warnings = getattr(self.cluster.warnings, "items", [])
        if deprecated := crd.deprecation_warning(urlsplit(target).path):
            warnings = [deprecated, *warnings]  # the CRD marks this version deprecated
        if warnings:
            response.headers["Warning"] = ", ".join(f"299 - {json.dumps(w)}" for w in warnings)
        return response

    # ------------------------------------------------------------------ routing

    def _route(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Response:
        url = urlsplit(target)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        path = unquote(url.path).rstrip("/") or "/"  # as Go decodes it
        if path in ("/healthz", "/readyz", "/livez"):
            return Response(200, None, {"Content-Type": "text/plain; charset=utf-8"}, raw=b"ok")
        bearer = headers.get("authorization", "").removeprefix("Bearer ")
        user = self.users.get(bearer)
        if (self.token or self.users) and bearer != self.token and user is None:
            raise APIError(401, "Unauthorized")
        if path == "/version":
            return Response(200, VERSION, {"pretty": "1"})
        if path.startswith("/openapi/"):
            return self._openapi(path, query, headers.get("accept", ""))
        if path == "/api":
            return Response(
                200,
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": headers.get("host", "")}
                    ],
                },
            )
        if path == "/apis":
            return Response(
                200,
                {
                    "kind": "APIGroupList",
                    "apiVersion": "v1",
                    "groups": [self._group(g, v) for g, v in self._group_versions().items() if g],
                },
            )
        parts = path.strip("/").split("/")
        if path == RULES_REVIEWS and method == "POST":
            return self._rules_review(body, user)
        if parts[0] == "apis" and len(parts) >= 2 and not self.served.serves(*parts[1:3]):
            raise APIError(404, "the server could not find the requested resource", details={})
        if parts[:2] == ["apis", VISIBILITY]:
            return self._visibility(method, parts[2:], user)
        if parts[0] == "api" and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 2:
            if len(parts) == 2:
                versions = self._group_versions().get(parts[1])
                if not versions:
                    raise APIError(
                        404, "the server could not find the requested resource", details={}
                    )
                return Response(
                    200, {"kind": "APIGroup", "apiVersion": "v1", **self._group(parts[1], versions)}
                )
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise APIError(404, "the server could not find the requested resource", details={})
        if not rest:
            listing = resources.resource_list(group, version)
            if listing is None:
                raise APIError(404, "the server could not find the requested resource", details={})
            return Response(200, listing)
        namespace = ""
        if rest[0] == "namespaces" and len(rest) >= 3 and resources.find(group, version, rest[2]):
            namespace, rest = rest[1], rest[2:]
        resource = resources.find(group, version, rest[0])
        if resource is None:
            raise APIError(404, "the server could not find the requested resource", details={})
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if user is not None:
            watching = method == "GET" and not name and query.get("watch") in ("1", "true")
            verb = "watch" if watching else rbac.verb_of(method, name)
            self._authorize(user, verb, resource, namespace, name, sub)
            if method == "PATCH" and self._creates(headers, resource, namespace, name):
                # Server-side apply of an object that does not exist yet creates it, and the
                # API server asks for "create" on top of "patch".
                self._authorize(user, "create", resource, namespace, name, sub)
        if resource.plural == "pods" and sub == "proxy":
            return self._proxy(method, namespace, name, "/".join(rest[3:]))
        return self._verb(method, resource, version, namespace, name, sub, query, headers, body)

    @staticmethod
    def _openapi(path: str, query: dict[str, str], accept: str) -> Response:
        """``/openapi/v2`` and ``/openapi/v3[/<group version>]``, with the headers of the real
        handlers (the index goes out as text/plain, a hashed document as immutable). v2 is
        served as JSON only: a client asking for protobuf alone is told 406, and kubectl then
        computes its patches from its built-in types, as it does for any server without it."""
        modified = formatdate(usegmt=True)
        if path == "/openapi/v2":
            if accept and not any(
                t.split(";")[0].strip() in ("application/json", "*/*", "application/*")
                for t in accept.split(",")
            ):
                return Response(
                    406,
                    None,
                    {"Content-Type": "text/plain; charset=utf-8"},
                    raw=b"406 Not Acceptable: the demo cluster serves /openapi/v2 as JSON only\n",
                )
            return Response(
                200,
                None,
                {"Content-Type": "application/json", "Accept-Ranges": "bytes", "Vary": "Accept"},
                raw=openapi.v2_document(),
            )
        if path == "/openapi/v3":
            headers = {"Content-Type": "text/plain; charset=utf-8", "Accept-Ranges": "bytes"}
            return Response(
                200, None, {**headers, "Last-Modified": modified}, raw=openapi.v3_index()
            )
        found = openapi.v3_document(path.removeprefix("/openapi/v3/"))
        if found is None:
            return Response(
                404,
                None,
                {"Content-Type": "text/plain; charset=utf-8"},
                raw=b"404 page not found\n",
            )
        body, digest = found
        if query.get("hash", digest) != digest:
            return Response(
                301,
                None,
                {"Location": f"{path}?hash={digest}", "Content-Type": "text/html"},
                raw=b"",
            )
        headers = {
            "Content-Type": "application/json",
            "Etag": f'"{digest}"',
            "Vary": "Accept",
            "Accept-Ranges": "bytes",
        }
        if "hash" in query:
            headers["Cache-Control"] = "public, immutable"
            a_year = time.gmtime(time.time() + 365 * 86400)
            headers["Expires"] = time.strftime("%a, %d %b %Y %H:%M:%S UTC", a_year)
        return Response(200, None, headers, raw=body)

    def _proxy(self, method: str, namespace: str, target: str, path: str) -> Response:
        """``pods/NAME:PORT/proxy/PATH``: the DCGM exporters answer ``:9400/metrics``."""
        name, _, port = target.partition(":")
        pod = self.cluster.require(resources.find("", "v1", "pods"), namespace, name)  # type: ignore[arg-type]
        labels = pod["metadata"].get("labels") or {}
        ip = (pod.get("status") or {}).get("podIP", "")
        if (
            method != "GET"
            or labels.get("app") != "nvidia-dcgm-exporter"
            or port not in ("", "9400")
            or path != "metrics"
            or (pod.get("status") or {}).get("phase") != "Running"
        ):
            raise APIError(
                503,
                f"error trying to reach service: dial tcp {ip}:{port or 80}: connect: "
                "connection refused",
                reason="ServiceUnavailable",
            )
        text = self.controllers.dcgm_metrics(pod["spec"].get("nodeName", ""))
        return Response(
            200,
            None,
            {"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
            raw=text.encode(),
        )

    def _visibility(self, method: str, rest: list[str], user: rbac.Subject | None) -> Response:
        """Kueue's aggregated visibility API: ``clusterqueues/{cq}/pendingworkloads`` and
        ``namespaces/{ns}/localqueues/{lq}/pendingworkloads``."""
        version = rest[0] if rest else ""
        local = len(rest) == 6 and rest[1] == "namespaces" and rest[3] == "localqueues"
        if (
            method != "GET"
            or version not in ("v1beta2", "v1beta1")
            or not (local or (len(rest) == 4 and rest[1] == "clusterqueues"))
            or rest[-1] != "pendingworkloads"
        ):
            raise APIError(404, "the server could not find the requested resource", details={})
        name = rest[-2]
        if user is not None:
            target = VISIBILITY_LQ if local else VISIBILITY_CQ
            self._authorize(user, "get", target, rest[2] if local else "", name, "pendingworkloads")
        with self.cluster.lock:
            if local:
                lq = self.cluster.get(kueue.LQS, rest[2], name)  # type: ignore[arg-type]
                if lq is None:
                    raise APIError(
                        404, f'localqueues.kueue.x-k8s.io "{name}" not found', reason="NotFound"
                    )
                summary = kueue.pending_workloads(
                    self.cluster,
                    lq["spec"].get("clusterQueue", ""),
                    version=version,
                    local_queue=(rest[2], name),
                )
                return Response(200, summary)
            cqs = {c["metadata"]["name"] for c in self.cluster.all(kueue.CQS)}  # type: ignore[arg-type]
            if name not in cqs:
                raise APIError(
                    404, f'clusterqueues.kueue.x-k8s.io "{name}" not found', reason="NotFound"
                )
            return Response(200, kueue.pending_workloads(self.cluster, name, version=version))

    def _creates(
        self, headers: dict[str, str], resource: resources.Resource, namespace: str, name: str
    ) -> bool:
        if not headers.get("content-type", "").startswith("application/apply-patch"):
            return False
        try:
            self.cluster.require(resource, namespace, name)
        except APIError:
            return True
        return False

    @staticmethod
    def _authorize(
        user: rbac.Subject,
        verb: str,
        resource: resources.Resource,
        namespace: str,
        name: str,
        sub: str,
    ) -> None:
        plural = f"{resource.plural}/{sub}" if sub else resource.plural
        if user.check(verb, resource.group, plural, name):
            return
        scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
        subject = f'{resource.group_resource} "{name}"' if name else resource.group_resource
        details: dict[str, str] = {}
        if name:
            details["name"] = name
        if resource.group:
            details["group"] = resource.group
        details["kind"] = resource.plural
        raise APIError(
            403,
            f'{subject} is forbidden: User "{user.name}" cannot {verb} resource "{plural}" in '
            f'API group "{resource.group}" {scope}',
            details=details,
        )

    def _group_versions(self) -> dict[str, list[str]]:
        """The groups served, with the versions served, preferred first."""
        served = {}
        for group, versions in resources.group_versions().items():
            kept = [v for v in versions if self.served.serves(group, v)]
            if kept:
                served[group] = kept
        return served

    def _rules_review(self, body: bytes, user: rbac.Subject | None) -> Response:
        """``POST .../selfsubjectrulesreviews``: any authenticated user may ask what it may do
        (the API server's system:basic-user role); nothing is stored."""
        try:
            review = orjson.loads(body or b"{}")
        except orjson.JSONDecodeError:
            raise APIError(400, "the body of the request was in an unknown format") from None
        namespace = ((review or {}).get("spec") or {}).get("namespace") or ""
        if not namespace:
            raise APIError(400, "no namespace on request", reason="BadRequest", details={})
        return Response(201, rbac.rules_review(user, namespace))

    @staticmethod
    def _group(group: str, versions: list[str]) -> dict[str, Any]:
        return {
            "name": group,
            "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in versions],
            "preferredVersion": {"groupVersion": f"{group}/{versions[0]}", "version": versions[0]},
        }

    def _verb(
        self,
        method: str,
        resource: resources.Resource,
        version: str,
        namespace: str,
        name: str,
        sub: str,
        query: dict[str, str],
        headers: dict[str, str],
        body: bytes,
    ) -> Response:
        cluster = self.cluster
        manager = headers.get("user-agent", "unknown").split("/")[0] or "unknown"
        if method == "GET" and not name:
            return self._list(resource, version, namespace, query, headers)
        if method == "GET":
            obj = cluster.require(resource, namespace, name)
            if table.wanted(headers.get("accept", "")):
                return Response(
                    200,
                    table.table(
                        resource,
                        version,
                        [self._printed(resource, obj, version)],
                        {"resourceVersion": obj["metadata"].get("resourceVersion", "")},
                        include=query.get("includeObject", ""),
                        output=lambda o: cluster.output(resource, o, version),
                    ),
                )
            return Response(200, cluster.output(resource, obj, version))
        if method == "POST" and sub == "eviction":
            self.controllers.evict(namespace, name)
            return Response(
                201,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "code": 201,
                },
            )
        if method == "POST" and not name:
            payload = self._body(resource, headers, body)
            self._check_fields(resource, version, payload, query)
            obj = cluster.create(
                resource,
                namespace,
                payload,
                manager=manager,
                strict=query.get("fieldValidation") == "Strict",
            )
            return Response(201, cluster.output(resource, obj, version))
        if method == "PUT" and name:
            payload = self._body(resource, headers, body)
            self._check_fields(resource, version, payload, query)
            obj = cluster.replace(
                resource,
                namespace,
                name,
                payload,
                manager=manager,
                subresource=sub,
            )
            return Response(200, cluster.output(resource, obj, version))
        if method == "PATCH" and name:
            content_type = headers.get("content-type", "application/json")
            obj, created = cluster.patch(
                resource,
                namespace,
                name,
                content_type,
                self._body(resource, headers, body),
                manager=manager,
                field_manager=query.get("fieldManager", ""),
                force=query.get("force") == "true",
                subresource=sub,
            )
            return Response(201 if created else 200, cluster.output(resource, obj, version))
        if method == "DELETE" and name:
            options = self._body(resource, headers, body) if body else {}
            grace = query.get("gracePeriodSeconds")
            grace_value = (
                int(grace) if grace not in (None, "") else options.get("gracePeriodSeconds")
            )
            obj = cluster.delete(resource, namespace, name, grace_seconds=grace_value)
            return Response(200, cluster.output(resource, obj, version))
        raise APIError(
            405,
            "the server does not allow this method on the requested resource",
            reason="MethodNotAllowed",
        )

    def _list(
        self,
        resource: resources.Resource,
        version: str,
        namespace: str,
        query: dict[str, str],
        headers: dict[str, str],
    ) -> Response:
        cluster = self.cluster
        if query.get("watch") in ("1", "true"):
            return self._watch(resource, version, namespace, query, headers)
        items, metadata = cluster.list(
            resource,
            namespace or None,
            label_selector=query.get("labelSelector", ""),
            field_selector=query.get("fieldSelector", ""),
            limit=int(query.get("limit") or 0),
            continue_token=query.get("continue", ""),
        )
        if table.wanted(headers.get("accept", "")):
            return Response(
                200,
                table.table(
                    resource,
                    version,
                    [self._printed(resource, i, version) for i in items],
                    metadata,
                    include=query.get("includeObject", ""),
                    output=lambda o: cluster.output(resource, o, version),
                ),
            )
        api_version = f"{resource.group}/{version}" if resource.group else version
        if resource.group == "events.k8s.io" or resource.kind == "ClusterQueue":
            items = [cluster.list_item(resource, i, version) for i in items]
        return Response(
            200,
            {
                "kind": f"{resource.kind}List",
                "apiVersion": api_version,
                "metadata": metadata,
                "items": items,
            },
        )

    def _watch(
        self,
        resource: resources.Resource,
        version: str,
        namespace: str,
        query: dict[str, str],
        headers: dict[str, str],
    ) -> Response:
        """A watch stream; asked for as a Table, each event's object is a one-row Table
        (the column definitions only in the first, as the API server saves bandwidth)."""
        as_table = table.wanted(headers.get("accept", ""))
        include = query.get("includeObject", "")
        if as_table and include not in ("", "Metadata", "Object", "None"):
            raise APIError(400, f'unrecognized includeObject value: "{include}"')
        first = [True]

        def encode(kind: str, obj: Any) -> dict[str, Any]:
            if not as_table:
                return {"type": kind, "object": self.cluster.output(resource, obj, version)}
            out = table.table(
                resource,
                version,
                [self._printed(resource, obj, version)],
                {"resourceVersion": obj["metadata"]["resourceVersion"]},
                include=include,
                output=lambda o: self.cluster.output(resource, o, version),
                headers=first[0],
            )
            first[0] = False
            return {"type": kind, "object": out}

        run = watch.stream(self.log, resource, version, namespace, query, encode)
        return Response(200, None, {"Content-Type": "application/json"}, stream=run)

    def _printed(self, resource: resources.Resource, obj: Any, version: str) -> Any:
        """The object a Table row is printed from: the stored one, in the requested version
        for custom resources (a v1beta1 ClusterQueue's ``.spec.cohort``)."""
        return self.cluster.list_item(resource, obj, version) if resource.crd else obj

    def _check_fields(
        self, resource: resources.Resource, version: str, body: Any, query: dict[str, str]
    ) -> None:
        """Field validation of a core kind's body (the cluster checks CRD bodies itself):
        ``Strict`` refuses unknown fields as the API server's strict decoding does, ``Warn``
        (the default) names them in ``Warning`` headers."""
        mode = query.get("fieldValidation") or "Warn"
        if resource.crd or mode == "Ignore" or not isinstance(body, dict):
            return
        unknown = openapi.unknown_fields(resource, body)
        if unknown and mode == "Strict":
            raise APIError(
                400,
                f'{resource.kind} in version "{version}" cannot be handled as a '
                f"{resource.kind}: strict decoding error: "
                + ", ".join(f'unknown field "{u}"' for u in unknown),
            )
        if unknown:
            self.cluster.warnings.items = [f'unknown field "{u}"' for u in unknown]

    @staticmethod
    def _body(resource: resources.Resource, headers: dict[str, str], body: bytes) -> Any:
        content_type = headers.get("content-type", "application/json").split(";")[0].strip()
        try:
            if content_type == "application/apply-patch+yaml":
                return yaml.safe_load(body.decode() or "{}")
            return orjson.loads(body or b"{}")
        except (ValueError, yaml.YAMLError) as exc:
            raise APIError(
                400,
                f'{resource.kind} in version "{resource.version}" cannot be '
                f"handled as a {resource.kind}: {exc}",
            ) from None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "devcluster"
    api: API

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in two writes: without this, Nagle's algorithm and the
        # client's delayed ACK add ~40 ms to every response.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        if getattr(self.server, "verbose", False):
            super().log_message(format, *args)

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        response = self.api.handle(self.command, self.path, headers, body)
        if response.stream is not None:
            self._stream(response)
            return
        pretty = (
            response.headers.pop("pretty", None)
            or "pretty=true" in self.path
            or headers.get("user-agent", "").startswith(("curl", "Wget", "Mozilla/5.0"))
        )
        if response.raw is not None:
            payload = response.raw
        elif pretty:
            payload = json.dumps(response.body, indent=2).encode() + (
                b"" if self.path == "/version" else b"\n"
            )
        else:
            payload = orjson.dumps(response.body) + b"\n"
        self.send_response(response.status)
        self.send_header("Audit-Id", str(uuid.uuid4()))
        self.send_header(
            "Cache-Control", response.headers.pop("Cache-Control", "no-cache, private")
        )
        self.send_header("Content-Type", response.headers.pop("Content-Type", "application/json"))
        for key, value in response.headers.items():
            self.send_header(key, value)
        self.send_header("Date", formatdate(usegmt=True))
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _stream(self, response: Response) -> None:
        """A watch: chunked, one JSON line per chunk, until the stream ends or the client
        goes away."""
        assert response.stream is not None
        self.send_response(response.status)
        self.send_header("Audit-Id", str(uuid.uuid4()))
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Content-Type", response.headers.pop("Content-Type", "application/json"))
        self.send_header("Date", formatdate(usegmt=True))
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for line in response.stream(self._alive):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True

    def _alive(self) -> bool:
        """Whether the client is still connected (a closed socket reads as empty)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return not readable or bool(self.connection.recv(1, socket.MSG_PEEK))
        except OSError:
            return False

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    verbose = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.connections: set[socket.socket] = set()

    def process_request(self, request: Any, client_address: Any) -> None:
        self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        self.connections.discard(request)
        super().shutdown_request(request)

    def close(self) -> None:
        """Stop listening and drop every open connection (keep-alive ones included)."""
        self.shutdown()
        self.server_close()
        for conn in list(self.connections):
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


def serve(api: API, host: str, port: int) -> Server:
    handler = type("BoundHandler", (Handler,), {"api": api})
    server = Server((host, port), handler)
    threading.Thread(target=server.serve_forever, name="devcluster-http", daemon=True).start()
    return server
