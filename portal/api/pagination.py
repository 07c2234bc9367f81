"""The API's pagination: DRF's page numbers, read strictly (a page that is no page number is
a field error, never a silent first page or a 404)."""

from __future__ import annotations

import re
from typing import Any

from django.core.paginator import Paginator
from rest_framework import pagination
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request

# The schema's bound: a larger page is refused as no page number (the check never turns
# thousands of digits into an integer).
MAX_PAGE = 2**31 - 1
PAGE_NUMBER = re.compile(r"[1-9][0-9]{0,9}")


class PageNumberPagination(pagination.PageNumberPagination):
    """``?page=N`` from 1: ``0``, ``-1``, ``abc``, an empty or a repeated ``page`` is a 400
    naming ``page``; a page after the last one is a 404 that says which page is the last."""

    last_page_strings = ()  # no ``?page=last``: the schema says a number (``next`` links exist)
    invalid_page_message = "There is no page {page_number}: {message}."

    def get_page_number(self, request: Request, paginator: Paginator) -> int:  # type: ignore[override]
        values = request.query_params.getlist(self.page_query_param)
        if not values:
            return 1
        if len(values) > 1:
            raise ValidationError({self.page_query_param: ["Give one page number."]})
        if not PAGE_NUMBER.fullmatch(values[0]) or int(values[0]) > MAX_PAGE:
            message = f"A page number is a whole number from 1 to {MAX_PAGE}; 1 is the first page."
            raise ValidationError({self.page_query_param: [message]})
        return int(values[0])

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_query_param:
                parameter["description"] = (
                    "A page number from 1 (the first page). Another value is a 400 naming "
                    "`page`; a page after the last one is a 404."
                )
                parameter["schema"] = {"type": "integer", "minimum": 1, "maximum": MAX_PAGE}
        return parameters
