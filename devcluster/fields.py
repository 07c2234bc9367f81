"""Field ownership for server-side apply: leaf paths, fieldsV1, merge and JSON patches.

Simplifications against a real API server, chosen to keep the behaviour the portal relies on:
lists are atomic (owned and replaced as a whole), maps are granular except those a CRD
schema marks ``x-kubernetes-map-type: atomic``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

Path = tuple[str, ...]

# Never owned: identity and server-managed metadata.
_SKIP_TOP = {"apiVersion", "kind", "status"}
_SKIP_META = {
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
}


def leaf_paths(
    obj: Mapping[str, Any], atomic: set[Path] | None = None, *, status: bool = False
) -> dict[Path, Any]:
    """Leaf path -> value for the fields a manager would own in ``obj``."""
    atomic = atomic or set()
    out: dict[Path, Any] = {}

    def walk(node: Any, path: Path) -> None:
        if isinstance(node, Mapping) and node and path not in atomic:
            for key, value in node.items():
                walk(value, (*path, key))
        else:
            out[path] = node

    for key, value in obj.items():
        if status:
            if key == "status":
                walk(value, ("status",))
            continue
        if key in _SKIP_TOP:
            continue
        if key == "metadata":
            for mkey, mvalue in value.items():
                if mkey not in _SKIP_META:
                    walk(mvalue, ("metadata", mkey))
            continue
        walk(value, (key,))
    return out


def get_path(obj: Any, path: Path) -> tuple[bool, Any]:
    node = obj
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def set_path(obj: dict[str, Any], path: Path, value: Any) -> None:
    node = obj
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[path[-1]] = copy.deepcopy(value)


def delete_path(obj: dict[str, Any], path: Path) -> None:
    """Remove a leaf and any maps it leaves empty."""
    trail: list[tuple[dict[str, Any], str]] = []
    node: Any = obj
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return
        trail.append((node, part))
        node = node[part]
    parent, key = trail.pop()
    del parent[key]
    while trail:
        parent, key = trail.pop()
        if parent[key] == {} and len(trail) >= 1:
            del parent[key]
        else:
            break


def fields_v1(
    paths: Iterator[Path] | list[Path] | set[Path], *, dots: bool = True
) -> dict[str, Any]:
    """The ``fieldsV1`` tree of a set of leaf paths (``{"f:spec": {"f:hard": {...}}}``).

    Update entries mark the maps they own with ``"."``; Apply entries list leaves only.
    """
    tree: dict[str, Any] = {}
    for path in sorted(paths):
        node = tree
        for depth, part in enumerate(path):
            node = node.setdefault(f"f:{part}", {})
            if dots and depth < len(path) - 1:
                node.setdefault(".", {})
    _drop_top_dots(tree)
    return tree


def _drop_top_dots(tree: dict[str, Any]) -> None:
    for value in tree.values():
        if isinstance(value, dict):
            value.pop(".", None)


def drop_shared_dots(tree: dict[str, Any], others: list[dict[str, Any]]) -> None:
    """A map node ('.') belongs to the manager that created it; later owners share only leaves."""

    def owned_dot(other: dict[str, Any], path: list[str]) -> bool:
        node: Any = other
        for part in path:
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        return isinstance(node, dict) and "." in node

    def walk(node: dict[str, Any], path: list[str]) -> None:
        if "." in node and any(owned_dot(o, path) for o in others):
            del node["."]
        for key, child in node.items():
            if key != "." and isinstance(child, dict):
                walk(child, [*path, key])

    walk(tree, [])


def json_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = json_merge_patch(result.get(key), value)
    return result


class JSONPatchError(ValueError):
    pass


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise JSONPatchError(f"invalid pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 (add, remove, replace, test, copy, move)."""
    if not isinstance(operations, list):
        raise JSONPatchError("a JSON patch is a list of operations")
    doc = copy.deepcopy(target)

    def parent_of(parts: list[str]) -> tuple[Any, str]:
        node = doc
        for part in parts[:-1]:
            if isinstance(node, list):
                node = node[int(part)]
            elif isinstance(node, dict) and part in node:
                node = node[part]
            else:
                raise JSONPatchError("missing path")
        return node, parts[-1]

    def read(parts: list[str]) -> Any:
        node = doc
        for part in parts:
            if isinstance(node, list):
                node = node[int(part)]
            elif isinstance(node, dict) and part in node:
                node = node[part]
            else:
                raise JSONPatchError("missing path")
        return node

    for op in operations:
        kind, parts = op.get("op"), _pointer(op.get("path", ""))
        if kind == "test":
            if read(parts) != op.get("value"):
                raise JSONPatchError("test failed")
            continue
        if kind in ("copy", "move"):
            value = copy.deepcopy(read(_pointer(op["from"])))
            if kind == "move":
                holder, key = parent_of(_pointer(op["from"]))
                holder.pop(int(key)) if isinstance(holder, list) else holder.pop(key)
            kind, op = "add", {"value": value}
        holder, key = parent_of(parts)
        if kind == "add":
            if isinstance(holder, list):
                holder.insert(len(holder) if key == "-" else int(key), copy.deepcopy(op["value"]))
            else:
                holder[key] = copy.deepcopy(op["value"])
        elif kind == "remove":
            if isinstance(holder, list):
                holder.pop(int(key))
            elif key in holder:
                del holder[key]
            else:
                raise JSONPatchError("missing path")
        elif kind == "replace":
            if isinstance(holder, dict) and key not in holder:
                raise JSONPatchError("missing path")
            holder[int(key) if isinstance(holder, list) else key] = copy.deepcopy(op["value"])
        else:
            raise JSONPatchError(f"unknown op {kind!r}")
    return doc
