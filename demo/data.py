"""The demo scenario as data: the seed chapter's teams, quotas, priority classes and queue
hierarchy, the demo logins, and the node pools of the demo cluster's five GPU nodes (as in
the seed's incident, ``0/5 nodes are available``): two H100 80GB nodes tainted for GPU work,
two A100 80GB nodes sliced ``all-3g.40gb`` and one A100 80GB node on ``all-balanced`` for
development. With the second demo cluster (the inference one, ``INFERENCE_*`` below), the
inference team's objects and team-a's serving namespace live there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tenants.rules import LimitSpec

DEMO_PASSWORD = "quartermaster-demo"
SOURCE = "cli"

A100_80GB = "NVIDIA-A100-SXM4-80GB"
H100_80GB = "NVIDIA-H100-80GB-HBM3"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {
    "key": "nvidia.com/gpu",
    "operator": "Equal",
    "value": "present",
    "effect": "NoSchedule",
}


@dataclass(frozen=True)
class Endpoint:
    """Where a second demo cluster answers and the bearer token it requires."""

    url: str
    token: str


# The run command starts two demo clusters: the settings' one (the seed's training fleet)
# and an inference one (``python -m devcluster --scenario inference``), registered by
# ``load_demo`` when given its endpoint: (display name, purpose) of the settings' cluster
# then; (name, display name, purpose) of the second.
TRAINING_CLUSTER = ("Training (A100 / H100)", "training")
INFERENCE_CLUSTER = ("inference", "Inference (H100 / L40S)", "inference")


@dataclass(frozen=True)
class DemoUser:
    username: str
    description: str
    superuser: bool = False
    roles: tuple[str, ...] = ()
    teams: tuple[tuple[str, str], ...] = ()

    @property
    def email(self) -> str:
        """An address at example.com (reserved: mail to it reaches nobody), so the demo's
        notifications by e-mail land in the run's local outbox."""
        return f"{self.username}@example.com"


USERS = (
    DemoUser("admin", "platform admin", superuser=True, roles=("admin",)),
    DemoUser("approver", "approver of change requests", roles=("approver",)),
    DemoUser("lead-a", "team lead of team-a", teams=(("team-a", "lead"),)),
    DemoUser("member-a", "member of team-a", teams=(("team-a", "member"),)),
    DemoUser("lead-b", "team lead of team-b", teams=(("team-b", "lead"),)),
    DemoUser("lead-infer", "team lead of team-infer", teams=(("team-infer", "lead"),)),
    DemoUser("viewer-dev", "viewer of team-dev", teams=(("team-dev", "viewer"),)),
)

TEAMS = (
    ("team-a", "Team A (LLM training)", "Large-model training on whole GPUs and 3g.40gb slices."),
    ("team-b", "Team B (training)", "Training; also runs development tests on small MIG slices."),
    ("team-infer", "Inference", "Online serving and offline batch inference."),
    ("team-dev", "Development", "Notebooks and tests on small MIG slices."),
)

# Budgets (GPU-hours per calendar month): team-a's is set nearly spent (this share of it
# used so far, from the usage history) and not enforced, so its page says what enforcement
# would hold; team-b's is enforced with room to spare.
BUDGETS = (
    # team, the share of the budget used so far, the amount without usage yet, enforce
    ("team-a", 0.92, 400, False),
    ("team-b", 0.4, 600, True),
)

PRIORITY_CLASSES = (
    ("training-critical", 1_000_000, "PreemptLowerPriority", "Training jobs that must not wait."),
    ("inference-serving", 500_000, "PreemptLowerPriority", "Online inference replicas."),
    ("dev-best-effort", 100, "Never", "Development work: never preempts anybody."),
)
ALLOWED_PRIORITY = {
    "team-a": ("training-critical",),
    "team-b": ("training-critical", "dev-best-effort"),
    "team-infer": ("inference-serving",),
    "team-dev": ("dev-best-effort",),
}

FLAVORS: tuple[tuple[str, dict[str, str], list[dict[str, Any]], list[dict[str, Any]], str], ...] = (
    (
        "h100-80gb",
        {"nvidia.com/gpu.product": H100_80GB},
        [],
        [GPU_TOLERATION],
        "H100 80GB HBM3, whole GPUs; nodes are tainted nvidia.com/gpu=present:NoSchedule.",
    ),
    (
        "a100-80gb-3g",
        {"nvidia.com/gpu.product": A100_80GB, "nvidia.com/mig.config": "all-3g.40gb"},
        [],
        [],
        "A100 80GB sliced all-3g.40gb: 2 x 3g.40gb per GPU.",
    ),
    (
        "a100-80gb-balanced",
        {"nvidia.com/gpu.product": A100_80GB, "nvidia.com/mig.config": "all-balanced"},
        [],
        [],
        "A100 80GB on all-balanced: 2 x 1g.10gb + 2g.20gb + 3g.40gb per GPU (mixed strategy).",
    ),
)

