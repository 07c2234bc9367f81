"""The observed tables' JSON read by orjson (``cluster/fields.py``): every value the poll
can store reads back as Django's own reading gives it, text neither reads is left as
Django leaves it, and migrations see Django's field."""

from __future__ import annotations

import json

import orjson
import pytest
from django.apps import apps
from django.db import connection, models
from django.utils import timezone

from cluster.fields import ObservedJSONField
from cluster.models import ObservedObject
from cluster.services import settings_cluster

VALUES = [
    {"why": {"cause": "Queue lq has no unused quota", "evidence": ["a", "b"]}, "n": None},
    {"nvidia.com/gpu": "2", "cpu": "500m", "memory": "16Gi"},
    [1, -2, 3.5, 1e-7, 2.5e-300, 9.007199254740993e15, True, False, None, ""],
    {"text": 'quotes " and \\ backslashes, tabs\t, é, 漢字, 🙂', "empty": {}, "list": []},
    {"int64": [2**63 - 1, -(2**63)], "uint64": 2**64 - 1},
    "a string",
    0,
]


@pytest.mark.django_db
@pytest.mark.parametrize("value", VALUES)
def test_a_value_the_poll_stores_reads_back_as_django_reads_it(value: object) -> None:
    # as the poll stores it: decoded from the API server's answer by orjson
    value = orjson.loads(orjson.dumps(value))
    row = ObservedObject.objects.create(
        cluster=settings_cluster(),
        api_version="v1",
        kind="ConfigMap",
        name="x",
        status=value,
        last_seen=timezone.now(),
    )
    stored = ObservedObject.objects.values_list("status", flat=True).get(pk=row.pk)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT status::text FROM {ObservedObject._meta.db_table} WHERE id = %s", [row.pk]
        )
        (text,) = cursor.fetchone()
    assert stored == json.loads(text)
    assert repr(stored) == repr(json.loads(text))  # the same types too (int, not float)
    assert ObservedObject.objects.get(pk=row.pk).status == stored


def test_text_neither_reads_is_left_as_django_leaves_it() -> None:
    field = ObservedJSONField()
    assert field.from_db_value("{not json", None, connection) == "{not json"
    assert field.from_db_value(None, None, connection) is None
    # orjson refuses what json reads (a number beyond a double): Django's reading decides
    assert field.from_db_value("1" + "0" * 400, None, connection) == 10**400
    # a float beyond 64 bits (none comes from the API server, whose numbers are int64),
    # which PostgreSQL prints as an integer: read as the float that was stored
    assert field.from_db_value("100000000000000000000", None, connection) == 1e20


def test_every_observed_json_column_reads_with_orjson_and_migrates_as_djangos() -> None:
    fields = [
        f
        for model in apps.get_app_config("cluster").get_models()
        for f in model._meta.local_fields
        if isinstance(f, models.JSONField)
    ]
    assert len(fields) > 20
    assert {type(f) for f in fields} == {ObservedJSONField}
    assert {f.deconstruct()[1] for f in fields} == {"django.db.models.JSONField"}
