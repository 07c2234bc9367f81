from __future__ import annotations

from django.conf import settings
from django.db import models


class HomeVisit(models.Model):
    """When a user last looked at their home, as of the poll the page showed: work that
    started after it is marked new on the next visit (a Pending pod that starts moves to the
    running list, marked, instead of just leaving the page)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", primary_key=True
    )
    seen_at = models.DateTimeField(help_text="The observation the home showed on the last visit.")

    def __str__(self) -> str:
        return f"{self.user_id} saw their home as of {self.seen_at:%Y-%m-%d %H:%M}"
