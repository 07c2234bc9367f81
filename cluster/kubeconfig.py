"""What a stored kubeconfig may hold: inline data only (pure, no I/O).

The Kubernetes client does whatever a kubeconfig says: an ``exec`` credential plugin or an
``auth-provider``'s ``cmd-path`` runs a command on the portal's machines (in the web
process at "Test connection", in the worker at every poll), and ``tokenFile``,
``client-certificate``, ``client-key`` or ``certificate-authority`` read a file there (the
worker's own service-account token, say) and send it to a server of the kubeconfig's
choosing. A kubeconfig is typed by a platform admin, so none of that is allowed: only
``token``, ``*-data`` and ``username``/``password`` inline. EKS and GKE users authenticate
through exec plugins, so the operator (environment, not the portal) may allow named
commands: ``QM_KUBECONFIG_EXEC_ALLOWED=aws,gke-gcloud-auth-plugin``. A command is matched
by its exact text (``aws`` is not ``/tmp/aws``), and an allowed plugin may not set the
variables that choose what runs (``PATH``, ``LD_*``, ``DYLD_*``, ``PYTHON*``).

Checked when a kubeconfig is saved (the credential's field errors) and again before every
use, so one stored before this rule never runs either.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import yaml

# Keys that name a file on the portal's machines, and their inline spelling.
USER_FILES = {
    "tokenFile": "token",
    "token-file": "token",
    "client-certificate": "client-certificate-data",
    "client-key": "client-key-data",
}
CLUSTER_FILES = {"certificate-authority": "certificate-authority-data"}
RISKY_ENV = ("PATH", "LD_", "DYLD_", "PYTHON")


def parse(text: str) -> tuple[dict[str, Any] | None, str]:
    """The kubeconfig in ``text`` and why it cannot be one ("" when it is)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return None, "This is not YAML: paste the whole kubeconfig."
    if not isinstance(data, dict):
        return None, "This is not a kubeconfig (a YAML mapping with clusters, users, contexts)."
    return data, ""


def _named(entries: Any, inner: str) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get(inner), dict):
            found.append((str(entry.get("name") or "?"), entry[inner]))
    return found


def _exec_refusal(name: str, plugin: Any, allowed: Collection[str]) -> str:
    command = str(plugin.get("command") or "") if isinstance(plugin, dict) else ""
    if command not in allowed:
        names = ", ".join(sorted(allowed)) or "none"
        return (
            f"User {name!r}: an exec credential plugin would run {command or 'a command'!r} on "
            "the portal's machines; only the commands the operator allows may run "
            f"(QM_KUBECONFIG_EXEC_ALLOWED: {names}). Use a token, or a client certificate "
            "given inline."
        )
    env = plugin.get("env") if isinstance(plugin, dict) else None
    for variable in env if isinstance(env, list) else []:
        variable_name = str(variable.get("name") or "") if isinstance(variable, dict) else ""
        if variable_name.upper().startswith(RISKY_ENV):
            return (
                f"User {name!r}: the exec plugin may not set {variable_name} (it would "
                "choose what runs)."
            )
    return ""


def refusals(data: dict[str, Any], *, allowed_exec: Collection[str] = ()) -> list[str]:
    """Why the kubeconfig ``data`` may not be used (empty: it carries inline data only,
    or exec plugins the operator allowed)."""
    found = []
    for name, user in _named(data.get("users"), "user"):
        if "exec" in user:
            refusal = _exec_refusal(name, user["exec"], allowed_exec)
            if refusal:
                found.append(refusal)
        if "auth-provider" in user:
            found.append(
                f"User {name!r}: an auth-provider may run a command (cmd-path) or read files "
                "on the portal's machines; use a token or a client certificate given inline."
            )
        for key, inline in USER_FILES.items():
            if key in user:
                found.append(
                    f"User {name!r}: {key} would read a file on the portal's machines; give "
                    f"its content inline ({inline})."
                )
    for name, cluster in _named(data.get("clusters"), "cluster"):
        for key, inline in CLUSTER_FILES.items():
            if key in cluster:
                found.append(
                    f"Cluster {name!r}: {key} would read a file on the portal's machines; "
                    f"give its content inline ({inline})."
                )
    return found
