"""The demo cluster's state and API semantics (no HTTP here; see ``server.py``).

Objects are stored as plain dicts without ``kind``/``apiVersion`` and are never mutated
in place once stored: every write stores a new dict, so a reader can serialise a list of
references outside the lock. One global resourceVersion counter orders all writes.
"""

from __future__ import annotations

import base64
import bisect
import copy
import datetime as dt
import json
import random
import re
import string
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from devcluster import crd, fields, limitranger, quantity
from devcluster.errors import (
    APIError,
    already_exists,
    conflict_modified,
    invalid,
    not_found,
)
from devcluster.resources import RESOURCES, Resource, find
from devcluster.selectors import (
    SelectorError,
    parse_field_selector,
    parse_label_selector,
)

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace, name)

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
EXPIRED_MSG = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted between "
    "the time the first chunk was returned and now may show up in the list."
)
# Resource lists whose quantities the API server parses and canonicalises.
_RESOURCE_LISTS = {
    "Node": [("status", "capacity"), ("status", "allocatable")],
    "ResourceQuota": [("spec", "hard")],
}


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Table:
    """One resource's objects, with a lazily sorted key index for paginated LISTs."""

    def __init__(self) -> None:
        self.objects: dict[Key, Obj] = {}
        self._sorted: list[Key] | None = None

    def put(self, key: Key, obj: Obj) -> None:
        if key not in self.objects:
            self._sorted = None
        self.objects[key] = obj

    def pop(self, key: Key) -> Obj | None:
        self._sorted = None
        return self.objects.pop(key, None)

    def keys(self) -> list[Key]:
        if self._sorted is None:
            self._sorted = sorted(self.objects)
        return self._sorted


