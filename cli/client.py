"""The portal's REST API over HTTP (``/api/v1/``), its errors turned into ``ApiError``."""

from __future__ import annotations

from typing import Any

import requests

from cli.config import Target

TIMEOUT_S = 30
MOST_PAGES = 20  # a list read whole stops there (1,000 rows at the API's 50 a page)


class ApiError(Exception):
    """The API refused (its own words, field errors included) or could not be reached."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


def describe(response: requests.Response) -> str:
    """The API's error as a person reads it: its detail, then each field's errors."""
    try:
        body = response.json()
    except ValueError:
        return f"HTTP {response.status_code}: {response.text.strip()[:500]}"
    if not isinstance(body, dict):
        return f"HTTP {response.status_code}: {body}"
    lines = [f"{body.get('detail', 'Error')} (HTTP {response.status_code}, {body.get('code', '')})"]
    errors = body.get("errors") or {}
    for field, messages in errors.items() if isinstance(errors, dict) else []:
        for message in messages if isinstance(messages, list) else [messages]:
            lines.append(f"  {field}: {message}")
    if isinstance(errors, dict) and "cluster" in errors:
        lines.append("  Name it with --cluster NAME, QM_CLUSTER, or cluster: in your context.")
    if body.get("clusters"):
        lines.append(f"  clusters: {', '.join(body['clusters'])}")
    return "\n".join(lines)


class Client:
    def __init__(self, target: Target) -> None:
        self.target = target
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {target.token}"
        self.session.headers["Accept"] = "application/json"

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> requests.Response:
        url = f"{self.target.url}/api/v1/{path.lstrip('/')}"
        try:
            response = self.session.request(
                method, url, params=params, json=body, headers=headers, timeout=TIMEOUT_S
            )
        except requests.RequestException as exc:
            raise ApiError(f"cannot reach the portal at {self.target.url}: {exc}") from exc
        if response.status_code >= 400:
            raise ApiError(describe(response), response.status_code)
        return response

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params={k: v for k, v in params.items() if v}).json()

    def get_all(self, path: str, **params: Any) -> list[Any]:
        """Every row of a paginated list (its ``results``, page after page, up to
        ``MOST_PAGES``); a list the API serves whole is returned as it is."""
        rows: list[Any] = []
        for page in range(1, MOST_PAGES + 1):
            body = self.get(path, **params, page=page if page > 1 else None)
            if not isinstance(body, dict) or "results" not in body:
                return list(body)
            rows += body["results"]
            if not body.get("next"):
                break
        return rows

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self.request("POST", path, body=body).json()

    def at_cluster(self, path: str) -> str:
        """``path`` under the asked cluster's own route (``clusters/<name>/...``), or the
        flat route when no cluster was asked for."""
        return f"clusters/{self.target.cluster}/{path}" if self.target.cluster else path


def pending_decisions(api: Client, cluster: str = "") -> dict[str, Any]:
    """The MIG changes (and drains) and quota requests waiting for a decision that the
    token's user may take: those they asked for themselves are left out (nobody decides
    their own request; ``/api/v1/me/`` says who the token is), and so is everything for a
    user who decides nothing (neither an approver nor a platform admin)."""
    me = api.get("me/")
    if not (me.get("approver") or me.get("platform_admin")):
        return {"mig_changes": [], "quota_requests": []}
    on = {"state": "pending", "cluster": cluster}
    return {
        kind: [row for row in api.get_all(path, **on) if row.get("requested_by") != me["username"]]
        for kind, path in (("mig_changes", "mig-changes/"), ("quota_requests", "quota-requests/"))
    }
