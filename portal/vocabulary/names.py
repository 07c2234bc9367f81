"""Kubernetes name rules: DNS-1123 labels and subdomains, qualified names, label values, and
how an equality label selector matches.

The messages follow the API server's wording so that what the portal says matches what
``kubectl`` would say, but the portal says it before anything reaches the cluster.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def dns1123_label_errors(value: str) -> list[str]:
    errors = []
    if len(value) > 63:
        errors.append("must be no more than 63 characters")
    if not _DNS1123_LABEL.match(value):
        errors.append(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
            "or '-', and must start and end with an alphanumeric character (e.g. 'team-a')"
        )
    return errors


def dns1123_subdomain_errors(value: str) -> list[str]:
    errors = []
    if len(value) > 253:
        errors.append("must be no more than 253 characters")
    if not _DNS1123_SUBDOMAIN.match(value):
        errors.append(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
            "characters, '-' or '.', and must start and end with an alphanumeric character "
            "(e.g. 'a100-80gb')"
        )
    return errors


def qualified_name_errors(value: str) -> list[str]:
    """Label keys and resource names: an optional DNS subdomain prefix, '/', a name."""
    prefix, slash, name = value.rpartition("/")
    errors = []
    if slash:
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors.extend(f"prefix part {e}" for e in dns1123_subdomain_errors(prefix))
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    elif not _QUALIFIED_NAME.match(name):
        errors.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character (e.g. 'nvidia.com/gpu')"
        )
    return errors


def label_value_errors(value: str) -> list[str]:
    errors = []
    if len(value) > 63:
        errors.append("must be no more than 63 characters")
    if not _LABEL_VALUE.match(value):
        errors.append(
            "a valid label value must be an empty string or consist of alphanumeric "
            "characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        )
    return errors


def selector_matches(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` carry every ``key: value`` of an equality selector (matchLabels,
    a ResourceFlavor's nodeLabels, a node pool's selector); an empty selector matches all."""
    return all(labels.get(key) == value for key, value in selector.items())


# A reference as texts write it: ``team-b/worker-0`` (a pod) or ``PodDisruptionBudget
# team-b/keep`` (any kind named before it).
OBJECT_REF = re.compile(
    r"(?:\b([A-Z][A-Za-z]+) )?"
    r"(?<![\w./-])([a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?)/([a-z0-9][-.a-z0-9]*)"
)
OTHER_TEAMS_POD = "another team's pod"
# What a caller passes for ``cluster`` where what it names carries no cluster (an audit
# row's old and new values): the namespace is named when the user's teams own one of that
# name on some cluster. Every caller that can know the cluster passes it.
CLUSTER_UNKNOWN = None


@dataclass(frozen=True)
class PodNames:
    """Whose objects a user may see by name: their own teams' (every team's for approvers
    and platform admins). Others' pods, PodDisruptionBudgets and anything else named in
    another team's namespace are said as "another team's pod" (or counted), never named:
    the one rule of every output channel (pages, the API, in-portal notifications, e-mail,
    Slack, Teams, webhooks, audit rows, CSV, failure texts).

    A namespace is a cluster's: ``namespaces`` holds ``(cluster id, namespace)`` pairs, and
    each check takes the cluster of what is named, since a name the user's team owns on one
    cluster may be another team's on another."""

    everyone: bool
    namespaces: frozenset[tuple[int, str]]

    @cached_property
    def _on_some_cluster(self) -> frozenset[str]:
        return frozenset(name for _, name in self.namespaces)

    def named(self, cluster: int | None, namespace: str) -> bool:
        """Whether the user may read names in ``namespace`` of ``cluster`` (an id;
        ``CLUSTER_UNKNOWN`` where what is named carries no cluster)."""
        if self.everyone:
            return True
        if cluster is CLUSTER_UNKNOWN:
            return namespace in self._on_some_cluster
        return (cluster, namespace) in self.namespaces

    def redact(self, text: str, cluster: int | None) -> str:
        """``text`` (about ``cluster``) with every ``namespace/name`` the user may not name
        said as "another team's pod" (or "another team's PodDisruptionBudget" where the kind
        is written before it). A count such as the scheduler's "0/5 nodes are available" is
        no pod."""
        if self.everyone or "/" not in text:
            return text
        return OBJECT_REF.sub(lambda match: self._said(match, cluster), text)

    def _said(self, match: re.Match[str], cluster: int | None) -> str:
        kind, namespace, name = match.group(1), match.group(2), match.group(3)
        if self.named(cluster, namespace) or (namespace.isdigit() and name.isdigit()):
            return match.group(0)
        if kind and kind != "Pod":
            return f"another team's {kind}"
        return OTHER_TEAMS_POD

    def redact_value(self, value: Any, cluster: int | None) -> Any:
        """:meth:`redact` on every string inside a JSON value (an audit row's old/new, a
        notification's payload) about ``cluster``."""
        if self.everyone:
            return value
        if isinstance(value, str):
            return self.redact(value, cluster)
        if isinstance(value, list | tuple):
            return [self.redact_value(v, cluster) for v in value]
        if isinstance(value, dict):
            return {k: self.redact_value(v, cluster) for k, v in value.items()}
        return value
