"""Pure decoding of what decides an eviction's outcome: PodDisruptionBudgets (may the pod
go now?) and the pod's owner (does anything bring it back, or does its Job fail?). Plain
dicts in (as the gateway decodes them), small frozen facts out; no I/O, no Django.

- A budget allows ``status.disruptionsAllowed`` evictions now (the disruption controller's
  count; 0 until it has looked); its ``selector`` is a full label selector.
- A pod's controller (``ownerReferences`` with ``controller: true``) tells who recreates it:
  a ReplicaSet (a Deployment's), a StatefulSet or a DaemonSet does; a bare pod is gone.
- A Job counts an evicted pod as one failure and fails once ``failed > backoffLimit``
  (default 6), unless its ``podFailurePolicy`` ignores disruptions (``DisruptionTarget``);
  a policy that fails the Job on a disruption fails it at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cluster.decode import as_int

DEFAULT_BACKOFF_LIMIT = 6
KUEUE_QUEUE_LABELS = ("kueue.x-k8s.io/queue-name", "kueue.x-k8s.io/local-queue-name")
KUEUE_WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"


@dataclass(frozen=True, slots=True)
class Budget:
    """A PodDisruptionBudget as its controller last counted it."""

    namespace: str
    name: str
    selector: Mapping[str, Any]  # matchLabels / matchExpressions
    min_available: str = ""  # as written: "2" or "50%" ("" when unset)
    max_unavailable: str = ""
    disruptions_allowed: int = 0
    current_healthy: int = 0
    desired_healthy: int = 0
    expected_pods: int = 0

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    def covers(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """Whether the budget counts a pod with these labels (an empty selector: all of the
        namespace's pods; a missing one: none, as policy/v1 has it)."""
        return namespace == self.namespace and label_selector_matches(self.selector, labels)


@dataclass(frozen=True, slots=True)
class Owner:
    """What an evicted pod's controller does about it."""

    kind: str = ""  # "" for a bare pod
    name: str = ""
    backoff_limit: int | None = None  # Jobs: spec.backoffLimit (default 6)
    failed: int = 0  # Jobs: status.failed
    kueue: bool = False  # a Job Kueue admitted (queue-name label, workload annotation)
    on_disruption: str = ""  # Jobs: podFailurePolicy's action on DisruptionTarget
    unread: str = ""  # why the Job could not be read ("" when it was)


@dataclass(frozen=True, slots=True)
class PodWork:
    """A pod on a changed node: the labels budgets select it by, and its owner."""

    labels: Mapping[str, str] = field(default_factory=dict)
    owner: Owner = field(default_factory=Owner)


def budget_of(obj: Mapping[str, Any]) -> Budget:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}

    def text(value: Any) -> str:
        return "" if value is None else str(value)

    return Budget(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        selector=spec["selector"] if isinstance(spec.get("selector"), dict) else {"none": True},
        min_available=text(spec.get("minAvailable")),
        max_unavailable=text(spec.get("maxUnavailable")),
        disruptions_allowed=as_int(status.get("disruptionsAllowed")),
        current_healthy=as_int(status.get("currentHealthy")),
        desired_healthy=as_int(status.get("desiredHealthy")),
        expected_pods=as_int(status.get("expectedPods")),
    )


def label_selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector against labels (``{"none": True}``: matches nothing)."""
    if selector.get("none") is True:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression.get("key", ""), expression.get("operator", "")
        values = expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def controller_of(pod: Mapping[str, Any]) -> tuple[str, str]:
    """(kind, name) of the pod's controller; ("", "") for a bare pod."""
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("kind", "")), str(ref.get("name", ""))
    return "", ""


def is_kueue_pod(pod: Mapping[str, Any]) -> bool:
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    return KUEUE_WORKLOAD_ANNOTATION in (meta.get("annotations") or {}) or any(
        key in labels for key in KUEUE_QUEUE_LABELS
    )


def job_owner(job: Mapping[str, Any], *, kueue_pod: bool = False) -> Owner:
    """A Job as the owner of a pod about to be evicted."""
    meta = job.get("metadata") or {}
    spec = job.get("spec") or {}
    labels = meta.get("labels") or {}
    limit = spec.get("backoffLimit")
    return Owner(
        kind="Job",
        name=str(meta.get("name", "")),
        backoff_limit=DEFAULT_BACKOFF_LIMIT if limit is None else as_int(limit),
        failed=as_int((job.get("status") or {}).get("failed")),
        kueue=kueue_pod or any(key in labels for key in KUEUE_QUEUE_LABELS),
        on_disruption=_on_disruption(spec.get("podFailurePolicy") or {}),
    )


def _on_disruption(policy: Mapping[str, Any]) -> str:
    """The action of the first podFailurePolicy rule a disrupted pod meets ("" for none)."""
    for rule in policy.get("rules") or []:
        for condition in rule.get("onPodConditions") or []:
            if condition.get("type") == "DisruptionTarget" and condition.get("status", "True") in (
                "True",
            ):
                return str(rule.get("action", ""))
    return ""
