"""The observed tables' JSON, read by orjson.

Django parses each JSON value it reads with the standard library's ``json.loads``: a poll
of the scale scenario reads some 200,000 of them from the observed tables (the waiting
workloads' stored explanations, 700 bytes each, and every workload's requests), a page
hundreds. orjson parses the same text three to six times faster (25,000 explanations:
0.22 → 0.075 s; 25,000 requests: 0.074 → 0.012 s).

It reads what the standard library reads, with one difference: an integer beyond 64 bits
becomes a float. The observed tables never hold one: what they keep was decoded from the
API server's answers by orjson itself (``kube.gateway``), with the same limits, or
computed by the portal from that (the explanations). Text neither reads is left as Django
leaves it. The intent tables, which keep what users typed, keep Django's field.

The column is Django's: ``deconstruct`` names Django's class, so migrations see no change
and need none; only how a value is read differs.
"""

from __future__ import annotations

from typing import Any

import orjson
from django.db import models


class ObservedJSONField(models.JSONField):  # type: ignore[type-arg]
    """``models.JSONField``, read by orjson (module docstring)."""

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        if self.decoder is None and isinstance(value, str):
            try:
                return orjson.loads(value)
            except orjson.JSONDecodeError:
                pass  # Django's reading decides: a value json reads, or the text itself
        return super().from_db_value(value, expression, connection)

    def deconstruct(self) -> Any:
        name, _, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs
