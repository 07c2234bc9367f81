"""What a person may do with a request, one table per request kind: each verb's service,
the permission that offers it (the :class:`changes.approval.Actions` flag a page reads to
show its button), what it takes from the form and what the page says once it is done.
The pages and the API dispatch through :func:`decide`, so a verb means one thing on both."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from django.core.exceptions import PermissionDenied

from changes import mig, mig_policy, quota
from changes.approval import User

Kind = Literal["mig", "quota", "policy"]


@dataclass(frozen=True)
class Asked:
    """A decision as asked: by whom, on which request, with the comment and the assessment
    fingerprint the form sent, from where (``web`` or ``api``)."""

    request_id: int
    user: User
    comment: str = ""
    seen: str = ""
    source: str = "web"


@dataclass(frozen=True)
class Verb:
    """One thing that can be done with a request."""

    run: Callable[[Asked], object]
    allowed: Literal["decide", "cancel", "rollback", "abort"]  # the Actions flag offering it
    done: str  # what the page says once it is done
    takes_comment: bool = False  # and the fingerprint, when it approves


def _decisions(
    approve: Callable[..., object], reject: Callable[..., object], approved: str
) -> dict[str, Verb]:
    """Approving and rejecting a request of a kind (an approver's verbs, with a comment;
    an approval acts on the fingerprint the approver saw)."""
    return {
        "approve": Verb(
            lambda a: approve(
                request_id=a.request_id,
                approver=a.user,
                comment=a.comment,
                seen=a.seen,
                source=a.source,
            ),
            "decide",
            approved,
            takes_comment=True,
        ),
        "reject": Verb(
            lambda a: reject(
                request_id=a.request_id, approver=a.user, comment=a.comment, source=a.source
            ),
            "decide",
            "Rejected.",
            takes_comment=True,
        ),
    }


def _by_actor(
    service: Callable[..., object], allowed: Literal["cancel", "rollback", "abort"], done: str
) -> Verb:
    """A verb its service takes from whoever acts (no comment)."""
    return Verb(
        lambda a: service(request_id=a.request_id, actor=a.user, source=a.source), allowed, done
    )


MIG_VERBS: dict[str, Verb] = {
    **_decisions(
        mig.approve_mig_change,
        mig.reject_mig_change,
        "Approved: the change runs now (or in its window).",
    ),
    "cancel": _by_actor(mig.cancel_mig_change, "cancel", "Cancelled."),
    "rollback": _by_actor(
        mig.rollback_mig_change, "rollback", "Rolling back to the previous configs."
    ),
    "abort": _by_actor(
        mig.abort_mig_change,
        "abort",
        "Abort asked: the change stops at its next step boundary, the node cordoned.",
    ),
}

QUOTA_VERBS: dict[str, Verb] = {
    **_decisions(
        quota.approve_quota_change,
        quota.reject_quota_change,
        "Approved: the quota changes with the next apply.",
    ),
    "cancel": _by_actor(quota.cancel_quota_change, "cancel", "Cancelled."),
}

# A cluster's MIG policy: proposed changes are approved or rejected, nothing else.
POLICY_VERBS: dict[str, Verb] = _decisions(
    mig_policy.approve_mig_policy_change,
    mig_policy.reject_mig_policy_change,
    "Approved: the loop applies the policy.",
)

VERBS: dict[Kind, dict[str, Verb]] = {
    "mig": MIG_VERBS,
    "quota": QUOTA_VERBS,
    "policy": POLICY_VERBS,
}


def verb_of(kind: Kind, verb: str) -> Verb:
    """The verb of a request kind; one it does not have is refused."""
    found = VERBS[kind].get(verb)
    if found is None:
        raise PermissionDenied("Unknown action.")
    return found


def decide(kind: Kind, verb: str, asked: Asked) -> Verb:
    """Do ``verb`` to a request of ``kind`` as asked (the service checks who may, and
    raises DomainError, ValidationError or PermissionDenied when it refuses)."""
    found = verb_of(kind, verb)
    found.run(asked)
    return found
