"""The API resources the demo cluster serves, and their discovery documents."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str
    subresources: tuple[str, ...] = ()
    short_names: tuple[str, ...] = ()
    crd: bool = False
    # Field selectors accepted besides metadata.name / metadata.namespace.
    field_labels: tuple[str, ...] = ()
    other_versions: tuple[str, ...] = field(default=())

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> str:
        """``clusterqueues.kueue.x-k8s.io`` or ``nodes`` (as error messages spell it)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.plural)


KUEUE = "kueue.x-k8s.io"
DRA = "resource.k8s.io"
VOLCANO = "scheduling.volcano.sh"
POD_FIELDS = (
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
)
EVENT_FIELDS = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)

RESOURCES: tuple[Resource, ...] = (
    Resource(
        "",
        "v1",
        "namespaces",
        "Namespace",
        False,
        "namespace",
        ("status",),
        ("ns",),
        field_labels=("status.phase",),
    ),
    Resource(
        "",
        "v1",
        "nodes",
        "Node",
        False,
        "node",
        ("status",),
        ("no",),
        field_labels=("spec.unschedulable",),
    ),
    Resource(
        "",
        "v1",
        "pods",
        "Pod",
        True,
        "pod",
        ("status", "eviction", "binding"),
        ("po",),
        field_labels=POD_FIELDS,
    ),
    Resource(
        "", "v1", "resourcequotas", "ResourceQuota", True, "resourcequota", ("status",), ("quota",)
    ),
    Resource("", "v1", "limitranges", "LimitRange", True, "limitrange", (), ("limits",)),
    # Kueue's install keeps its Configuration in one (kueue-system/kueue-manager-config).
    Resource("", "v1", "configmaps", "ConfigMap", True, "configmap", (), ("cm",)),
    Resource("batch", "v1", "jobs", "Job", True, "job", ("status",), ()),
    Resource("", "v1", "events", "Event", True, "event", (), ("ev",), field_labels=EVENT_FIELDS),
    Resource(
        "events.k8s.io",
        "v1",
        "events",
        "Event",
        True,
        "event",
        (),
        ("ev",),
        field_labels=(
            "regarding.name",
            "regarding.namespace",
            "regarding.kind",
            "reason",
            "type",
            "reportingController",
        ),
    ),
    # Dynamic Resource Allocation (devcluster/dra.py): the driver's classes and slices, the
    # claims the scheduler allocates, and the templates pods' claims are made from.
    Resource(DRA, "v1", "deviceclasses", "DeviceClass", False, "deviceclass", (), ()),
    Resource(DRA, "v1", "resourceslices", "ResourceSlice", False, "resourceslice", (), ()),
    Resource(DRA, "v1", "resourceclaims", "ResourceClaim", True, "resourceclaim", ("status",), ()),
    Resource(
        DRA, "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True, "resourceclaimtemplate"
    ),
    Resource(
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "PriorityClass",
        False,
        "priorityclass",
        (),
        ("pc",),
    ),
    Resource(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        True,
        "poddisruptionbudget",
        ("status",),
        ("pdb",),
    ),
    Resource(
        KUEUE,
        "v1beta2",
        "resourceflavors",
        "ResourceFlavor",
        False,
        "resourceflavor",
        (),
        ("flavor", "flavors", "rf"),
        crd=True,
        other_versions=("v1beta1",),
    ),
    Resource(
        KUEUE,
        "v1beta2",
        "cohorts",
        "Cohort",
        False,
        "cohort",
        ("status",),
        ("co",),
        crd=True,
        other_versions=("v1beta1",),
    ),
    Resource(
        KUEUE,
        "v1beta2",
        "clusterqueues",
        "ClusterQueue",
        False,
        "clusterqueue",
        ("status",),
        ("cq",),
        crd=True,
        other_versions=("v1beta1",),
    ),
    Resource(
        KUEUE,
        "v1beta2",
        "localqueues",
        "LocalQueue",
        True,
        "localqueue",
        ("status",),
        ("queue", "queues", "lq"),
        crd=True,
        other_versions=("v1beta1",),
    ),
    Resource(
        KUEUE,
        "v1beta2",
        "workloads",
        "Workload",
        True,
        "workload",
        ("status",),
        ("wl",),
        crd=True,
        other_versions=("v1beta1",),
    ),
    Resource(
        VOLCANO,
        "v1beta1",
        "queues",
        "Queue",
        False,
        "queue",
        ("status",),
        ("q", "queue-v1beta1"),
        crd=True,
    ),
    # No status subresource: whoever writes a PodGroup may write its status.
    Resource(
        VOLCANO,
        "v1beta1",
        "podgroups",
        "PodGroup",
        True,
        "podgroup",
        (),
        ("pg", "podgroup-v1beta1"),
        crd=True,
    ),
)


@dataclass(frozen=True)
class Served:
    """The optional APIs a demo cluster serves: Kueue's versions (none: no Kueue, and no
    visibility API) and Volcano's CRDs. The default serves everything, as always."""

    kueue: tuple[str, ...] = ("v1beta2", "v1beta1")
    volcano: bool = True

    def serves(self, group: str, version: str = "") -> bool:
        if group == KUEUE:
            return bool(self.kueue) and (not version or version in self.kueue)
        if group == "visibility.kueue.x-k8s.io":
            return bool(self.kueue)
        if group == VOLCANO:
            return self.volcano
        return True


VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def find(group: str, version: str, plural: str) -> Resource | None:
    for resource in RESOURCES:
        if (
            resource.group == group
            and resource.plural == plural
            and (resource.version == version or version in resource.other_versions)
        ):
            return resource
    return None


def by_kind(api_version: str, kind: str) -> Resource | None:
    group, _, version = api_version.rpartition("/")
    for resource in RESOURCES:
        if (
            resource.group == group
            and resource.kind == kind
            and (resource.version == version or version in resource.other_versions)
        ):
            return resource
    return None


def group_versions() -> dict[str, list[str]]:
    """Every served group with its versions, preferred first."""
    groups: dict[str, list[str]] = {}
    for resource in RESOURCES:
        versions = groups.setdefault(resource.group, [])
        for version in (resource.version, *resource.other_versions):
            if version not in versions:
                versions.append(version)
    return groups


def resource_list(group: str, version: str) -> dict[str, object] | None:
    """An APIResourceList for one group version (``/api/v1``, ``/apis/<g>/<v>``)."""
    entries: list[dict[str, object]] = []
    for resource in RESOURCES:
        if resource.group != group or version not in (resource.version, *resource.other_versions):
            continue
        entry: dict[str, object] = {
            "name": resource.plural,
            "singularName": resource.singular,
            "namespaced": resource.namespaced,
            "kind": resource.kind,
            "verbs": VERBS,
        }
        if resource.short_names:
            entry["shortNames"] = list(resource.short_names)
        entries.append(entry)
        for sub in resource.subresources:
            entries.append(
                {
                    "name": f"{resource.plural}/{sub}",
                    "singularName": "",
                    "namespaced": resource.namespaced,
                    "group": "policy" if sub == "eviction" else None,
                    "version": "v1" if sub == "eviction" else None,
                    "kind": {"eviction": "Eviction", "binding": "Binding"}.get(sub, resource.kind),
                    "verbs": ["create"]
                    if sub in ("eviction", "binding")
                    else ["get", "patch", "update"],
                }
            )
            entries[-1] = {k: v for k, v in entries[-1].items() if v is not None}
    if not entries:
        return None
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": entries,
    }