class Cluster:
    """State plus the verbs of the Kubernetes API for the resources in ``RESOURCES``."""

    def __init__(self, *, continue_ttl: float = 300.0) -> None:
        self.lock = threading.RLock()
        self.rv = 100
        self.tables: dict[tuple[str, str], Table] = {}
        for resource in RESOURCES:
            self.tables.setdefault(self.storage_key(resource), Table())
        self.continue_ttl = continue_ttl
        self.continue_issued: dict[int, float] = {}
        # Hooks the controllers register: called with (resource, old, new) after each write.
        self.watchers: list[Callable[[Resource, Obj | None, Obj | None], None]] = []
        self.warnings: threading.local = threading.local()
        # Admission plugins the controllers register: called with (resource, obj) on create,
        # and with (resource, old, new) on update (webhooks that refuse a change).
        self.admission: list[Callable[[Resource, Obj], None]] = []
        self.update_admission: list[Callable[[Resource, Obj, Obj], None]] = []
        # What a reader derived from the whole store, by name, with the ``rv`` it was derived
        # at (any write moves ``rv``, so a value is good while ``rv`` has not moved).
        self.derived: dict[str, tuple[int, Any]] = {}

    def derive(self, name: str, compute: Callable[[], Any]) -> Any:
        """``compute()``, once per state of the store (a thousand reads of one state, such as
        a poll's questions to every ClusterQueue, derive it once)."""
        with self.lock:
            kept = self.derived.get(name)
            if kept is not None and kept[0] == self.rv:
                return kept[1]
            value = compute()
            self.derived[name] = (self.rv, value)
            return value

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def storage_key(resource: Resource) -> tuple[str, str]:
        # events.k8s.io/v1 is a second view of core events.
        if resource.plural == "events":
            return ("", "events")
        return resource.key

    def table(self, resource: Resource) -> Table:
        return self.tables[self.storage_key(resource)]

    def next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    def get(self, resource: Resource, namespace: str, name: str) -> Obj | None:
        return self.table(resource).objects.get((namespace if resource.namespaced else "", name))

    def require(self, resource: Resource, namespace: str, name: str) -> Obj:
        obj = self.get(resource, namespace, name)
        if obj is None:
            raise not_found(resource, name)
        return obj

    def all(self, resource: Resource) -> Iterable[Obj]:
        return list(self.table(resource).objects.values())

    def _store(self, resource: Resource, new: Obj, old: Obj | None) -> Obj:
        meta = new["metadata"]
        meta["resourceVersion"] = self.next_rv()
        key = (meta.get("namespace", "") if resource.namespaced else "", meta["name"])
        self.table(resource).put(key, new)
        for watcher in self.watchers:
            watcher(resource, old, new)
        return new

    def _remove(self, resource: Resource, obj: Obj) -> None:
        meta = obj["metadata"]
        key = (meta.get("namespace", "") if resource.namespaced else "", meta["name"])
        self.table(resource).pop(key)
        self.rv += 1
        for watcher in self.watchers:
            watcher(resource, obj, None)

    # ------------------------------------------------------------------ LIST

    def list(
        self,
        resource: Resource,
        namespace: str | None,
        *,
        label_selector: str = "",
        field_selector: str = "",
        limit: int = 0,
        continue_token: str = "",
    ) -> tuple[list[Obj], dict[str, Any]]:
        try:
            requirements = parse_label_selector(label_selector) if label_selector else []
            field_match = (
                parse_field_selector(field_selector, resource.field_labels)
                if field_selector
                else None
            )
        except SelectorError as exc:
            raise APIError(400, str(exc)) from None
        start = ""
        if continue_token:
            start, token_rv = self._decode_continue(continue_token)
            issued = self.continue_issued.get(token_rv)
            if token_rv != -1 and (issued is None or time.monotonic() - issued > self.continue_ttl):
                fresh = self._encode_continue(-1, start.lstrip("/"))
                raise APIError(410, EXPIRED_MSG, metadata={"continue": fresh})
        with self.lock:
            table = self.table(resource)
            keys = table.keys()
            objects = table.objects
            list_rv = self.rv
            index = bisect.bisect_right(keys, self._key_from_start(resource, start)) if start else 0
            items: list[Obj] = []
            last: Key | None = None
            scanned = index
            for scanned in range(index, len(keys)):
                key = keys[scanned]
                if namespace and key[0] != namespace:
                    continue
                obj = objects[key]
                if requirements:
                    labels = obj["metadata"].get("labels") or {}
                    if not all(r.matches(labels) for r in requirements):
                        continue
                if field_match is not None and not field_match(self._field_view(resource, obj)):
                    continue
                if limit and len(items) >= limit:
                    break
                items.append(obj)
                last = key
            else:
                scanned = len(keys)
            remaining = 0
            if limit and len(items) >= limit and scanned < len(keys):
                remaining = (
                    sum(1 for k in keys[scanned:] if not namespace or k[0] == namespace)
                    if not (requirements or field_match)
                    else -1
                )
        metadata: dict[str, Any] = {"resourceVersion": str(list_rv)}
        if limit and last is not None and remaining != 0 and len(items) >= limit:
            token_rv = self._token_rv(continue_token, list_rv)
            start_key = f"/{last[0]}/{last[1]}" if resource.namespaced else f"/{last[1]}"
            metadata["continue"] = self._encode_continue(token_rv, start_key)
            if remaining > 0:
                metadata["remainingItemCount"] = remaining
        return items, metadata

    def _token_rv(self, previous: str, list_rv: int) -> int:
        if previous:
            return self._decode_continue(previous)[1]
        self.continue_issued[list_rv] = time.monotonic()
        return list_rv

    @staticmethod
    def _key_from_start(resource: Resource, start: str) -> Key:
        start = start.lstrip("/")
        if not resource.namespaced:
            return ("", start)
        namespace, _, name = start.partition("/")
        return (namespace, name)

    @staticmethod
    def _encode_continue(rv: int, start: str) -> str:
        raw = json.dumps(
            {"v": "meta.k8s.io/v1", "rv": rv, "start": start + "\u0000"}, separators=(",", ":")
        )
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @staticmethod
    def _decode_continue(token: str) -> tuple[str, int]:
        try:
            raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
            return str(raw["start"]).rstrip("\u0000"), int(raw["rv"])
        except (ValueError, KeyError, TypeError):
            raise APIError(400, "continue key is not valid: illegal base64 data") from None

    @staticmethod
    def _field_view(resource: Resource, obj: Obj) -> Obj:
        if resource.group == "events.k8s.io":
            return {
                **obj,
                "regarding": obj.get("involvedObject", {}),
                "reportingController": obj.get("reportingComponent", ""),
            }
        return obj

    # ------------------------------------------------------------------ writes

    def create(
        self, resource: Resource, namespace: str, body: Obj, *, manager: str, strict: bool = False
    ) -> Obj:
        with self.lock:
            obj = self._decode(resource, body, strict=strict, ssa=False)
            meta = obj.setdefault("metadata", {})
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = meta["generateName"] + "".join(
                    random.choices(string.ascii_lowercase + string.digits, k=5)
                )
            if resource.namespaced:
                meta["namespace"] = namespace or meta.get("namespace") or "default"
                self._require_namespace(meta["namespace"])
            else:
                meta.pop("namespace", None)
            name = meta.get("name", "")
            if self.get(resource, meta.get("namespace", ""), name) is not None:
                raise already_exists(resource, name)
            meta["uid"] = str(uuid.uuid4())  # before admission, as the Job strategy needs it
            self._admit_create(resource, obj)
            obj = self._default(resource, obj)
            meta = obj["metadata"]
            self._validate(resource, obj)
            meta["creationTimestamp"] = now()
            if resource.crd or resource.kind in ("Pod", "Job"):
                meta["generation"] = 1
            self._track_update(resource, obj, None, manager)
            return self._store(resource, obj, None)

    def replace(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        body: Obj,
        *,
        manager: str,
        subresource: str = "",
    ) -> Obj:
        with self.lock:
            old = self.require(resource, namespace, name)
            obj = self._decode(resource, body, strict=False, ssa=False)
            sent_rv = (obj.get("metadata") or {}).get("resourceVersion")
            if sent_rv and sent_rv != old["metadata"]["resourceVersion"]:
                raise conflict_modified(resource, name)
            return self._write(resource, old, obj, manager=manager, subresource=subresource)

    def patch(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        content_type: str,
        body: Any,
        *,
        manager: str,
        field_manager: str = "",
        force: bool = False,
        subresource: str = "",
    ) -> tuple[Obj, bool]:
        """Returns (object, created)."""
        content_type = content_type.split(";")[0].strip()
        if content_type == "application/apply-patch+yaml":
            return self.apply(
                resource,
                namespace,
                name,
                body,
                manager=field_manager or manager,
                force=force,
                subresource=subresource,
            )
        if content_type == "application/strategic-merge-patch+json" and not resource.crd:
            content_type = "application/merge-patch+json"
        if content_type not in ("application/merge-patch+json", "application/json-patch+json"):
            raise APIError(
                415,
                "the body of the request was in an unknown format - accepted media types "
                "include: application/json-patch+json, application/merge-patch+json, "
                "application/apply-patch+yaml",
            )
        with self.lock:
            old = self.require(resource, namespace, name)
            if content_type == "application/merge-patch+json":
                if not isinstance(body, Mapping):
                    raise APIError(
                        400, "json: cannot unmarshal into Go value of type map[string]interface {}"
                    )
                sent_rv = (body.get("metadata") or {}).get("resourceVersion")
                if sent_rv and sent_rv != old["metadata"]["resourceVersion"]:
                    raise conflict_modified(resource, name)
                new = fields.json_merge_patch(self._external(resource, old), body)
            else:
                try:
                    new = fields.json_patch(self._external(resource, old), body)
                except (fields.JSONPatchError, ValueError, IndexError, KeyError, TypeError):
                    raise APIError(
                        422,
                        "the server rejected our request due to an error in our request",
                        details={},
                    ) from None
            obj = self._decode(resource, new, strict=False, ssa=False)
            return self._write(resource, old, obj, manager=manager, subresource=subresource), False

    def apply(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        body: Any,
        *,
        manager: str,
        force: bool,
        subresource: str = "",
    ) -> tuple[Obj, bool]:
        """Server-side apply with field ownership and conflicts."""
        if not isinstance(body, Mapping):
            raise APIError(400, "error decoding YAML: the body is not an object")
        with self.lock:
            config = self._decode(
                resource, dict(body), strict=False, ssa=True, name=name, namespace=namespace
            )
            old = self.get(resource, namespace, name)
            atomic = self._atomic_paths(resource)
            status_only = subresource == "status"
            applied = fields.leaf_paths(config, atomic, status=status_only)
            if old is None:
                obj: Obj = {"metadata": {"name": name}}
                if resource.namespaced:
                    obj["metadata"]["namespace"] = namespace
                    self._require_namespace(namespace)
                for path, value in applied.items():
                    fields.set_path(obj, path, value)
                obj["metadata"]["uid"] = str(uuid.uuid4())
                self._admit_create(resource, obj)
                obj = self._default(resource, obj)
                self._validate(resource, obj)
                obj["metadata"]["creationTimestamp"] = now()
                if resource.crd or resource.kind in ("Pod", "Job"):
                    obj["metadata"]["generation"] = 1
                obj["metadata"]["managedFields"] = [
                    self._entry(manager, "Apply", resource, applied.keys(), subresource)
                ]
                return self._store(resource, obj, None), True
            entries = copy.deepcopy(old["metadata"].get("managedFields") or [])
            current = fields.leaf_paths(old, atomic, status=status_only)
            conflicts: list[tuple[str, str]] = []
            conflicting: set[tuple[str, fields.Path]] = set()
            for entry in entries:
                if (entry["manager"] == manager and entry["operation"] == "Apply") or entry.get(
                    "subresource", ""
                ) != subresource:
                    continue
                owned = self._owned(entry)
                # As the API server words it: an Update manager is named with its version.
                who = f'"{entry["manager"]}"'
                if entry["operation"] == "Update":
                    who += f" using {entry.get('apiVersion', resource.api_version)}"
                for path, value in applied.items():
                    if path in owned and current.get(path, _MISSING) != value:
                        conflicts.append((who, "." + ".".join(path)))
                        conflicting.add((entry["manager"], path))
            if conflicts and not force:
                message = "; ".join(f"conflict with {m}: {p}" for m, p in conflicts)
                raise APIError(
                    409,
                    f"Apply failed with {len(conflicts)} conflict{'s' if len(conflicts) > 1 else ''}: {message}",
                    details={
                        "causes": [
                            {
                                "reason": "FieldManagerConflict",
                                "message": f"conflict with {m}",
                                "field": p,
                            }
                            for m, p in conflicts
                        ]
                    },
                )
            obj = copy.deepcopy(old)
            previous = next(
                (
                    e
                    for e in entries
                    if e["manager"] == manager
                    and e["operation"] == "Apply"
                    and e.get("subresource", "") == subresource
                ),
                None,
            )
            others: set[fields.Path] = set()
            for entry in entries:
                if entry is previous:
                    continue
                owned = self._owned(entry)
                if force and entry.get("subresource", "") == subresource:
                    # Forcing takes only the conflicting fields; equal values become shared.
                    owned -= {p for m, p in conflicting if m == entry["manager"]}
                    entry["fieldsV1"] = fields.fields_v1(owned, dots=entry["operation"] != "Apply")
                others |= owned
            if previous is not None:
                for path in self._owned(previous) - set(applied) - others:
                    fields.delete_path(obj, path)
            for path, value in applied.items():
                fields.set_path(obj, path, value)
            # The generation follows what was sent, before a webhook mutated it (Kueue's
            # turns quantities into strings: sending numbers bumps it on every apply).
            sent = self._default(resource, obj, webhooks=False)
            obj = self._default(resource, copy.deepcopy(sent))
            self._validate(resource, obj, old)
            entries = [e for e in entries if e is not previous and e.get("fieldsV1")]
            entry = self._entry(manager, "Apply", resource, applied.keys(), subresource)
            fields.drop_shared_dots(entry["fieldsV1"], [e["fieldsV1"] for e in entries])
            entries.append(entry)
            if (
                self._same(old, sent)
                and previous is not None
                and self._owned(previous) == set(applied)
            ):
                return old, False
            obj["metadata"]["managedFields"] = entries
            self._bump_generation(resource, old, obj, sent=sent)
            return self._store(resource, obj, old), False

    def delete(
        self, resource: Resource, namespace: str, name: str, *, grace_seconds: int | None = None
    ) -> Obj:
        with self.lock:
            obj = self.require(resource, namespace, name)
            if (
                resource.kind == "Pod"
                and grace_seconds != 0
                and obj["spec"].get("nodeName")
                and obj["status"].get("phase") in ("Running", "Pending")
            ):
                return self.mark_terminating(obj, grace_seconds)
            if resource.kind == "Pod" and grace_seconds == 0:
                # Stored once with its deletionTimestamp (watchers see MODIFIED, then
                # DELETED: the recorded w1 watch), then removed.
                terminated = copy.deepcopy(obj)
                meta = terminated["metadata"]
                meta["deletionTimestamp"] = now()
                meta["deletionGracePeriodSeconds"] = 0
                meta["generation"] = meta.get("generation", 1) + 1
                self._store(resource, terminated, obj)
                self._remove(resource, terminated)
                return terminated
            if resource.kind == "Namespace":
                for other in RESOURCES:
                    if other.namespaced and other.group != "events.k8s.io":
                        for child in list(self.table(other).objects.values()):
                            if child["metadata"].get("namespace") == name:
                                self._remove(other, child)
            self._remove(resource, obj)
            return obj

    def mark_terminating(self, pod: Obj, grace_seconds: int | None, *, reason: str = "") -> Obj:
        grace = 30 if grace_seconds is None else grace_seconds
        if grace is None:
            grace = int(pod["spec"].get("terminationGracePeriodSeconds", 30))
        new = copy.deepcopy(pod)
        meta = new["metadata"]
        if "deletionTimestamp" not in meta:
            deadline = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=grace)
            meta["deletionTimestamp"] = deadline.strftime("%Y-%m-%dT%H:%M:%SZ")
            meta["deletionGracePeriodSeconds"] = grace
            meta["generation"] = meta.get("generation", 1) + 1
        if reason:
            conditions = [
                c for c in new["status"].get("conditions", []) if c["type"] != "DisruptionTarget"
            ]
            conditions.append(
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": now(),
                    "reason": reason,
                    "message": "Eviction API: evicting",
                }
            )
            new["status"]["conditions"] = conditions
        return self._store(find("", "v1", "pods"), new, pod)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ internals

    def _write(
        self, resource: Resource, old: Obj, obj: Obj, *, manager: str, subresource: str
    ) -> Obj:
        meta = obj.setdefault("metadata", {})
        for key in (
            "uid",
            "creationTimestamp",
            "generation",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "namespace",
            "name",
        ):
            if key in old["metadata"]:
                meta[key] = old["metadata"][key]
            else:
                meta.pop(key, None)
        if subresource == "status":
            merged = copy.deepcopy(old)
            merged["status"] = obj.get("status", {})
            obj = merged
        elif "status" in old and resource.kind not in ("Namespace",):
            obj["status"] = copy.deepcopy(old["status"])
        sent = self._default(resource, obj, webhooks=False)
        obj = self._default(resource, copy.deepcopy(sent))
        self._validate(resource, obj, old)
        if self._same(old, sent):
            return old
        meta = obj["metadata"]
        meta["managedFields"] = copy.deepcopy(old["metadata"].get("managedFields") or [])
        self._track_update(resource, obj, old, manager, subresource)
        self._bump_generation(resource, old, obj, sent=sent)
        return self._store(resource, obj, old)

    @staticmethod
    def _same(old: Obj, new: Obj) -> bool:
        strip = ("resourceVersion", "managedFields")
        a = {**old, "metadata": {k: v for k, v in old["metadata"].items() if k not in strip}}
        b = {**new, "metadata": {k: v for k, v in new["metadata"].items() if k not in strip}}
        return a == b

    @staticmethod
    def _bump_generation(
        resource: Resource, old: Obj, new: Obj, *, sent: Obj | None = None
    ) -> None:
        """One more when the spec changed; ``sent`` is the object before mutating webhooks."""
        if "generation" not in old["metadata"]:
            return
        compared = sent if sent is not None else new
        changed = any(
            old.get(k) != compared.get(k) for k in compared if k not in ("metadata", "status")
        ) or old["metadata"].get("deletionTimestamp") != new["metadata"].get("deletionTimestamp")
        new["metadata"]["generation"] = old["metadata"]["generation"] + (1 if changed else 0)

    def _track_update(
        self, resource: Resource, obj: Obj, old: Obj | None, manager: str, subresource: str = ""
    ) -> None:
        """Give ``manager`` (an Update) the fields it changed; others lose them."""
        status = subresource == "status"
        new_paths = fields.leaf_paths(obj, status=status)
        old_paths = fields.leaf_paths(old, status=status) if old is not None else {}
        changed = {p for p, v in new_paths.items() if old_paths.get(p, _MISSING) != v}
        if not changed:
            return
        entries = obj["metadata"].get("managedFields") or []
        kept = []
        mine: set[fields.Path] = set()
        for entry in entries:
            owned = self._owned(entry)
            if (
                entry["manager"] == manager
                and entry["operation"] == "Update"
                and entry.get("subresource", "") == subresource
            ):
                mine = owned
                continue
            if entry.get("subresource", "") == subresource:
                owned -= changed
                entry["fieldsV1"] = fields.fields_v1(owned, dots=entry["operation"] != "Apply")
            if owned:
                kept.append(entry)
        mine = (mine | changed) & set(new_paths)
        tree = fields.fields_v1(mine)
        fields.drop_shared_dots(tree, [e["fieldsV1"] for e in kept])
        kept.append(
            {
                "manager": manager,
                "operation": "Update",
                "apiVersion": resource.api_version,
                "time": now(),
                "fieldsType": "FieldsV1",
                "fieldsV1": tree,
                **({"subresource": subresource} if subresource else {}),
            }
        )
        obj["metadata"]["managedFields"] = kept

    @staticmethod
    def _owned(entry: Mapping[str, Any]) -> set[fields.Path]:
        out: set[fields.Path] = set()

        def walk(node: Mapping[str, Any], path: fields.Path) -> None:
            children = [k for k in node if k.startswith("f:")]
            if not children:
                out.add(path)
            for key in children:
                walk(node[key], (*path, key[2:]))

        walk(entry.get("fieldsV1") or {}, ())
        out.discard(())
        return out

    @staticmethod
    def _entry(
        manager: str,
        operation: str,
        resource: Resource,
        paths: Iterable[fields.Path],
        subresource: str,
    ) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "manager": manager,
            "operation": operation,
            "apiVersion": resource.api_version,
            "time": now(),
            "fieldsType": "FieldsV1",
            "fieldsV1": fields.fields_v1(set(paths), dots=operation != "Apply"),
        }
        if subresource:
            entry["subresource"] = subresource
        return entry

    @staticmethod
    def _atomic_paths(resource: Resource) -> set[fields.Path]:
        if resource.kind == "ResourceFlavor":
            return {("spec", "nodeLabels")}
        if resource.kind == "ClusterQueue":
            return {("spec", "namespaceSelector")}
        return set()

    def _require_namespace(self, namespace: str) -> None:
        ns_resource = find("", "v1", "namespaces")
        assert ns_resource is not None
        if self.get(ns_resource, "", namespace) is None:
            raise not_found(ns_resource, namespace)

    def _external(self, resource: Resource, obj: Obj) -> Obj:
        return {"apiVersion": resource.api_version, "kind": resource.kind, **copy.deepcopy(obj)}

    def _decode(
        self,
        resource: Resource,
        body: Obj,
        *,
        strict: bool,
        ssa: bool,
        name: str = "",
        namespace: str = "",
    ) -> Obj:
        """Parse a request body into a storable object (prune CRD fields, check quantities)."""
        if not isinstance(body, Mapping):
            raise APIError(
                400,
                f'{resource.kind} in version "{resource.version}" cannot be '
                f"handled as a {resource.kind}: expected an object",
            )
        obj = copy.deepcopy(dict(body))
        version = (obj.pop("apiVersion", "") or resource.api_version).rpartition("/")[2]
        obj.pop("kind", None)
        obj.setdefault("metadata", {})
        if resource.crd:
            if resource.kind == "ClusterQueue" and version == "v1beta1":
                spec = obj.get("spec") or {}
                if "cohort" in spec:
                    spec["cohortName"] = spec.pop("cohort")
                # Kueue's conversion: the deprecated old names become the new one.
                fungibility = spec.get("flavorFungibility") or {}
                for key, old in (("whenCanBorrow", "Borrow"), ("whenCanPreempt", "Preempt")):
                    if fungibility.get(key) == old:
                        fungibility[key] = "MayStopSearch"
            node = crd.schema(resource.group, resource.kind, resource.version)
            if node is not None:
                unknown: list[str] = []
                obj = crd.prune(obj, node, "", unknown)
                if unknown and ssa:
                    ident = f"{namespace + '/' if namespace else ''}{name}"
                    raise APIError(
                        500,
                        f"failed to create typed patch object ({ident}; {resource.api_version}, "
                        f"Kind={resource.kind}): .{unknown[0]}: field not declared in schema",
                        reason="",
                    )
                if unknown and strict:
                    raise APIError(
                        400,
                        f'{resource.kind} in version "{resource.version}" cannot be handled as a '
                        f"{resource.kind}: strict decoding error: "
                        + ", ".join(f'unknown field "{u}"' for u in unknown),
                    )
                if unknown:
                    self.warnings.items = [f'unknown field "{u}"' for u in unknown]
        for path in _RESOURCE_LISTS.get(resource.kind, []):
            found, values = fields.get_path(obj, path)
            if found and isinstance(values, Mapping):
                try:
                    fields.set_path(
                        obj, path, {k: quantity.canonical(v) for k, v in values.items()}
                    )
                except quantity.QuantityError:
                    raise APIError(
                        400,
                        f'{resource.kind} in version "{resource.version}" cannot be handled as a '
                        f"{resource.kind}: quantities must match the regular expression "
                        f"'{quantity.PATTERN}'",
                    ) from None
        if resource.kind == "Pod":
            for container in (obj.get("spec") or {}).get("containers", []):
                resources = container.get("resources") or {}
                for kind in ("limits", "requests"):
                    if kind in resources:
                        try:
                            resources[kind] = {
                                k: quantity.canonical(v) for k, v in resources[kind].items()
                            }
                        except quantity.QuantityError:
                            raise APIError(
                                400,
                                f'Pod in version "v1" cannot be handled as a Pod: quantities '
                                f"must match the regular expression '{quantity.PATTERN}'",
                            ) from None
        return obj

    def _default(self, resource: Resource, obj: Obj, *, webhooks: bool = True) -> Obj:
        """The API server's defaulting, then (``webhooks``) Kueue's mutating webhook."""
        if resource.kind == "PriorityClass":
            # As the real server stores it: `globalDefault` is omitempty (false is dropped)
            # and `preemptionPolicy` defaults to PreemptLowerPriority.
            if obj.get("globalDefault") is False:
                obj = {key: value for key, value in obj.items() if key != "globalDefault"}
            obj.setdefault("preemptionPolicy", "PreemptLowerPriority")
        if resource.kind == "LimitRange":
            obj = limitranger.stored(copy.deepcopy(obj))
        if resource.crd:
            node = crd.schema(resource.group, resource.kind, resource.version)
            if node is not None:
                obj = crd.apply_defaults(obj, node)
        if (
            webhooks
            and resource.group == "kueue.x-k8s.io"
            and resource.kind in ("ClusterQueue", "Cohort")
        ):
            obj = kueue_quantities_as_strings(obj)
        return obj

    def _validate(self, resource: Resource, obj: Obj, old: Obj | None = None) -> None:
        meta = obj["metadata"]
        name = meta.get("name", "")
        causes: list[dict[str, str]] = []
        if not name:
            causes.append(
                {
                    "reason": "FieldValueRequired",
                    "message": "Required value: name or generateName is required",
                    "field": "metadata.name",
                }
            )
        elif resource.kind == "Namespace":
            if not _DNS_LABEL.match(name) or len(name) > 63:
                causes.append(
                    {
                        "reason": "FieldValueInvalid",
                        "message": f'Invalid value: "{name}": {LABEL_MSG}',
                        "field": "metadata.name",
                    }
                )
        elif not _DNS_SUBDOMAIN.match(name) or len(name) > 253:
            causes.append(
                {
                    "reason": "FieldValueInvalid",
                    "message": f'Invalid value: "{name}": {SUBDOMAIN_MSG}',
                    "field": "metadata.name",
                }
            )
        for value in (meta.get("labels") or {}).values():
            if not isinstance(value, str) or not _LABEL_VALUE.match(value) or len(value) > 63:
                causes.append(
                    {
                        "reason": "FieldValueInvalid",
                        "message": f'Invalid value: "{value}": {LABEL_VALUE_MSG}',
                        "field": "metadata.labels",
                    }
                )
        if resource.kind == "ResourceQuota":
            for key, value in ((obj.get("spec") or {}).get("hard") or {}).items():
                if quantity.parse(value) < 0:
                    causes.append(
                        {
                            "reason": "FieldValueInvalid",
                            "message": f'Invalid value: "{value}": must be greater than or equal to 0',
                            "field": f"spec.hard[{key}]",
                        }
                    )
        if resource.crd:
            node = crd.schema(resource.group, resource.kind, resource.version)
            if node is not None:
                crd.validate(obj, node, "", causes)
                if causes:
                    causes.append(
                        {
                            "reason": "FieldValueInvalid",
                            "message": "Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
                            "field": "<nil>",
                        }
                    )
                else:
                    causes.extend(crd.cel_causes(resource.kind, obj, old))
        if causes:
            raise invalid(resource, name, causes)
        if old is not None and not causes:
            for hook in self.update_admission:
                hook(resource, old, obj)

    def _admit_create(self, resource: Resource, obj: Obj) -> None:
        """Defaulting and admission that run on create (namespaces, pods)."""
        if resource.kind == "Namespace":
            obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj[
                "metadata"
            ]["name"]
            obj.setdefault("spec", {})["finalizers"] = ["kubernetes"]
            obj["status"] = {"phase": "Active"}
        for hook in self.admission:
            hook(resource, obj)

    def output(self, resource: Resource, obj: Obj, version: str | None = None) -> Obj:
        """A stored object as the client sees it (kind/apiVersion first; version conversions)."""
        version = version or resource.version
        api_version = f"{resource.group}/{version}" if resource.group else version
        out = {"kind": resource.kind, "apiVersion": api_version, **obj}
        if (
            resource.kind == "ClusterQueue"
            and version == "v1beta1"
            and "cohortName" in obj.get("spec", {})
        ):
            spec = dict(obj["spec"])
            spec["cohort"] = spec.pop("cohortName")
            out["spec"] = spec
        if resource.group == "events.k8s.io":
            out = events_v1(obj)
        return out

    def list_item(self, resource: Resource, obj: Obj, version: str) -> Obj:
        if resource.group == "events.k8s.io":
            out = events_v1(obj)
            out.pop("kind"), out.pop("apiVersion")
            return out
        if (
            resource.kind == "ClusterQueue"
            and version == "v1beta1"
            and "cohortName" in obj.get("spec", {})
        ):
            spec = dict(obj["spec"])
            spec["cohort"] = spec.pop("cohortName")
            return {**obj, "spec": spec}
        return obj


