"""``manage.py take_back KIND NAMESPACE/NAME --actor USERNAME [--cluster NAME]``: the portal's
fields of a managed object taken back from a change made in the cluster (a forced apply),
audited under the platform admin who asks."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from cluster.models import Cluster
from cluster.services import settings_cluster
from loop.services import take_back_fields


class Command(BaseCommand):
    help = "Apply one managed object with force: its fields are the portal's again."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("kind", help="ResourceQuota, LimitRange, ClusterQueue, ...")
        parser.add_argument("name", help="NAMESPACE/NAME, or NAME for a cluster-wide object.")
        parser.add_argument("--actor", required=True, help="The platform admin asking.")
        parser.add_argument("--cluster", help="Default: the settings' cluster.")

    def handle(self, *args: Any, **options: Any) -> None:
        actor = User.objects.filter(username=options["actor"]).first()
        if actor is None:
            raise CommandError(f"No user {options['actor']!r}.")
        cluster = settings_cluster()
        if options.get("cluster"):
            named = Cluster.objects.filter(name=options["cluster"]).first()
            if named is None:
                raise CommandError(f"No cluster named {options['cluster']!r}.")
            cluster = named
        namespace, _, name = options["name"].rpartition("/")
        try:
            applied = take_back_fields(
                actor=actor,
                cluster=cluster,
                kind=options["kind"],
                namespace=namespace,
                name=name,
                source="command",
            )
        except (PermissionDenied, ValidationError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"{applied} applied with force (resourceVersion {applied.resource_version})."
        )