NODE_POOLS = (
    (
        "train",
        {"quartermaster.io/pool": "train"},
        "train",
        "all-3g.40gb",
        "A100 80GB nodes sliced for training: 2 x 3g.40gb per GPU.",
    ),
    (
        "h100",
        {"quartermaster.io/pool": "h100"},
        "train",
        "all-disabled",
        "H100 80GB nodes with whole GPUs for large training jobs.",
    ),
)

# Idle GPUs (idle/): each pool's threshold (%) and period (minutes); the others keep the
# defaults (5 % over 2 hours). The A100 and H100 pools judge over 5 minutes, so the run
# command's notebooks, team-dev's holding a 2g.20gb slice and team-a's an H100 without
# using them, are listed as idle five minutes after the pages open.
IDLE_SETTINGS = {"train": (5, 5), "h100": (5, 5)}

# (name, parent, description), parents first. The seed's cohort sits in a root for the whole
# fleet, which holds no quota of its own: ai-platform's queues borrow only from each other
# until another department's cohort joins the root.
COHORTS = (
    (
        "gpu-fleet",
        "",
        "Every GPU of the cluster: departments' cohorts join it; no quota of its own.",
    ),
    (
        "ai-platform",
        "gpu-fleet",
        "The seed's queue hierarchy: training, inference and dev share unused GPUs.",
    ),
)


def _quota(name: str, nominal: int, borrowing: int | None = None) -> dict[str, Any]:
    quota: dict[str, Any] = {"name": name, "nominalQuota": str(nominal)}
    if borrowing is not None:
        quota["borrowingLimit"] = str(borrowing)
    return quota


def _group(flavor: str, *quotas: dict[str, Any]) -> dict[str, Any]:
    return {
        "coveredResources": [q["name"] for q in quotas],
        "flavors": [{"name": flavor, "resources": list(quotas)}],
    }


GPU = "nvidia.com/gpu"
MIG_3G = "nvidia.com/mig-3g.40gb"
MIG_2G = "nvidia.com/mig-2g.20gb"
MIG_1G = "nvidia.com/mig-1g.10gb"

CLUSTER_QUEUES: tuple[tuple[str, str, list[dict[str, Any]], str], ...] = (
    (
        "cq-train",
        "80",
        [_group("h100-80gb", _quota(GPU, 12)), _group("a100-80gb-3g", _quota(MIG_3G, 24))],
        "Training (seed: weight 80).",
    ),
    (
        "cq-infer",
        "20",
        [_group("h100-80gb", _quota(GPU, 4)), _group("a100-80gb-3g", _quota(MIG_3G, 8))],
        "Inference (seed: weight 20).",
    ),
    (
        "cq-dev",
        "5",
        [
            _group("a100-80gb-balanced", _quota(MIG_1G, 16), _quota(MIG_2G, 8), _quota(MIG_3G, 8)),
            _group("h100-80gb", _quota(GPU, 0, borrowing=10)),
        ],
        "Development (seed: weight 5, borrowing limit 10): owns the balanced A100 node and may "
        "borrow up to 10 idle H100 GPUs from the cohort.",
    ),
)

LOCAL_QUEUES = (
    ("team-a-train", "team-a", "cq-train"),
    ("team-b-train", "team-b", "cq-train"),
    ("online-infer", "team-infer", "cq-infer"),
    ("offline-batch", "team-infer", "cq-infer"),
    ("dev-test", "team-dev", "cq-dev"),
)

# The seed's ResourceQuota and LimitRange for team-a, kept as written, with the portal's notes:
# limits.nvidia.com/gpu is never enforced, and a namespace-wide GPU default hands every
# container (sidecars included) a GPU.
SEED_QUOTA = {"requests.nvidia.com/gpu": "16", "limits.nvidia.com/gpu": "16", "pods": "50"}
SEED_LIMITS = [LimitSpec(limit_type="Container", resource=GPU, default="1", default_request="1")]
OTHER_QUOTAS = {
    "team-b": {
        "requests.nvidia.com/gpu": "8",
        "requests.nvidia.com/mig-3g.40gb": "8",
        "pods": "50",
    },
    # GPUs and pods only: cq-infer covers GPUs alone, so a quota on CPU or memory would make
    # every pod ask for them and Kueue refuse each workload that does (a real control plane
    # refused all of team-infer's Jobs one way or the other).
    "team-infer": {
        "requests.nvidia.com/gpu": "4",
        "requests.nvidia.com/mig-3g.40gb": "8",
        "pods": "200",
    },
    "team-dev": {
        "requests.nvidia.com/mig-1g.10gb": "16",
        "requests.nvidia.com/mig-2g.20gb": "8",
        "pods": "40",
    },
}
# Only team-a has a LimitRange: the seed's, as written (the portal warns about it). Any
# Container item for a device, even a max alone, hands it to every container; and defaults
# for CPU or memory make Kueue charge resources a GPU-only ClusterQueue does not cover
# ("resource cpu unavailable in ClusterQueue"), so no workload of the team is admitted.
OTHER_LIMITS: dict[str, list[LimitSpec]] = {}


