"""Label and field selectors, parsed like the API server parses them."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


class SelectorError(ValueError):
    """The selector text does not parse; the message is the API server's."""


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # =, !=, in, notin, exists, !
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        value = labels.get(self.key)
        if self.op in ("=", "in"):
            return present and value in self.values
        # != and notin match objects without the label too.
        return not present or value not in self.values


_TOKEN = re.compile(r"\s*(!=|==|=|!|,|\(|\)|[^\s!=,()]+)")


def _tokens(text: str) -> list[str]:
    tokens: list[str] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match:
            break
        tokens.append(match.group(1))
        pos = match.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return tokens


def parse_label_selector(text: str) -> list[Requirement]:
    """``a=b,c!=d,e in (f,g),h notin (i),j,!k``; raises :class:`SelectorError`."""
    tokens = _tokens(text)
    requirements: list[Requirement] = []
    i = 0

    def expect_end_or_comma(at: int) -> None:
        if at < len(tokens) and tokens[at] != ",":
            raise SelectorError(f"found '{tokens[at]}', expected: ',' or 'end of string'")

    while i < len(tokens):
        token = tokens[i]
        if token == "!":
            if i + 1 >= len(tokens):
                raise SelectorError("found '', expected: identifier after '!'")
            requirements.append(Requirement(tokens[i + 1], "!"))
            i += 2
        else:
            key = token
            op = tokens[i + 1] if i + 1 < len(tokens) else ""
            if op in ("=", "==", "!="):
                value = tokens[i + 2] if i + 2 < len(tokens) and tokens[i + 2] != "," else ""
                requirements.append(Requirement(key, "!=" if op == "!=" else "=", (value,)))
                i += 3 if value else 2
            elif op in ("in", "notin"):
                if i + 2 >= len(tokens) or tokens[i + 2] != "(":
                    raise SelectorError("found '', expected: '('")
                j, values = i + 3, []
                while j < len(tokens) and tokens[j] != ")":
                    if tokens[j] != ",":
                        values.append(tokens[j])
                    j += 1
                if j >= len(tokens):
                    raise SelectorError("found '', expected: ')'")
                requirements.append(Requirement(key, op, tuple(values)))
                i = j + 1
            else:
                requirements.append(Requirement(key, "exists"))
                i += 1
        expect_end_or_comma(i)
        i += 1
    return requirements


def _get(obj: Mapping[str, Any], dotted: str) -> Any:
    node: Any = obj
    for part in dotted.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


def field_value(obj: Mapping[str, Any], field: str) -> str:
    value = _get(obj, field)
    if isinstance(value, bool):
        return "true" if value else "false"
    if field == "source" and isinstance(value, Mapping):
        return str(value.get("component", ""))
    return "" if value is None else str(value)


def parse_field_selector(
    text: str, supported: tuple[str, ...]
) -> Callable[[Mapping[str, Any]], bool]:
    """``spec.nodeName=x,status.phase!=Failed``; unsupported fields raise SelectorError."""
    terms: list[tuple[str, str, str]] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        match = re.match(r"^([^=!]+)(==|=|!=)(.*)$", part)
        if not match:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        field, op, value = match.group(1), match.group(2), match.group(3)
        if field not in ("metadata.name", "metadata.namespace", *supported):
            raise SelectorError(f"field label not supported: {field}")
        terms.append((field, "!=" if op == "!=" else "=", value))

    def matches(obj: Mapping[str, Any]) -> bool:
        for field, op, value in terms:
            actual = field_value(obj, field)
            if (actual == value) != (op == "="):
                return False
        return True

    return matches


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A LabelSelector object (matchLabels / matchExpressions) against labels."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        op = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}[
            expr["operator"]
        ]
        if not Requirement(expr["key"], op, tuple(expr.get("values") or ())).matches(labels):
            return False
    return True


def tolerates_taint(toleration: dict[str, Any], taint: dict[str, Any]) -> bool:
    """Whether one toleration tolerates ``taint``, as the scheduler matches them (a node's
    taint and a pod's toleration, or a DRA device's taint and a claim request's): an empty
    effect matches every effect, ``Exists`` with no key every key, ``Equal`` the key and
    the value."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("operator") == "Exists":
        return not toleration.get("key") or toleration["key"] == taint["key"]
    return bool(
        toleration.get("key") == taint["key"]
        and (toleration.get("value") or "") == (taint.get("value") or "")
    )
