"""Codes and states as people read them (``breaks_quota`` → Breaks quota, ``NotReady`` →
Not ready, ``mig-reconfiguring`` → MIG reconfiguring): one rule for the pages (the
``words`` filter) and the notifications."""

from __future__ import annotations

import re

# Codes whose words are not what splitting them gives.
WORDS = {
    "safe": "Safe",
    "needs_drain": "Needs a drain",
    "breaks_quota": "Breaks quota",
    "breaksquota": "Breaks quota",
    "blocked": "Blocked",
    "notready": "Not ready",
    "not_ready": "Not ready",
}
ACRONYMS = {"ok": "OK", "mig": "MIG", "gpu": "GPU", "cpu": "CPU", "pdb": "PDB", "api": "API"}
CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def code_words(text: str) -> str:
    """One code in words, its first letter capitalised ("" stays "")."""
    text = text.strip()
    if text.lower() in WORDS:
        return WORDS[text.lower()]
    if text.lower() in ACRONYMS:
        return ACRONYMS[text.lower()]
    parts = [p for p in re.split(r"[_\-\s]+", CAMEL.sub(" ", text)) if p]
    shown = [ACRONYMS.get(p.lower(), p.lower()) for p in parts]
    sentence = " ".join(shown)
    return sentence[:1].upper() + sentence[1:]
