"""RBAC as the API server evaluates it: PolicyRules of a ClusterRole, and what was asked.

A user is bound to a list of PolicyRules (``apiGroups``, ``resources`` with ``pod/eviction``
style subresources, ``verbs``, optional ``resourceNames``); a request is allowed when one
rule matches all of them. Every decision is recorded as (verb, group, resource) so a test can
compare what a client used with what its role grants.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Rule = Mapping[str, Sequence[str]]

VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def verb_of(method: str, name: str) -> str:
    """The RBAC verb of an HTTP request (a GET without a name is a list)."""
    if method == "GET":
        return "get" if name else "list"
    return VERBS.get(method, method.lower())


def _matches(values: Iterable[str], wanted: str) -> bool:
    return any(v == "*" or v == wanted for v in values)


def allows(rules: Sequence[Rule], verb: str, group: str, resource: str, name: str = "") -> bool:
    """Whether one of ``rules`` grants ``verb`` on ``resource`` (``pods/eviction``) in ``group``."""
    for rule in rules:
        if not _matches(rule.get("verbs", ()), verb):
            continue
        if not _matches(rule.get("apiGroups", ()), group):
            continue
        plural = resource.split("/")[0]
        resources = rule.get("resources", ())
        if not (_matches(resources, resource) or (resource == plural and "*" in resources)):
            continue
        names = rule.get("resourceNames") or ()
        if names and name not in names:
            continue
        return True
    return False


@dataclass
class Subject:
    """A user and the rules bound to it; ``verbs`` only: those verbs on everything."""

    name: str
    rules: Sequence[Rule]
    asked: set[tuple[str, str, str]] = field(default_factory=set)
    denied: list[tuple[str, str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def of(cls, name: str, grants: Any) -> Subject:
        if isinstance(grants, (set, frozenset)):
            return cls(name, [{"apiGroups": ["*"], "resources": ["*"], "verbs": sorted(grants)}])
        return cls(name, list(grants))

    def check(self, verb: str, group: str, resource: str, name: str = "") -> bool:
        allowed = allows(self.rules, verb, group, resource, name)
        with self.lock:
            self.asked.add((verb, group, resource))
            if not allowed:
                self.denied.append((verb, group, resource))
        return allowed


def granted(rules: Sequence[Rule]) -> set[tuple[str, str, str]]:
    """Every (verb, group, resource) a set of wildcard-free rules grants."""
    return {
        (verb, group, resource)
        for rule in rules
        for verb in rule.get("verbs", ())
        for group in rule.get("apiGroups", ())
        for resource in rule.get("resources", ())
    }


# What every authenticated user may do, whatever is bound to it (the API server's
# system:basic-user, system:discovery and system:public-info-viewer ClusterRoles).
BASIC_RULES: list[dict[str, list[str]]] = [
    {
        "verbs": ["create"],
        "apiGroups": ["authorization.k8s.io"],
        "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
    },
    {
        "verbs": ["create"],
        "apiGroups": ["authentication.k8s.io"],
        "resources": ["selfsubjectreviews"],
    },
]
BASIC_NON_RESOURCE_RULES: list[dict[str, list[str]]] = [
    {
        "verbs": ["get"],
        "nonResourceURLs": [
            "/api",
            "/api/*",
            "/apis",
            "/apis/*",
            "/healthz",
            "/livez",
            "/openapi",
            "/openapi/*",
            "/readyz",
            "/version",
            "/version/",
        ],
    }
]


def rules_review(subject: Subject | None, namespace: str) -> dict[str, Any]:
    """A SelfSubjectRulesReview's answer (201) as the API server gives it: the subject's
    rules (cluster-wide ones apply in every namespace) after the basic user's; the admin
    (no subject) may do everything."""
    if subject is None:
        resource = [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]
        non_resource = [{"verbs": ["*"], "nonResourceURLs": ["*"]}]
    else:
        resource = [*BASIC_RULES, *(_resource_rule(rule) for rule in subject.rules)]
        non_resource = list(BASIC_NON_RESOURCE_RULES)
    return {
        "kind": "SelfSubjectRulesReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {"creationTimestamp": None},
        "spec": {"namespace": namespace},
        "status": {
            "resourceRules": resource,
            "nonResourceRules": non_resource,
            "incomplete": False,
        },
    }


def _resource_rule(rule: Rule) -> dict[str, list[str]]:
    out = {key: list(rule.get(key, ())) for key in ("verbs", "apiGroups", "resources")}
    if rule.get("resourceNames"):
        out["resourceNames"] = list(rule["resourceNames"])
    return out