_MISSING = object()


def events_v1(obj: Obj) -> Obj:
    """A core Event in its events.k8s.io/v1 shape."""
    return {
        "kind": "Event",
        "apiVersion": "events.k8s.io/v1",
        "metadata": obj["metadata"],
        "eventTime": obj.get("eventTime"),
        "reportingController": obj.get("reportingComponent", ""),
        "reportingInstance": obj.get("reportingInstance", ""),
        "action": obj.get("action", ""),
        "reason": obj.get("reason", ""),
        "regarding": obj.get("involvedObject", {}),
        "note": obj.get("message", ""),
        "type": obj.get("type", ""),
        "deprecatedSource": obj.get("source", {}),
        "deprecatedFirstTimestamp": obj.get("firstTimestamp"),
        "deprecatedLastTimestamp": obj.get("lastTimestamp"),
        **({"series": obj["series"]} if "series" in obj else {}),
    }


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def kueue_quantities_as_strings(obj: Obj) -> Obj:
    """As Kueue's webhook stores a ClusterQueue or Cohort (Go's resource.Quantity): every
    quota and the fair-sharing weight a string, e.g. ``8`` becomes ``"8"`` (the recordings
    of real Kueue in tests/data/kueue-samples show them so)."""
    obj = copy.deepcopy(obj)
    spec = obj.get("spec") or {}
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for quota in flavor.get("resources") or []:
                for key in ("nominalQuota", "borrowingLimit", "lendingLimit"):
                    if _number(quota.get(key)):
                        quota[key] = str(quota[key])
    fair = spec.get("fairSharing") or {}
    if _number(fair.get("weight")):
        fair["weight"] = str(fair["weight"])
    return obj
