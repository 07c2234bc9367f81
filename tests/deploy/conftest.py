"""Deployment tests render the real files with the real tools (kubectl kustomize,
docker-compose). Without the tool a developer's run skips them; CI (CI=true) fails."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
OVERLAYS = ["deploy/base", "deploy/overlays/production"]


def need(tool: str) -> str:
    path = shutil.which(tool)
    if path:
        return path
    if os.environ.get("CI"):
        pytest.fail(f"{tool} is needed for the deployment tests and is not installed")
    pytest.skip(f"{tool} is not installed")


def kustomize(folder: str) -> list[dict[str, Any]]:
    """The objects ``kubectl kustomize folder`` renders."""
    out = subprocess.run(
        [need("kubectl"), "kustomize", str(ROOT / folder)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def cluster_role(folder: str = "deploy/overlays/production") -> dict[str, Any]:
    (role,) = [o for o in kustomize(folder) if o["kind"] == "ClusterRole"]
    return role
