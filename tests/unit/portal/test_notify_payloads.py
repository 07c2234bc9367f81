"""The Slack and Microsoft Teams bodies against the shapes their documentation gives.

Slack (Block Kit, incoming webhooks): a top-level ``text`` (the notification's fallback)
and at most 50 ``blocks``; a ``section`` has a ``text`` object (``mrkdwn`` or
``plain_text``, at most 3,000 characters) and/or at most 10 ``fields`` (2,000 each); an
``actions`` block holds at most 25 elements; a ``button`` has ``plain_text`` text of at most
75 characters, an optional ``url`` (3,000) and ``action_id`` (255). ``&``, ``<`` and ``>``
are escaped in text.

Teams (incoming webhooks and Workflows): ``type`` is ``message``; ``attachments`` holds the
cards, each with ``contentType`` ``application/vnd.microsoft.card.adaptive`` and the card as
``content``: ``type`` ``AdaptiveCard``, a ``version``, a ``body`` of elements (a
``TextBlock`` needs ``text``, a ``FactSet`` needs ``facts`` of ``title``/``value``), and
``actions`` among those a webhook supports (``Action.OpenUrl`` with a ``url``; not
``Action.Submit``).

The schemas are closed (no field the documentation does not name) so a misspelt key fails.
"""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from portal.notifications.payloads import (
    EVENT_KINDS,
    KINDS,
    Message,
    email_text,
    message_for,
    message_from_json,
    slack_payload,
    teams_escape,
    teams_payload,
    webhook_payload,
)


def text_object(types: list[str], longest: int) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["type", "text"],
        "additionalProperties": False,
        "properties": {
            "type": {"enum": types},
            "text": {"type": "string", "minLength": 1, "maxLength": longest},
            "emoji": {"type": "boolean"},
            "verbatim": {"type": "boolean"},
        },
    }


BUTTON = {
    "type": "object",
    "required": ["type", "text"],
    "additionalProperties": False,
    "properties": {
        "type": {"const": "button"},
        "text": text_object(["plain_text"], 75),
        "url": {"type": "string", "format": "uri", "maxLength": 3000},
        "action_id": {"type": "string", "maxLength": 255},
        "value": {"type": "string", "maxLength": 2000},
        "style": {"enum": ["primary", "danger"]},
    },
}
SECTION = {
    "type": "object",
    "required": ["type"],
    "anyOf": [{"required": ["text"]}, {"required": ["fields"]}],
    "additionalProperties": False,
    "properties": {
        "type": {"const": "section"},
        "text": text_object(["mrkdwn", "plain_text"], 3000),
        "fields": {
            "type": "array",
            "minItems": 1,
            "maxItems": 10,
            "items": text_object(["mrkdwn", "plain_text"], 2000),
        },
        "block_id": {"type": "string", "maxLength": 255},
    },
}
ACTIONS = {
    "type": "object",
    "required": ["type", "elements"],
    "additionalProperties": False,
    "properties": {
        "type": {"const": "actions"},
        "elements": {"type": "array", "minItems": 1, "maxItems": 25, "items": BUTTON},
        "block_id": {"type": "string", "maxLength": 255},
    },
}
SLACK = {
    "type": "object",
    "required": ["text", "blocks"],
    "additionalProperties": False,
    "properties": {
        "text": {"type": "string", "minLength": 1},
        "blocks": {
            "type": "array",
            "minItems": 1,
            "maxItems": 50,
            "items": {"oneOf": [SECTION, ACTIONS]},
        },
    },
}

