"""What a notification says, and how each channel wants it: pure functions (no Django, no
network) from one portal event to a message, and from a message to a Slack incoming-webhook
body (``text`` plus Block Kit ``blocks``), a Microsoft Teams message (one Adaptive Card, as
Teams incoming webhooks and Workflows take it), the generic webhook's JSON and an e-mail.

The kinds are what people subscribe to: a portal event (``quota_change.approved``) belongs
to at most one kind (``decision``); events of no kind reach only the generic hooks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from portal.audit.text import CODED_VALUES, scalar_text
from portal.vocabulary.names import CLUSTER_UNKNOWN, PodNames
from portal.vocabulary.words import code_words

KINDS: dict[str, str] = {
    "request": "New request",
    "decision": "Decision (approved, rejected, cancelled)",
    "done": "Change done",
    "failed": "Change failed or aborted",
    "expiring": "Quota grant expiring or ended",
    "evicted": "Pods evicted",
    "budget": "Budget threshold reached, queues held or released",
    "idle": "Idle GPUs found or suspended",
}

EVENT_KINDS: dict[str, str] = {
    "quota_change.requested": "request",
    "mig_change.requested": "request",
    "quota_change.approved": "decision",
    "quota_change.rejected": "decision",
    "quota_change.cancelled": "decision",
    "quota_change.voided": "decision",
    "mig_change.approved": "decision",
    "mig_change.rejected": "decision",
    "mig_change.cancelled": "decision",
    "mig_change.succeeded": "done",
    "mig_change.rolled_back": "done",
    "mig_change.failed": "failed",
    "mig_change.aborted": "failed",
    "quota_change.expiring": "expiring",
    "quota_change.reverted": "expiring",
    "quota_change.revert_skipped": "expiring",
    "quota_change.revert_held": "expiring",
    "mig_change.pods_evicted": "evicted",
    "budget.threshold": "budget",
    "budget.held": "budget",
    "budget.released": "budget",
    "budget_extension.requested": "request",
    "budget_extension.approved": "decision",
    "budget_extension.rejected": "decision",
    "idle.found": "idle",
    "idle_policy.requested": "request",
    "mig_policy_change.requested": "request",
    "mig_policy_change.approved": "decision",
    "mig_policy_change.rejected": "decision",
    "idle.suspended": "idle",
}

# The payload keys worth a line, in this order, with the words a person reads.
FACTS: tuple[tuple[str, str], ...] = (
    ("team", "Team"),
    ("state", "State"),
    ("nodes", "Nodes"),
    ("target_config", "MIG config"),
    ("where", "Where"),
    ("resource", "Resource"),
    ("before", "Before"),
    ("requested", "Asked for"),
    ("until", "Until"),
    ("period", "Period"),
    ("spent", "Used"),
    ("limit", "Budget"),
    ("threshold", "Threshold"),
    ("amount", "Extension"),
    ("queues", "Queues"),
    ("verdict", "Verdict"),
    ("requested_by", "Asked by"),
    ("decided_by", "Decided by"),
    ("pods", "Pods"),
    ("workload", "Workload"),
    ("gpus", "GPUs held"),
    ("idle_since", "Idle since"),
    ("gpu_hours", "GPU-hours wasted"),
    ("policy", "Idle policy"),
    ("evictions", "Pods it evicts"),
    ("impact", "Impact"),
    ("reason", "Reason"),
    ("comment", "Comment"),
    ("failure", "Failure"),
)
OPEN_LABEL = "Open in Quartermaster"

# Block Kit's documented limits (a longer text makes Slack refuse the whole message).
SLACK_SECTION_TEXT = 3000
SLACK_FIELD_TEXT = 2000
SLACK_FIELDS = 10
SLACK_FALLBACK_TEXT = 3000


@dataclass(frozen=True)
class Message:
    """One event as people read it: a title, facts, and the page it is about; ``cluster``:
    the id of the cluster whose pods it may name (a request's), ``CLUSTER_UNKNOWN`` for a
    message built without one."""

    event: str
    kind: str
    title: str
    url: str
    team: str | None
    facts: tuple[tuple[str, str], ...] = ()
    data: Mapping[str, Any] = field(default_factory=dict)
    cluster: int | None = CLUSTER_UNKNOWN

    def seen_by(self, names: PodNames) -> Message:
        """The message as one recipient may read it: the one redaction rule
        (:class:`portal.vocabulary.names.PodNames`) on its title, facts and data, so another
        team's pods and budgets are never named to a lead on any channel (the names being
        of the message's cluster: the same namespace name may be another team's there)."""
        if names.everyone:
            return self
        on = self.cluster
        return Message(
            event=self.event,
            kind=self.kind,
            title=names.redact(self.title, on),
            url=self.url,
            team=self.team,
            facts=tuple((label, names.redact(value, on)) for label, value in self.facts),
            data=names.redact_value(dict(self.data), on),
            cluster=on,
        )

    def as_json(self) -> dict[str, Any]:
        """For a task's arguments (JSON only); :func:`message_from_json` reads it back."""
        return {
            "event": self.event,
            "kind": self.kind,
            "title": self.title,
            "url": self.url,
            "team": self.team,
            "facts": [list(fact) for fact in self.facts],
            "data": dict(self.data),
            "cluster": self.cluster,
        }


