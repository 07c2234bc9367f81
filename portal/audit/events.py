"""Every event the audit log records, each with the label a person reads beside it.

Pure (no Django): :mod:`portal.audit.text` labels rows with it, services name the events
they record by it (``record_audit(event=Event.QUOTA_CHANGED, ...)``), so an event cannot be
recorded that has no label, nor misspelled. The admin's generic edits
(``<model_name>.created`` / ``.changed`` / ``.deleted``) are named by their model, not here.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, NewType

# An admin edit of a model: ``<model_name>.created`` / ``.changed`` / ``.deleted``.
AdminEvent = NewType("AdminEvent", str)


def admin_event(
    model_name: str, verb: Literal["created", "changed", "deleted", "moved"]
) -> AdminEvent:
    """The event of an edit of a ``model_name`` row named by its model (the admin's, a
    service's delete of any of several models, the demo loader's move), labelled by its
    model's noun."""
    return AdminEvent(f"{model_name}.{verb}")


class Event(StrEnum):
    """An audit event: its value is stored in ``AuditEvent.event``; ``label`` is shown."""

    label: str

    def __new__(cls, value: str, label: str) -> Event:
        member = str.__new__(cls, value)
        member._value_ = value
        member.label = label
        return member

    # reviewed MIG changes and drains (changes/mig.py, changes/executor.py)
    MIG_CHANGE_REQUESTED = "mig_change.requested", "MIG change requested"
    MIG_PLAN_REQUESTED = "mig_plan.requested", "MIG layout plan turned into change requests"
    MIG_CHANGE_APPROVED = "mig_change.approved", "MIG change approved"
    CLUSTER_QUEUE_OVERRIDE = (
        "cluster_queue.override",
        "ClusterQueue promised beyond the fleet (override)",
    )
    TEAM_PRIORITY_CLASSES_CHANGED = (
        "team.priority_classes_changed",
        "Team's allowed priority classes changed",
    )
    MIG_CHANGE_REASSESSED = (
        "mig_change.reassessed",
        "MIG change re-assessed at the decision (approval refused)",
    )
    MIG_CHANGE_REJECTED = "mig_change.rejected", "MIG change rejected"
    MIG_CHANGE_CANCELLED = "mig_change.cancelled", "MIG change cancelled"
    MIG_CHANGE_STARTED = "mig_change.started", "MIG change started"
    MIG_CHANGE_STEP_DONE = "mig_change.step.done", "MIG change step done"
    MIG_CHANGE_STEP_FAILED = "mig_change.step.failed", "MIG change step failed"
    MIG_CHANGE_SUCCEEDED = "mig_change.succeeded", "MIG change succeeded"
    MIG_CHANGE_FAILED = "mig_change.failed", "MIG change failed"
    MIG_CHANGE_ABORTED = "mig_change.aborted", "MIG change aborted"
    MIG_CHANGE_ABORT_REQUESTED = "mig_change.abort_requested", "Abort of a MIG change requested"
    MIG_CHANGE_ROLLBACK = "mig_change.rollback", "MIG change rollback started"
    MIG_CHANGE_ROLLED_BACK = "mig_change.rolled_back", "MIG change rolled back"
    MIG_CHANGE_QUEUES_RESTORED = (
        "mig_change.queues_restored",
        "Queue quotas a MIG change moved restored by its rollback",
    )
    NODE_DRAIN_SUGGESTED = "node_drain.suggested", "Node drain suggested"
    # changes of a cluster's MIG policy (changes/mig_policy.py) and the policy (tenants)
    MIG_POLICY_CHANGE_REQUESTED = "mig_policy_change.requested", "MIG policy change proposed"
    MIG_POLICY_CHANGE_APPROVED = "mig_policy_change.approved", "MIG policy change approved"
    MIG_POLICY_CHANGE_REASSESSED = (
        "mig_policy_change.reassessed",
        "MIG policy change reassessed (its impact changed)",
    )
    MIG_POLICY_CHANGE_REJECTED = "mig_policy_change.rejected", "MIG policy change rejected"
    MIG_POLICY_SET = "mig_policy.set", "MIG policy set"
    # quota requests (changes/quota.py)
    QUOTA_CHANGE_REQUESTED = "quota_change.requested", "Quota request made"
    QUOTA_CHANGE_APPROVED = "quota_change.approved", "Quota request approved"
    QUOTA_CHANGE_AUTO_APPROVED = "quota_change.auto_approved", "Quota request approved by a rule"
    QUOTA_CHANGE_REASSESSED = (
        "quota_change.reassessed",
        "Quota request reassessed (the quota changed)",
    )
    QUOTA_CHANGE_REJECTED = "quota_change.rejected", "Quota request rejected"
    QUOTA_CHANGE_CANCELLED = "quota_change.cancelled", "Quota request cancelled"
    QUOTA_CHANGE_VOIDED = (
        "quota_change.voided",
        "Quota request cancelled (its namespace or ClusterQueue was deleted)",
    )
    QUOTA_CHANGE_EXPIRING = "quota_change.expiring", "Quota grant ends within a day"
    QUOTA_CHANGE_REVERTED = "quota_change.reverted", "Quota grant ended, previous quota restored"
    QUOTA_CHANGE_REVERT_SKIPPED = (
        "quota_change.revert_skipped",
        "Quota grant ended, nothing left to take it back from",
    )
    QUOTA_CHANGE_REVERT_HELD = (
        "quota_change.revert_held",
        "Quota grant ended, taking it back needs a person",
    )
    # budgets (budgets/services.py)
    BUDGET_SAVED = "budget.saved", "Budget set"
    BUDGET_DELETED = "budget.deleted", "Budget removed"
    BUDGET_THRESHOLD = "budget.threshold", "Budget threshold reached"
    BUDGET_HELD = "budget.held", "Budget spent: the team's queues held"
    BUDGET_RELEASED = "budget.released", "Budget hold lifted"
    BUDGET_EXTENSION_REQUESTED = "budget_extension.requested", "Budget extension asked for"
    BUDGET_EXTENSION_APPROVED = "budget_extension.approved", "Budget extension granted"
    BUDGET_EXTENSION_REJECTED = "budget_extension.rejected", "Budget extension refused"
    BUDGET_EXTENSION_CANCELLED = "budget_extension.cancelled", "Budget extension withdrawn"
    # desired state (tenants/, queues/, fleet/ services)
    TEAM_CREATED = "team.created", "Team created"
    TEAM_CHANGED = "team.changed", "Team changed"
    NAMESPACE_CREATED = "namespace.created", "Namespace created"
    NAMESPACE_CHANGED = "namespace.changed", "Namespace changed"
    NAMESPACE_DELETED = "namespace.deleted", "Namespace deleted"
    QUOTA_CHANGED = "quota.changed", "Namespace quota changed"
    # the portal's fields of a managed object taken back from another writer (loop/services.py)
    MANAGED_FIELDS_TAKEN_BACK = (
        "managed_object.taken_back",
        "Fields of a managed object taken back from a change in the cluster",
    )
    CLUSTER_REGISTERED = "cluster.registered", "Cluster registered"
    CLUSTER_CHANGED = "cluster.changed", "Cluster changed"
    CLUSTER_CREDENTIALS_ROTATED = (
        "cluster.credentials_rotated",
        "Cluster credentials re-encrypted under a new key",
    )
    LIMITS_CHANGED = "limits.changed", "Namespace limits changed"
    PRIORITY_CLASS_SAVED = "priority_class.saved", "PriorityClass saved"
    RESOURCE_FLAVOR_SAVED = "resource_flavor.saved", "ResourceFlavor saved"
    COHORT_SAVED = "cohort.saved", "Cohort saved"
    CLUSTER_QUEUE_SAVED = "cluster_queue.saved", "ClusterQueue saved"
    LOCAL_QUEUE_SAVED = "local_queue.saved", "LocalQueue saved"
    LOCAL_QUEUE_BUDGET_HOLD = (
        "local_queue.budget_hold",
        "LocalQueue held or released for its team's budget",
    )
    NODE_POOL_SAVED = "node_pool.saved", "Node pool saved"
    # idle GPUs (idle/services.py, idle/enforce.py)
    IDLE_POLICY_SAVED = "idle_policy.saved", "Idle policy's grace and exemptions saved"
    IDLE_POLICY_REQUESTED = (
        "idle_policy.requested",
        "Idle policy switched on, waiting for its approval",
    )
    IDLE_POLICY_APPROVED = "idle_policy.approved", "Idle policy's first switch-on approved"
    IDLE_POLICY_ON = "idle_policy.on", "Idle policy switched on"
    IDLE_POLICY_OFF = "idle_policy.off", "Idle policy switched off"
    IDLE_WORKLOAD_SUSPENDED = (
        "idle_workload.suspended",
        "Idle workload suspended (deactivated) by the idle policy",
    )
    MIG_CONFIG_CREATED = "migconfig.created", "Custom MIG config created"
    MIG_CONFIG_CHANGED = "migconfig.changed", "Custom MIG config changed"
    # prices and the cost policy (costs/services.py)
    PRICE_SAVED = "price.saved", "GPU price saved"
    PRICE_DELETED = "price.deleted", "GPU price deleted"
    COST_POLICY_CHANGED = "cost_policy.changed", "Cost policy changed"
    PRIORITY_CLASS_CLUSTERS_CHANGED = (
        "priority_class.clusters_changed",
        "PriorityClass's clusters changed",
    )
    # people and access (tenants/oidc.py, portal/access/tokens.py)
    USER_CREATED = "user.created", "User created at first sign-in"
    SSO_IDENTITY_LINKED = "sso_identity.linked", "Single sign-on identity linked"
    PLATFORM_ROLE_GRANTED = "platform_role.granted", "Platform role granted"
    PLATFORM_ROLE_REVOKED = "platform_role.revoked", "Platform role revoked"
    MEMBERSHIP_GRANTED = "membership.granted", "Team membership granted"
    MEMBERSHIP_REVOKED = "membership.revoked", "Team membership revoked"
    MEMBERSHIP_CHANGED = "membership.changed", "Team membership changed"
    MEMBERSHIP_CREATED = "membership.created", "Team membership added"
    API_TOKEN_CREATED = "api_token.created", "API token created"
    API_TOKEN_REVOKED = "api_token.revoked", "API token revoked"
    NOTIFICATION_SUBSCRIPTION_CREATED = (
        "notification_subscription.created",
        "Notification subscription added",
    )
    NOTIFICATION_SUBSCRIPTION_DELETED = (
        "notification_subscription.deleted",
        "Notification subscription removed",
    )
    NOTIFICATION_PREFERENCE_CHANGED = (
        "notification_preference.changed",
        "Default notifications turned on or off",
    )
    # the demo loader (demo/services.py): its logins, for the sign-in page
    DEMO_LOADED = "demo.loaded", "Demo data loaded"
