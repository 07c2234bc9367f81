"""Where ``qm`` finds the portal: ``QM_URL`` and ``QM_TOKEN``, else a context of the
configuration file (``$QM_CONFIG``, or ``~/.config/qm/config.yaml``; YAML or JSON)::

    current-context: training
    contexts:
      - name: training
        url: https://quartermaster.example.org
        token: qm_...
        cluster: training        # optional: the cluster asked about when --cluster is not given

The file holds tokens: it is refused when its group or others may read it."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


class ConfigError(Exception):
    """The configuration cannot be used; the message says how to fix it."""


@dataclass(frozen=True)
class Target:
    url: str
    token: str
    cluster: str


def config_path() -> Path:
    if os.environ.get("QM_CONFIG"):
        return Path(os.environ["QM_CONFIG"])
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "qm" / "config.yaml"


def read_file(path: Path) -> dict[str, Any]:
    """The file's settings, refused when group or others may read it."""
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(
            f"{path} holds API tokens but its group or others may read it "
            f"(mode {stat.S_IMODE(mode):o}); make it yours alone: chmod 600 {path}"
        )
    try:
        loaded = yaml.safe_load(path.read_text())  # JSON is YAML too
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path} cannot be read: {exc}") from exc
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: expected a mapping with contexts and current-context")
    return loaded


def _context(settings: dict[str, Any], name: str, path: Path) -> dict[str, Any]:
    contexts = settings.get("contexts") or []
    if not isinstance(contexts, list):
        raise ConfigError(f"{path}: contexts is a list of {{name, url, token, cluster}}")
    named = {str(c.get("name")): c for c in contexts if isinstance(c, dict)}
    if name not in named:
        known = ", ".join(sorted(named)) or "none"
        raise ConfigError(f"{path}: no context named {name!r} (there are: {known})")
    return dict(named[name])


def resolve(*, context: str | None = None, cluster: str | None = None) -> Target:
    """The portal to talk to: ``QM_URL``/``QM_TOKEN`` win over the file's context (the
    file is read only when one of them is missing or a context is asked for); ``cluster``
    (the ``--cluster`` flag) wins over ``QM_CLUSTER`` and the context's."""
    url = os.environ.get("QM_URL", "")
    token = os.environ.get("QM_TOKEN", "")
    chosen: dict[str, Any] = {}
    path = config_path()
    if context or not (url and token):
        if not path.exists():
            if context:
                raise ConfigError(f"no configuration file {path} to find context {context!r}")
            raise ConfigError(
                "no portal configured: set QM_URL and QM_TOKEN, or write contexts to "
                f"{path} (chmod 600)"
            )
        settings = read_file(path)
        name = context or settings.get("current-context")
        if not name:
            raise ConfigError(f"{path}: no current-context (or give --context NAME)")
        chosen = _context(settings, str(name), path)
    url = url if url and not context else str(chosen.get("url") or url)
    token = token if token and not context else str(chosen.get("token") or token)
    if not url or not token:
        raise ConfigError(f"the context has no {'url' if not url else 'token'}")
    picked = cluster or os.environ.get("QM_CLUSTER") or str(chosen.get("cluster") or "")
    return Target(url=url.rstrip("/"), token=token, cluster=picked)
