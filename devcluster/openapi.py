"""The demo cluster's OpenAPI documents: ``/openapi/v2``, the ``/openapi/v3`` index and one
v3 document per group version, as kube-apiserver serves them.

Core kinds come from the Kubernetes 1.36 schemas the portal's tests validate manifests
against (``data/kubernetes-definitions.json``, the part of kubernetes-validate's
definitions the served kinds need; ``trim`` makes it, and a test checks it is unchanged);
Kueue and Volcano kinds from the vendored CRDs. Every kind schema carries
``x-kubernetes-group-version-kind``, and every PATCH operation declares the
``fieldValidation`` parameter, so ``kubectl apply`` leaves validation to the server (as it
does against a real one) and ``kubectl explain`` finds each kind. Documents are built on
first request and cached; a v3 document's URL carries its SHA-512 (``?hash=``).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from devcluster import crd
from devcluster.resources import RESOURCES, Resource

DATA = Path(__file__).resolve().parent / "data" / "kubernetes-definitions.json"
META = "io.k8s.apimachinery.pkg.apis.meta.v1."
# The definitions the served core kinds need (with everything they reference).
META_ROOTS = (
    f"{META}ObjectMeta",
    f"{META}ListMeta",
    f"{META}Status",
    f"{META}DeleteOptions",
    f"{META}Patch",
    f"{META}WatchEvent",
)
EXTRA_ROOTS = ("io.k8s.api.policy.v1.Eviction", "io.k8s.api.core.v1.Binding")
_REF = re.compile(r"#/\$defs/([A-Za-z0-9_.-]+)")


def definition_name(resource: Resource, kind: str = "") -> str:
    """``io.k8s.api.core.v1.Pod``; a CRD's kinds are named by its reversed group
    (``io.x-k8s.kueue.v1beta2.ClusterQueue``), as the API server names them."""
    kind = kind or resource.kind
    if resource.crd:
        return f"{'.'.join(reversed(resource.group.split('.')))}.{resource.version}.{kind}"
    prefix = resource.group.split(".")[0] if resource.group else "core"
    return f"io.k8s.api.{prefix}.{resource.version}.{kind}"


def core_roots() -> list[str]:
    roots = []
    for resource in RESOURCES:
        if not resource.crd:
            roots += [definition_name(resource), definition_name(resource, f"{resource.kind}List")]
    return sorted({*roots, *META_ROOTS, *EXTRA_ROOTS})


def trim(definitions: dict[str, Any], roots: Iterable[str]) -> dict[str, Any]:
    """The ``roots`` of a ``$defs`` mapping and every definition they reference."""
    kept: dict[str, Any] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in kept:
            continue
        kept[name] = definitions[name]
        todo += _REF.findall(json.dumps(definitions[name]))
    return dict(sorted(kept.items()))


@functools.cache
def _core() -> dict[str, Any]:
    return dict(json.loads(DATA.read_text())["definitions"])


def field_description(definition: str, field: str) -> str:
    """The description of one field of a core definition (for Table columns)."""
    node = _core().get(definition, {}).get("properties", {}).get(field, {})
    return str(node.get("description", ""))


def _convert(node: Any, ref: str, v3: bool, key: str = "") -> Any:
    """A JSON-schema definition (``type: [object, "null"]``, ``$defs`` refs) in OpenAPI form."""
    if isinstance(node, list):
        return [_convert(item, ref, v3) for item in node]
    if not isinstance(node, dict):
        return node
    if not v3 and "oneOf" in node:  # Quantity, IntOrString: strings in v2
        out = {k: v for k, v in node.items() if k != "oneOf"}
        types = {t for branch in node["oneOf"] for t in _types(branch)}
        return {
            **out,
            "type": "string",
            **({"format": "int-or-string"} if "integer" in types else {}),
        }
    out: dict[str, Any] = {}
    for name, value in node.items():
        if name == "$ref":
            out["$ref"] = ref + value.rpartition("/")[2]
        elif name == "type" and isinstance(value, list):
            out["type"] = next(t for t in value if t != "null")
        elif name == "enum" and key in ("apiVersion", "kind"):
            continue
        elif name == "properties":
            out[name] = {k: _convert(v, ref, v3, k) for k, v in value.items()}
        else:
            out[name] = _convert(value, ref, v3)
    if v3 and "$ref" in out and len(out) > 1:
        out = {"allOf": [{"$ref": out.pop("$ref")}], **out}
    if v3 and "oneOf" in out and "integer" in {t for b in out["oneOf"] for t in _types(b)}:
        out["format"] = "int-or-string"
    return out


def _types(node: Any) -> list[str]:
    value = node.get("type", []) if isinstance(node, dict) else []
    return [value] if isinstance(value, str) else list(value)


def _crd_schema(resource: Resource, version: str, ref: str, v3: bool) -> dict[str, Any]:
    entry = crd.version(resource.group, resource.kind, version)
    node = entry["schema"]["openAPIV3Schema"] if entry else None
    schema: dict[str, Any] = copy.deepcopy(node) if node else {"type": "object"}
    if node is None:
        schema["x-kubernetes-preserve-unknown-fields"] = True
    props = schema.setdefault("properties", {})
    props.setdefault("apiVersion", _core_prop("apiVersion"))
    props.setdefault("kind", _core_prop("kind"))
    meta = {"$ref": f"{ref}{META}ObjectMeta"}
    props["metadata"] = {"allOf": [meta]} if v3 else meta
    if not v3:
        schema = _v2_compatible(schema)
    schema["x-kubernetes-group-version-kind"] = [
        {"group": resource.group, "kind": resource.kind, "version": version}
    ]
    return schema


def _core_prop(name: str) -> dict[str, Any]:
    prop = _core()["io.k8s.api.core.v1.Pod"]["properties"][name]
    return {"description": prop["description"], "type": "string"}


def _v2_compatible(node: Any) -> Any:
    """OpenAPI v2 knows no ``anyOf``/``oneOf``/``not``/``nullable``: drop them."""
    if isinstance(node, list):
        return [_v2_compatible(item) for item in node]
    if not isinstance(node, dict):
        return node
    return {
        k: _v2_compatible(v)
        for k, v in node.items()
        if k not in ("anyOf", "oneOf", "not", "nullable")
    }


def _list_schema(resource: Resource, version: str, ref: str, v3: bool) -> dict[str, Any]:
    item = {"$ref": ref + definition_name(resource).replace(resource.version, version, 1)}
    meta = {"$ref": f"{ref}{META}ListMeta"}
    return {
        "description": f"{resource.kind}List is a list of {resource.kind}",
        "properties": {
            "apiVersion": _core_prop("apiVersion"),
            "items": {"items": item, "type": "array"},
            "kind": _core_prop("kind"),
            "metadata": {"allOf": [meta]} if v3 else meta,
        },
        "required": ["items"],
        "type": "object",
        "x-kubernetes-group-version-kind": [
            {"group": resource.group, "kind": f"{resource.kind}List", "version": version}
        ],
    }


def _served(group: str, version: str) -> list[Resource]:
    return [r for r in RESOURCES if r.group == group and version in (r.version, *r.other_versions)]


def _schemas(group: str, version: str, v3: bool) -> dict[str, Any]:
    """The component schemas of one group version (all served ones for ``group=None``)."""
    ref = "#/components/schemas/" if v3 else "#/definitions/"
    core = _core()
    resources = _served(group, version)
    names = [f"{META}{n}" for n in ("ObjectMeta", "ListMeta", "Status", "DeleteOptions", "Patch")]
    out: dict[str, Any] = {}
    for resource in resources:
        if not resource.crd:
            names += [definition_name(resource), definition_name(resource, f"{resource.kind}List")]
            continue
        base = definition_name(resource).replace(f".{resource.version}.", f".{version}.")
        out[base] = _crd_schema(resource, version, ref, v3)
        out[f"{base}List"] = _list_schema(resource, version, ref, v3)
    if group == "policy":
        names += EXTRA_ROOTS[:1]
    if group == "" and version == "v1":
        names += EXTRA_ROOTS[1:]
    for name, node in trim(core, names).items():
        out[name] = _convert(node, ref, v3)
    return dict(sorted(out.items()))


def _paths(group: str, version: str, v3: bool) -> dict[str, Any]:
    """Each served resource's collection and item paths, with the operations kubectl reads
    (their GVK extension, and ``fieldValidation`` on writes)."""
    prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
    ref = "#/components/schemas/" if v3 else "#/definitions/"
    paths: dict[str, Any] = {}
    for resource in _served(group, version):
        base = definition_name(resource).replace(f".{resource.version}.", f".{version}.")
        gvk = {"group": resource.group, "kind": resource.kind, "version": version}
        ns = "/namespaces/{namespace}" if resource.namespaced else ""
        collection = f"{prefix}{ns}/{resource.plural}"
        paths[collection] = {
            "get": _operation("list", resource, gvk, f"{ref}{base}List", v3, ()),
            "post": _operation("post", resource, gvk, ref + base, v3, _WRITE),
        }
        paths[f"{collection}/{{name}}"] = {
            "get": _operation("get", resource, gvk, ref + base, v3, ()),
            "put": _operation("put", resource, gvk, ref + base, v3, _WRITE),
            "patch": _operation("patch", resource, gvk, ref + base, v3, (*_WRITE, "force")),
            "delete": _operation("delete", resource, gvk, f"{ref}{META}Status", v3, ("dryRun",)),
        }
    return paths


_WRITE = ("dryRun", "fieldManager", "fieldValidation")
_PARAMS = {
    "dryRun": "When present, indicates that modifications should not be persisted.",
    "fieldManager": "fieldManager is a name associated with the actor or entity that is making these changes.",
    "fieldValidation": "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore - Warn - Strict",
    "force": 'Force is going to "force" Apply requests. It means user will re-acquire conflicting fields owned by other people.',
}


def _operation(
    action: str,
    resource: Resource,
    gvk: dict[str, str],
    schema_ref: str,
    v3: bool,
    params: tuple[str, ...],
) -> dict[str, Any]:
    verb = {"list": "list", "post": "create", "get": "read", "put": "replace"}.get(action, action)
    kind = resource.kind + ("List" if action == "list" else "")
    parameters = []
    for name in params:
        schema = {"type": "boolean" if name == "force" else "string", "uniqueItems": True}
        param = {"name": name, "in": "query", "description": _PARAMS[name]}
        parameters.append({**param, "schema": schema} if v3 else {**param, **schema})
    schema = {"$ref": schema_ref}
    response = (
        {"description": "OK", "content": {"application/json": {"schema": schema}}}
        if v3
        else {"description": "OK", "schema": schema}
    )
    operation: dict[str, Any] = {
        "description": f"{verb} the specified {resource.kind}",
        "operationId": f"{verb}{kind}",
        "parameters": parameters,
        "responses": {"200": response},
        "x-kubernetes-action": {"list": "list", "post": "post"}.get(action, action),
        "x-kubernetes-group-version-kind": gvk,
    }
    if v3 and action == "patch":
        # The patch types the server accepts; custom resources take no strategic merge.
        types = ["application/apply-patch+yaml", "application/json-patch+json"]
        types += ["application/merge-patch+json"]
        if not resource.crd:
            types.append("application/strategic-merge-patch+json")
        body = {"schema": {"$ref": f"#/components/schemas/{META}Patch"}}
        operation["requestBody"] = {"content": dict.fromkeys(types, body), "required": True}
    return operation


def _group_versions() -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    for resource in RESOURCES:
        for version in (resource.version, *resource.other_versions):
            if (resource.group, version) not in seen:
                seen.append((resource.group, version))
    return seen


def gv_path(group: str, version: str) -> str:
    """The v3 index key: ``api/v1``, ``apis/kueue.x-k8s.io/v1beta2``."""
    return f"apis/{group}/{version}" if group else f"api/{version}"


@functools.cache
def v3_document(path: str) -> tuple[bytes, str] | None:
    """One group version's v3 document and its hash (``path`` as in the index)."""
    for group, version in _group_versions():
        if gv_path(group, version) == path:
            document = {
                "openapi": "3.0.0",
                "info": {"title": "Kubernetes", "version": "v1.36.2"},
                "paths": _paths(group, version, True),
                "components": {"schemas": _schemas(group, version, True)},
            }
            body = orjson.dumps(document)
            return body, hashlib.sha512(body).hexdigest().upper()
    return None


