"""What a person may do with a request, one table per request kind: each verb's service,
the permission that offers it (the :class:`changes.approval.Actions` flag a page reads to
show its button), what it takes from the form and what the page says once it is done.
The pages and the API dispatch through :func:`decide`, so a verb means one thing on both."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from django.core.exceptions import PermissionDenied

from changes import mig, quota
from changes.approval import User

Kind = Literal["mig", "quota"]


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


MIG_VERBS: dict[str, Verb] = {
    "approve": Verb(
        lambda a: mig.approve_mig_change(
            request_id=a.request_id,
            approver=a.user,
            comment=a.comment,
            seen=a.seen,
            source=a.source,
        ),
        "decide",
        "Approved: the change runs now (or in its window).",
        takes_comment=True,
    ),
    "reject": Verb(
        lambda a: mig.reject_mig_change(
            request_id=a.request_id, approver=a.user, comment=a.comment, source=a.source
        ),
        "decide",
        "Rejected.",
        takes_comment=True,
    ),
    "cancel": Verb(
        lambda a: mig.cancel_mig_change(request_id=a.request_id, actor=a.user, source=a.source),
        "cancel",
        "Cancelled.",
    ),
    "rollback": Verb(
        lambda a: mig.rollback_mig_change(request_id=a.request_id, actor=a.user, source=a.source),
        "rollback",
        "Rolling back to the previous configs.",
    ),
    "abort": Verb(
        lambda a: mig.abort_mig_change(request_id=a.request_id, actor=a.user, source=a.source),
        "abort",
        "Abort asked: the change stops at its next step boundary, the node cordoned.",
    ),
}

QUOTA_VERBS: dict[str, Verb] = {
    "approve": Verb(
        lambda a: quota.approve_quota_change(
            request_id=a.request_id,
            approver=a.user,
            comment=a.comment,
            seen=a.seen,
            source=a.source,
        ),
        "decide",
        "Approved: the quota changes with the next apply.",
        takes_comment=True,
    ),
    "reject": Verb(
        lambda a: quota.reject_quota_change(
            request_id=a.request_id, approver=a.user, comment=a.comment, source=a.source
        ),
        "decide",
        "Rejected.",
        takes_comment=True,
    ),
    "cancel": Verb(
        lambda a: quota.cancel_quota_change(request_id=a.request_id, actor=a.user, source=a.source),
        "cancel",
        "Cancelled.",
    ),
}

VERBS: dict[Kind, dict[str, Verb]] = {"mig": MIG_VERBS, "quota": QUOTA_VERBS}


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
