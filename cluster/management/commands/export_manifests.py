"""``manage.py export_manifests [--team SLUG]``: print desired objects as a YAML stream."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from cluster.desired import collect_manifests, to_yaml_stream
from tenants.models import Team


class Command(BaseCommand):
    help = "Print every object the portal manages as YAML, in apply order (kubectl apply -f -)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", help="Only this team's namespaced objects.")
        parser.add_argument("--backend", choices=["kueue", "volcano"], help="Default: setting.")
        parser.add_argument(
            "--kueue-version", choices=["v1beta2", "v1beta1"], help="Default: setting."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        team = options.get("team")
        if team and not Team.objects.filter(slug=team).exists():
            raise CommandError(f"No team with slug {team!r}.")
        manifests = collect_manifests(
            team_slug=team, backend=options.get("backend"), version=options.get("kueue_version")
        )
        self.stdout.write(to_yaml_stream(manifests), ending="")