@functools.cache
def v3_index() -> bytes:
    paths = {}
    for group, version in _group_versions():
        path = gv_path(group, version)
        found = v3_document(path)
        assert found is not None
        paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={found[1]}"}
    return orjson.dumps({"paths": dict(sorted(paths.items()))})


@functools.cache
def v2_document() -> bytes:
    definitions: dict[str, Any] = {}
    paths: dict[str, Any] = {}
    for group, version in _group_versions():
        definitions.update(_schemas(group, version, False))
        paths.update(_paths(group, version, False))
    document = {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.36.2"},
        "paths": dict(sorted(paths.items())),
        "definitions": dict(sorted(definitions.items())),
        "securityDefinitions": {
            "BearerToken": {
                "description": "Bearer Token authentication",
                "in": "header",
                "name": "authorization",
                "type": "apiKey",
            }
        },
        "security": [{"BearerToken": []}],
    }
    return orjson.dumps(document)


def unknown_fields(resource: Resource, obj: Any) -> list[str]:
    """The paths of fields a core kind's schema does not declare (``spec.containers[0].x``),
    as the API server's strict decoding lists them."""
    core = _core()
    found: list[str] = []
    _walk_unknown(obj, core.get(definition_name(resource), {}), "", core, found)
    return found


def _walk_unknown(
    obj: Any, node: dict[str, Any], path: str, core: dict[str, Any], found: list[str]
) -> None:
    if "$ref" in node:
        node = core[node["$ref"].rpartition("/")[2]]
    if isinstance(obj, dict):
        props = node.get("properties")
        extra = node.get("additionalProperties")
        for key, value in obj.items():
            child = f"{path}.{key}" if path else key
            if props is not None and key in props:
                _walk_unknown(value, props[key], child, core, found)
            elif props is None and isinstance(extra, dict):
                _walk_unknown(value, extra, child, core, found)
            elif props is not None and not node.get("x-kubernetes-preserve-unknown-fields"):
                found.append(child)
    elif isinstance(obj, list) and isinstance(node.get("items"), dict):
        for index, item in enumerate(obj):
            _walk_unknown(item, node["items"], f"{path}[{index}]", core, found)
