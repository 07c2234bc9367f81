"""Forms of MIG change and quota requests (the services validate; the forms show their
errors per field)."""

from __future__ import annotations

from typing import Any

from django import forms

from changes.approval import teams_user_may_request_for
from changes.facts import custom_configs, node_facts
from changes.impact import Fleet, NodeFacts
from changes.models import QuotaChangeRequest
from cluster.models import Cluster
from cluster.scope import visible_clusters
from gpus.catalog import valid_configs
from portal.vocabulary.validators import validate_not_past
from queues.models import ClusterQueue
from tenants.models import Namespace, Team


def cluster_label(cluster: Cluster) -> str:
    """A cluster as the pages name it (its display name), not its API name."""
    return cluster.display_name or cluster.name


def on_its_cluster(obj: Namespace | ClusterQueue) -> str:
    """A namespace or ClusterQueue with the cluster it is on: ``team-a-serve (inference)``."""
    return f"{obj.name} ({obj.cluster.name})"


class MigChangeForm(forms.Form):
    cluster: forms.ModelChoiceField[Any] = forms.ModelChoiceField(
        queryset=Cluster.objects.order_by("name"),
        to_field_name="name",
        empty_label=None,
        required=False,  # the service requires it once there are several clusters
        help_text="The cluster the nodes are on: a change is on one cluster.",
    )
    team: forms.ModelChoiceField[Any] = forms.ModelChoiceField(
        queryset=None, empty_label=None, help_text="On whose behalf."
    )
    nodes = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple, required=False)
    target_config = forms.ChoiceField(label="Target MIG config", required=False)
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)
    window_start = forms.DateTimeField(
        required=False,
        label="Not before (optional)",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        help_text="Leave empty to run as soon as it is approved.",
        validators=[validate_not_past],
    )

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The clusters the user may see (a lead: those their teams are on); another is
        # answered as one there is not.
        seen = visible_clusters(user)
        if not seen.exists():  # nobody to ask for here: the settings' cluster, named by none
            seen = Cluster.objects.filter(connection="settings")
        self.fields["cluster"].queryset = seen  # type: ignore[attr-defined]
        self.chosen_cluster = self._cluster()
        self.fields["cluster"].label_from_instance = cluster_label  # type: ignore[attr-defined]
        if self.fields["cluster"].queryset.count() < 2:  # type: ignore[attr-defined]
            self.fields["cluster"].widget = forms.HiddenInput()
        # The nodes and the custom configs are all the form offers from: not the pods,
        # quotas and queues an assessment reads (the preview's, once nodes are chosen).
        self.fleet = Fleet(
            nodes=node_facts(self.chosen_cluster.pk), custom_configs=custom_configs()
        )
        self.fields["team"].queryset = teams_user_may_request_for(user)  # type: ignore[attr-defined]
        gpu_nodes = [n for n in self.fleet.nodes if n.model]
        self.fields["nodes"].choices = [  # type: ignore[attr-defined]
            (
                n.name,
                f"{n.name} — {n.model}, now {n.mig_config or 'no config'}"
                f"{' (' + n.mig_state + ')' if n.mig_state and n.mig_state != 'success' else ''}",
            )
            for n in sorted(gpu_nodes, key=lambda n: n.name)
        ]
        if self.is_bound and hasattr(self.data, "getlist"):
            chosen = self.data.getlist("nodes")
        else:
            chosen = list(self.initial.get("nodes") or [])
        by_name = {n.name: n for n in gpu_nodes}
        picked = [by_name[n] for n in chosen if n in by_name]
        models = sorted({node.model or "" for node in picked})
        if len(models) > 1:
            configs = []
            hint = (
                f"These nodes have {len(models)} GPU models ("
                + "; ".join(
                    f"{model}: {', '.join(n.name for n in picked if n.model == model)}"
                    for model in models
                )
                + "): choose nodes of one model, as each model takes its own configs."
            )
        elif picked:
            offered = set(_valid(picked[0], self.fleet))
            for node in picked[1:]:
                offered &= set(_valid(node, self.fleet))
            configs = sorted(offered)
            hint = f"Configs valid for {models[0]}."
        else:
            configs = []
            hint = "Choose nodes first: only configs their GPU model can take are offered."
        self.fields["target_config"].choices = [("", "—")] + [  # type: ignore[attr-defined]
            (c, c) for c in configs
        ]
        self.fields["target_config"].help_text = hint

    def _cluster(self) -> Cluster:
        """The cluster whose nodes the form offers: the one chosen (or to be shown first),
        else the settings' one (or the only one)."""
        name = self.data.get("cluster") if self.is_bound else self.initial.get("cluster")
        if isinstance(name, Cluster):
            return name
        clusters = self.fields["cluster"].queryset.order_by("name")  # type: ignore[attr-defined]
        found = clusters.filter(name=name).first() if name else None
        found = found or clusters.filter(connection="settings").first() or clusters.first()
        if found is None:
            raise Cluster.DoesNotExist("no cluster is registered")
        if not self.is_bound:
            self.initial["cluster"] = found.name
        return found


def _valid(node: NodeFacts, fleet: Fleet) -> list[str]:
    return valid_configs(
        node=node.name, model=node.model, gpu_count=node.gpu_count, custom=fleet.custom_configs
    )


class QuotaRequestForm(forms.Form):
    team = forms.ModelChoiceField(queryset=Team.objects.none(), empty_label=None)
    kind = forms.ChoiceField(choices=QuotaChangeRequest.Kind.choices, label="What")
    namespace = forms.ModelChoiceField(
        queryset=Namespace.objects.none(), required=False, help_text="For a namespace quota."
    )
    cluster_queue = forms.ModelChoiceField(
        queryset=ClusterQueue.objects.none(),
        required=False,
        label="ClusterQueue",
        help_text="For a queue's nominal quota.",
    )
    flavor = forms.ChoiceField(
        required=False, help_text="For a queue: the flavor whose quota changes."
    )
    resource = forms.CharField(
        initial="requests.nvidia.com/gpu",
        max_length=253,
        help_text="requests.nvidia.com/gpu for a namespace; nvidia.com/gpu for a queue.",
    )
    requested = forms.CharField(label="New value", max_length=64)
    grant_until = forms.DateTimeField(
        required=False,
        label="Until (optional)",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        help_text="A time-limited grant reverts by itself.",
        validators=[validate_not_past],
    )
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)
    override_reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}),
        required=False,
        label="Beyond the fleet, because",
        help_text="Platform admins only: why a quota should promise more than the fleet "
        "could ever offer.",
    )

    def __init__(self, *args: Any, teams: Any, admin: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = teams  # type: ignore[attr-defined]
        namespaces = Namespace.objects.filter(team__in=teams).select_related("cluster")
        self.fields["namespace"].queryset = namespaces.order_by("cluster__name", "name")  # type: ignore[attr-defined]
        queues = (
            ClusterQueue.objects.filter(local_queues__namespace__team__in=teams)
            .select_related("cluster")
            .distinct()
            .order_by("cluster__name", "name")
        )
        self.fields["cluster_queue"].queryset = queues  # type: ignore[attr-defined]
        if Cluster.objects.count() > 1:  # each choice says which cluster it is on
            for name in ("namespace", "cluster_queue"):
                self.fields[name].label_from_instance = on_its_cluster  # type: ignore[attr-defined]
        flavors = sorted({flavor for cq in queues for flavor, _ in cq.quota()})
        self.fields["flavor"].choices = [("", "—")] + [(f, f) for f in flavors]  # type: ignore[attr-defined]
        if not admin:
            del self.fields["override_reason"]