def message_from_json(data: Mapping[str, Any]) -> Message:
    return Message(
        event=str(data["event"]),
        kind=str(data["kind"]),
        title=str(data["title"]),
        url=str(data["url"]),
        team=data.get("team"),
        facts=tuple((str(k), str(v)) for k, v in data.get("facts", [])),
        data=dict(data.get("data", {})),
        cluster=data.get("cluster", CLUSTER_UNKNOWN),
    )


# Payload keys holding a code (``breaks_quota``, ``rolled_back``) a person reads in words
# (the audit log's words for it, else the code's own).
CODED = frozenset({"state", "verdict"})


def _said(key: str, value: Any) -> str:
    """A payload value as a person reads it: a code in words, a moment as "2026-12-07
    14:00 UTC", true or false as yes or no, a list joined."""
    if isinstance(value, list | tuple):
        return ", ".join(_said(key, v) for v in value)
    if key in CODED and isinstance(value, str):
        return CODED_VALUES.get(key, {}).get(value) or code_words(value)
    return scalar_text(value)


def page_of(event: str, payload: Mapping[str, Any], base_url: str) -> str:
    """The portal page an event is about (the request's page), or the portal's home."""
    base = base_url.rstrip("/")
    ident = payload.get("change_id", payload.get("id"))
    if isinstance(ident, int) and event.startswith("mig_change."):
        return f"{base}/changes/{ident}/"
    if isinstance(ident, int) and event.startswith("quota_change."):
        return f"{base}/quota/{ident}/"
    budget = payload.get("budget_id")
    if isinstance(budget, int) and event.startswith(("budget.", "budget_extension.")):
        return f"{base}/budgets/{budget}/"
    if event.startswith("idle."):
        return f"{base}/idle/"
    if event.startswith("mig_policy_change."):
        return f"{base}/changes/mig-policy/"
    if event.startswith("idle_policy.") and isinstance(payload.get("team"), str):
        return f"{base}/idle/teams/{payload['team']}/policy/"
    return f"{base}/"