# ------------------------------------------------------------------ the inference cluster
# With the second demo cluster (dev.py run), what lives there instead of on the settings'
# one: team-infer's namespace with its queues (cq-infer, online-infer, offline-batch move
# over), team-a's serving namespace (a team spans clusters: it trains on one and serves on
# the other), and the flavors and node pools of the inference fleet. The priority classes
# apply to both clusters.
L40S = "NVIDIA-L40S"
L40S_SHARED = "NVIDIA-L40S-SHARED"
INFERENCE_NAMESPACES = (("team-infer", "team-infer"), ("team-a-serve", "team-a"))
INFERENCE_QUOTAS = {
    "team-infer": {  # GPUs and pods only, as on the training cluster
        "requests.nvidia.com/gpu": "32",
        "requests.nvidia.com/mig-1g.10gb": "64",
        "pods": "200",
    },
    "team-a-serve": {"requests.nvidia.com/gpu": "4", "pods": "20"},
}
INFERENCE_FLAVORS: tuple[
    tuple[str, dict[str, str], list[dict[str, Any]], list[dict[str, Any]], str], ...
] = (
    FLAVORS[0],  # h100-80gb: the same whole, tainted H100s
    (
        "h100-80gb-1g",
        {"nvidia.com/gpu.product": H100_80GB, "nvidia.com/mig.config": "all-1g.10gb"},
        [],
        [],
        "H100 80GB sliced all-1g.10gb: 7 x 1g.10gb per GPU, for small models.",
    ),
    ("l40s", {"nvidia.com/gpu.product": L40S}, [], [], "L40S 48GB, whole GPUs (no MIG)."),
    (
        "l40s-shared",
        {"nvidia.com/gpu.product": L40S_SHARED},
        [],
        [],
        "L40S time-sliced by the device plugin, 4 replicas per GPU (no memory isolation).",
    ),
)
INFERENCE_POOLS = (
    (
        "h100-mig",
        {"quartermaster.io/pool": "h100-mig"},
        "infer",
        "all-1g.10gb",
        "H100 80GB nodes sliced for small models: 7 x 1g.10gb per GPU.",
    ),
    (
        "h100",
        {"quartermaster.io/pool": "h100"},
        "infer",
        "all-disabled",
        "H100 80GB nodes with whole GPUs for large models.",
    ),
    ("l40s", {"quartermaster.io/pool": "l40s"}, "infer", "", "L40S nodes, whole GPUs."),
    (
        "l40s-shared",
        {"quartermaster.io/pool": "l40s-shared"},
        "infer",
        "",
        "An L40S node time-sliced four ways, for batch inference.",
    ),
    (
        "a100-dra",
        {"quartermaster.io/pool": "a100-dra"},
        "infer",
        "",
        "A100 80GB nodes whose GPUs are allocated through DRA (the NVIDIA DRA driver): whole "
        "GPUs and MIG devices carved per claim, within each GPU's shared counters.",
    ),
)
INFERENCE_CLUSTER_QUEUES: tuple[tuple[str, str, list[dict[str, Any]], str], ...] = (
    (
        "cq-infer",
        "20",
        [
            {
                "coveredResources": [GPU],
                "flavors": [
                    {"name": "h100-80gb", "resources": [_quota(GPU, 4)]},
                    {"name": "l40s", "resources": [_quota(GPU, 8)]},
                    {"name": "l40s-shared", "resources": [_quota(GPU, 16)]},
                ],
            },
            _group("h100-80gb-1g", _quota(MIG_1G, 64)),
        ],
        "Inference (seed: weight 20): whole H100s first, then L40S, then time-sliced L40S; "
        "1g.10gb slices for small models.",
    ),
)
INFERENCE_LOCAL_QUEUES = (
    ("online-infer", "team-infer", "cq-infer"),
    ("offline-batch", "team-infer", "cq-infer"),
)
# The inference cluster's MIG policy for the a100-dra pool, where the DRA driver carves MIG
# devices per claim (changes/mig_policy.py): governed, each namespace granted the profiles
# it serves with, proposed by the platform admin and approved by the approver.
MIG_POLICY_GRANTS = (
    {"namespace": "team-infer", "profile": "3g.40gb", "devices": 4},
    {"namespace": "team-infer", "profile": "1g.10gb", "devices": 4},
    {"namespace": "team-a-serve", "profile": "1g.10gb", "devices": 2},
)
MIG_POLICY_REASON = (
    "Per-claim MIG on the A100s: team-infer serves 13B models on 3g.40gb and embeddings on "
    "1g.10gb; team-a tries its model on 1g.10gb before it asks for more."
)
MIG_POLICY_COMMENT = "Fits the four A100s with room for the waiting pods."

# Prices per GPU-hour (costs/): the demo's GPU models, from the first day of 2026; the
# A100's 1g.10gb slice has a price of its own, its other profiles their share of the GPU's.
PRICES_FROM = "2026-01-01"
PRICES = (
    ("H100-80GB", "", "4.50", "Whole H100 80GB (SXM), on-demand equivalent."),
    ("A100-80GB", "", "2.40", "Whole A100 80GB; a 3g.40gb slice costs half of it."),
    ("A100-80GB", "1g.10gb", "0.40", "Small slices carry their packing overhead."),
    ("NVIDIA-L40S", "", "1.20", "Whole L40S on the inference cluster."),
)
