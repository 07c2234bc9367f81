"""``manage.py export_manifests [--team SLUG] [--cluster NAME]``: print desired objects as a
YAML stream (for a cluster: the backend and Kueue version it was discovered to serve)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from cluster.models import Cluster
from loop.desired import collect_manifests, to_yaml_stream
from tenants.models import Team


class Command(BaseCommand):
    help = "Print every object the portal manages as YAML, in apply order (kubectl apply -f -)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", help="Only this team's namespaced objects.")
        parser.add_argument("--backend", choices=["kueue", "volcano"], help="Default: setting.")
        parser.add_argument(
            "--kueue-version", choices=["v1beta2", "v1beta1"], help="Default: setting."
        )
        parser.add_argument(
            "--cluster", help="Render for this cluster: what it serves (backend, Kueue version)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        team = options.get("team")
        if team and not Team.objects.filter(slug=team).exists():
            raise CommandError(f"No team with slug {team!r}.")
        cluster = None
        if options.get("cluster"):
            cluster = Cluster.objects.filter(name=options["cluster"]).first()
            if cluster is None:
                raise CommandError(f"No cluster named {options['cluster']!r}.")
        manifests = collect_manifests(
            team_slug=team,
            backend=options.get("backend"),
            version=options.get("kueue_version"),
            cluster=cluster,
        )
        self.stdout.write(to_yaml_stream(manifests), ending="")
