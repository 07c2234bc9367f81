"""The API server's Warning headers, as the gateway keeps them (RFC 7234: code, agent,
quoted text; several in one header or in several)."""

from __future__ import annotations

from urllib3 import HTTPHeaderDict

from kube.gateway import warnings_of


def test_each_warning_text_is_kept_without_its_code_and_quotes() -> None:
    headers = HTTPHeaderDict()
    headers.add("Warning", '299 - "This version is deprecated. Use v1beta2 instead."')
    headers.add("Warning", '299 - "unknown field \\"spec.colour\\""')
    assert warnings_of(headers) == [
        "This version is deprecated. Use v1beta2 instead.",
        'unknown field "spec.colour"',
    ]


def test_warnings_joined_in_one_header_are_each_kept() -> None:
    headers = HTTPHeaderDict({"Warning": '299 - "first", 299 - "second, with a comma"'})
    assert warnings_of(headers) == ["first", "second, with a comma"]


def test_no_warning_header_is_no_warning() -> None:
    assert warnings_of(HTTPHeaderDict({"Content-Type": "application/json"})) == []
    assert warnings_of(None) == []
