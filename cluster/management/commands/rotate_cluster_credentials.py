"""``manage.py rotate_cluster_credentials``: re-encrypt every stored cluster credential
under the first key of QM_CREDENTIALS_KEY (after putting a new key first; the old one can
be dropped once this has run)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from cluster.credentials import CredentialKeyError
from cluster.services import rotate_cluster_credentials


class Command(BaseCommand):
    help = "Re-encrypt every stored cluster credential under the first QM_CREDENTIALS_KEY."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            count = rotate_cluster_credentials(source="cli")
        except CredentialKeyError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"re-encrypted {count} cluster credential(s) under the first key")