TEXT_BLOCK = {
    "type": "object",
    "required": ["type", "text"],
    "additionalProperties": False,
    "properties": {
        "type": {"const": "TextBlock"},
        "text": {"type": "string", "minLength": 1},
        "weight": {"enum": ["Default", "Lighter", "Bolder"]},
        "size": {"enum": ["Default", "Small", "Medium", "Large", "ExtraLarge"]},
        "wrap": {"type": "boolean"},
        "isSubtle": {"type": "boolean"},
    },
}
FACT_SET = {
    "type": "object",
    "required": ["type", "facts"],
    "additionalProperties": False,
    "properties": {
        "type": {"const": "FactSet"},
        "facts": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["title", "value"],
                "additionalProperties": False,
                "properties": {"title": {"type": "string"}, "value": {"type": "string"}},
            },
        },
    },
}
OPEN_URL = {
    "type": "object",
    "required": ["type", "url"],
    "additionalProperties": False,
    "properties": {
        "type": {"const": "Action.OpenUrl"},
        "url": {"type": "string", "format": "uri"},
        "title": {"type": "string"},
    },
}
TEAMS = {
    "type": "object",
    "required": ["type", "attachments"],
    "additionalProperties": False,
    "properties": {
        "type": {"const": "message"},
        "attachments": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["contentType", "content"],
                "additionalProperties": False,
                "properties": {
                    "contentType": {"const": "application/vnd.microsoft.card.adaptive"},
                    "contentUrl": {"type": "null"},
                    "content": {
                        "type": "object",
                        "required": ["type", "version", "body"],
                        "additionalProperties": False,
                        "properties": {
                            "$schema": {
                                "const": "http://adaptivecards.io/schemas/adaptive-card.json"
                            },
                            "type": {"const": "AdaptiveCard"},
                            "version": {"enum": ["1.0", "1.1", "1.2", "1.3", "1.4", "1.5"]},
                            "body": {"type": "array", "items": {"oneOf": [TEXT_BLOCK, FACT_SET]}},
                            "actions": {"type": "array", "items": OPEN_URL},
                        },
                    },
                },
            },
        },
    },
}

CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER

QUOTA_APPROVED = {
    "id": 7,
    "team": "team-a",
    "where": "namespace team-a",
    "resource": "requests.nvidia.com/gpu",
    "previous": "16",
    "before": "16",
    "requested": "24",
    "state": "approved",
    "until": "2026-12-08T10:00:00+00:00",
    "comment": "for the deadline",
}


def quota_message(**changes: Any) -> Message:
    payload = {**QUOTA_APPROVED, **changes}
    return message_for(
        "quota_change.approved",
        "Quota request #7 (team-a): approved",
        payload,
        "https://gpu.example.org/",
    )


def test_a_quota_decision_becomes_a_message_with_its_facts_and_page() -> None:
    message = quota_message()
    assert message.kind == "decision"
    assert message.url == "https://gpu.example.org/quota/7/"
    assert message.team == "team-a"
    assert message.facts == (
        ("Team", "team-a"),
        ("State", "Approved"),
        ("Where", "namespace team-a"),
        ("Resource", "requests.nvidia.com/gpu"),
        ("Before", "16"),
        ("Asked for", "24"),
        ("Until", "2026-12-08 10:00 UTC"),
        ("Comment", "for the deadline"),
    )
    assert message_from_json(message.as_json()) == message


def test_the_slack_body_has_the_documented_shape() -> None:
    body = slack_payload(quota_message())
    jsonschema.validate(body, SLACK, format_checker=CHECKER)
    assert body["text"] == "Quota request #7 (team-a): approved"
    assert body["blocks"][0]["text"] == {
        "type": "mrkdwn",
        "text": "*Quota request #7 (team-a): approved*",
    }
    assert body["blocks"][1]["fields"][4] == {"type": "mrkdwn", "text": "*Before*\n16"}
    assert body["blocks"][2]["elements"] == [
        {
            "type": "button",
            "text": {"type": "plain_text", "text": "Open in Quartermaster"},
            "url": "https://gpu.example.org/quota/7/",
            "action_id": "open-in-portal",
        }
    ]


def test_slack_markup_in_the_event_is_escaped_and_long_texts_are_cut_to_the_limits() -> None:
    body = slack_payload(quota_message(comment="<!channel> & " + "x" * 5000))
    jsonschema.validate(body, SLACK, format_checker=CHECKER)
    comment = body["blocks"][1]["fields"][-1]["text"]
    assert comment.startswith("*Comment*\n&lt;!channel&gt; &amp; xxx")
    assert len(comment) == 2000 and comment.endswith("…")


