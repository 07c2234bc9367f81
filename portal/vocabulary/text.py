"""Free text a person types (reasons, names, descriptions, comments): what it may not hold.

Line breaks and tabs are text; the other control characters are not: an escape sequence
(ESC, the C1 controls) drives the terminal that shows a log line or a CSV file, and a bidi
override or isolate (U+202A to U+202E, U+2066 to U+2069) makes a reader see other words than the
ones stored ("Trojan Source"). Right-to-left languages need neither (the marks U+200E and
U+200F stay allowed). One rule for every field, applied where input enters
(portal/infra/middleware.py, portal/api/parsers.py); text from elsewhere (an IdP's names)
is neutralised instead.
"""

from __future__ import annotations

import re

UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
REFUSED = "Control characters and bidi overrides are not allowed ({found})."


def text_problem(value: str) -> str:
    """Why ``value`` may not be stored as typed ("" when it may)."""
    found = sorted(set(UNSAFE.findall(value)))
    if not found:
        return ""
    return REFUSED.format(found=", ".join(f"U+{ord(char):04X}" for char in found[:5]))


def neutralised(value: str) -> str:
    """``value`` without what :func:`text_problem` refuses (for text nobody typed here)."""
    return UNSAFE.sub("", value)