def message_for(
    event: str,
    subject: str,
    payload: Mapping[str, Any],
    base_url: str,
    *,
    cluster: int | None = CLUSTER_UNKNOWN,
) -> Message:
    """The message of one portal event (its subject as the title; each fact that has a
    value, in words) on ``cluster`` (an id: the cluster whose pods it may name)."""
    facts = tuple(
        (label, _said(key, payload[key]))
        for key, label in FACTS
        if payload.get(key) not in (None, "", [], ())
    )
    team = payload.get("team")
    return Message(
        event=event,
        kind=EVENT_KINDS.get(event, ""),
        title=subject,
        url=page_of(event, payload, base_url),
        team=str(team) if team else None,
        facts=facts,
        data={"event": event, **payload},
        cluster=cluster,
    )


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def slack_escape(text: str) -> str:
    """Slack reads ``&``, ``<`` and ``>`` as markup (``<!channel>`` pings a channel)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_payload(message: Message) -> dict[str, Any]:
    """A Slack incoming-webhook body: ``text`` (the notification's fallback) and blocks: a
    mrkdwn section with the title, one with the facts as fields, and a link button."""
    title = slack_escape(message.title)
    blocks: list[dict[str, Any]] = [
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": _clip(f"*{title}*", SLACK_SECTION_TEXT)},
        }
    ]
    if message.facts:
        blocks.append(
            {
                "type": "section",
                "fields": [
                    {
                        "type": "mrkdwn",
                        "text": _clip(
                            f"*{slack_escape(label)}*\n{slack_escape(value)}", SLACK_FIELD_TEXT
                        ),
                    }
                    for label, value in message.facts[:SLACK_FIELDS]
                ],
            }
        )
    blocks.append(
        {
            "type": "actions",
            "elements": [
                {
                    "type": "button",
                    "text": {"type": "plain_text", "text": OPEN_LABEL},
                    "url": message.url,
                    "action_id": "open-in-portal",
                }
            ],
        }
    )
    return {"text": _clip(title, SLACK_FALLBACK_TEXT), "blocks": blocks}


# What Teams' Markdown makes something of in a TextBlock or a fact: link labels ([…]),
# emphasis, code, strike-through and angle-bracket links; and, at the start, a heading,
# a list or a quote. A backslash keeps each as it is.
TEAMS_MARKUP = re.compile(r"([\\\[\]*_~`<>])")
TEAMS_LEADING = re.compile(r"^([#>+-]|\d+(?=\.))")


def teams_escape(text: str) -> str:
    """``text`` shown as typed on a Teams card: a lead's reason cannot become a link with
    a label of its choosing in the approvers' channel (one line: newlines start lists)."""
    one_line = " ".join(text.split())
    escaped = TEAMS_MARKUP.sub(r"\\\1", one_line)
    if escaped[:1].isdigit():  # "2." starts a list: "2\." does not
        return TEAMS_LEADING.sub(r"\1\\", escaped)
    return TEAMS_LEADING.sub(r"\\\1", escaped)


def teams_payload(message: Message) -> dict[str, Any]:
    """A Microsoft Teams message carrying one Adaptive Card (version 1.4): the title, the
    facts as a FactSet, and an Action.OpenUrl to the page."""
    body: list[dict[str, Any]] = [
        {
            "type": "TextBlock",
            "text": teams_escape(message.title),
            "weight": "Bolder",
            "size": "Medium",
            "wrap": True,
        }
    ]
    if message.facts:
        body.append(
            {
                "type": "FactSet",
                "facts": [
                    {"title": teams_escape(label), "value": teams_escape(value)}
                    for label, value in message.facts
                ],
            }
        )
    card = {
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": body,
        "actions": [{"type": "Action.OpenUrl", "title": OPEN_LABEL, "url": message.url}],
    }
    return {
        "type": "message",
        "attachments": [
            {
                "contentType": "application/vnd.microsoft.card.adaptive",
                "contentUrl": None,
                "content": card,
            }
        ],
    }


def webhook_payload(message: Message) -> dict[str, Any]:
    """The generic webhook's JSON: the event's name and its payload, as before."""
    return dict(message.data)


def email_text(message: Message) -> str:
    lines = [message.title, ""]
    lines.extend(f"{label}: {value}" for label, value in message.facts)
    lines.extend(["", f"Read it: {message.url}"])
    return "\n".join(lines)


RENDERERS = {"slack": slack_payload, "teams": teams_payload, "webhook": webhook_payload}