def test_slack_takes_at_most_ten_fields_and_a_message_without_facts_has_none() -> None:
    many = Message(
        event="mig_change.failed",
        kind="failed",
        title="MIG change #3 failed",
        url="https://gpu.example.org/changes/3/",
        team=None,
        facts=tuple((f"fact {i}", str(i)) for i in range(14)),
    )
    body = slack_payload(many)
    jsonschema.validate(body, SLACK, format_checker=CHECKER)
    assert len(body["blocks"][1]["fields"]) == 10
    bare = slack_payload(Message("x", "failed", "Title", "https://gpu.example.org/", None))
    jsonschema.validate(bare, SLACK, format_checker=CHECKER)
    assert [block["type"] for block in bare["blocks"]] == ["section", "actions"]


def test_the_teams_body_is_one_adaptive_card_with_an_open_url_action() -> None:
    body = teams_payload(quota_message())
    jsonschema.validate(body, TEAMS, format_checker=CHECKER)
    card = body["attachments"][0]["content"]
    assert card["version"] == "1.4"
    assert card["body"][0]["text"] == "Quota request #7 (team-a): approved"
    assert card["body"][1]["facts"][:2] == [
        {"title": "Team", "value": "team-a"},
        {"title": "State", "value": "Approved"},
    ]
    assert card["actions"] == [
        {
            "type": "Action.OpenUrl",
            "title": "Open in Quartermaster",
            "url": "https://gpu.example.org/quota/7/",
        }
    ]


def test_a_leads_text_cannot_become_markdown_on_a_teams_card() -> None:
    reason = "urgent: [Approve here](https://evil.example/login) **now**\n- see <b>x</b>"
    body = teams_payload(quota_message(reason=reason))
    jsonschema.validate(body, TEAMS, format_checker=CHECKER)
    facts = dict(
        (f["title"], f["value"]) for f in body["attachments"][0]["content"]["body"][1]["facts"]
    )
    assert facts["Reason"] == (
        r"urgent: \[Approve here\](https://evil.example/login) \*\*now\*\* - see \<b\>x\</b\>"
    )
    assert teams_escape("# 1. heading") == r"\# 1. heading"
    assert teams_escape("2. item") == r"2\. item"
    assert teams_escape("team-a_b") == r"team-a\_b"


def test_a_mig_change_links_its_change_page_and_lists_its_nodes() -> None:
    message = message_for(
        "mig_change.pods_evicted",
        "MIG change #4 evicted 2 pods of team team-b",
        {"change_id": 4, "team": "team-b", "nodes": ["gpu-1", "gpu-2"], "pods": ["b/x", "b/y"]},
        "https://gpu.example.org",
    )
    assert message.kind == "evicted"
    assert message.url == "https://gpu.example.org/changes/4/"
    assert ("Nodes", "gpu-1, gpu-2") in message.facts
    assert ("Pods", "b/x, b/y") in message.facts
    jsonschema.validate(slack_payload(message), SLACK, format_checker=CHECKER)
    jsonschema.validate(teams_payload(message), TEAMS, format_checker=CHECKER)


def test_the_generic_webhook_and_the_mail_keep_their_content() -> None:
    message = quota_message()
    assert webhook_payload(message) == {"event": "quota_change.approved", **QUOTA_APPROVED}
    text = email_text(message)
    assert text.startswith("Quota request #7 (team-a): approved\n\nTeam: team-a\n")
    assert text.endswith("Read it: https://gpu.example.org/quota/7/")


@pytest.mark.parametrize("event", sorted(EVENT_KINDS))
def test_every_event_of_a_kind_renders_valid_bodies(event: str) -> None:
    message = message_for(event, f"{event} happened", {"id": 1, "team": "t"}, "https://x.org")
    assert message.kind in KINDS
    jsonschema.validate(slack_payload(message), SLACK, format_checker=CHECKER)
    jsonschema.validate(teams_payload(message), TEAMS, format_checker=CHECKER)
