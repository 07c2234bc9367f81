"""``qm``, the installed console script, run as a subprocess against the portal served on
the demo scenario and cluster: it talks HTTP with a personal API token and nothing else."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from changes.executor import advance
from tests.integration.conftest import token
from tests.support import wait_for
from usage.sampling import roll_up, take_sample

pytestmark = pytest.mark.django_db(transaction=True)
QM = Path(sys.executable).with_name("qm")


def qm(*args: str, home: Path, url: str = "", token: str = "") -> subprocess.CompletedProcess[str]:
    """``qm ARGS`` with only ``QM_URL``/``QM_TOKEN`` (when given) and a home of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QM_")}
    env |= {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    if url:
        env |= {"QM_URL": url, "QM_TOKEN": token}
    return subprocess.run([str(QM), *args], env=env, capture_output=True, text=True, timeout=60)


def test_why_tells_the_seed_incidents_waiting_workload_for_people_and_scripts(
    portal: str, tmp_path: Path
) -> None:
    lead = token("lead-a")
    ran = qm("why", "team-a/train-3g", home=tmp_path, url=portal, token=lead)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("Pod team-a/train-3g on ")
    assert "cause:" in ran.stdout and "estimate:" in ran.stdout
    ran = qm("why", "team-a/train-3g", "-o", "json", home=tmp_path, url=portal, token=lead)
    assert ran.returncode == 0, ran.stderr
    (row,) = json.loads(ran.stdout)
    assert (row["kind"], row["namespace"], row["name"]) == ("Pod", "team-a", "train-3g")
    assert "3g.40gb" in row["cause"] + " ".join(row["evidence"])
    assert set(row["estimate"]) >= {"summary", "basis"}
    # Nothing by that name: said on stderr, exit 1.
    ran = qm("why", "team-a/no-such-pod", home=tmp_path, url=portal, token=lead)
    assert (ran.returncode, ran.stdout) == (1, "")
    assert "nothing waits as team-a/no-such-pod" in ran.stderr


def test_the_apis_refusal_is_shown_on_stderr_with_its_field_errors(
    portal: str, tmp_path: Path
) -> None:
    lead = token("lead-a")
    # Another team's namespace: the API's 400 names the field and the namespaces that do.
    ran = qm("why", "team-b/dev-test-1g", home=tmp_path, url=portal, token=lead)
    assert (ran.returncode, ran.stdout) == (3, "")
    assert "Invalid input. (HTTP 400, invalid)" in ran.stderr
    assert "namespace: No such namespace among your teams'" in ran.stderr
    ran = qm(
        "quota", "request", "--team", "team-a", "--kind", "namespace", "--namespace", "team-a",
        "--resource", "requests.nvidia.com/gpu", "--requested", "lots", "--reason", "more",
        home=tmp_path, url=portal, token=lead,
    )  # fmt: skip
    assert (ran.returncode, ran.stdout) == (3, "")
    assert "requested" in ran.stderr, ran.stderr
    ran = qm("why", "team-a/train-3g", home=tmp_path, url=portal, token="qm_not-a-token")
    assert ran.returncode == 3
    assert "HTTP 401" in ran.stderr


def test_a_config_file_others_may_read_is_refused_until_chmod_600(
    portal: str, tmp_path: Path
) -> None:
    config = tmp_path / ".config" / "qm" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(
        "current-context: demo\n"
        "contexts:\n"
        f"  - {{name: demo, url: '{portal}', token: '{token('lead-a')}', cluster: default}}\n"
    )
    config.chmod(0o644)
    ran = qm("why", "team-a/train-3g", home=tmp_path)
    assert (ran.returncode, ran.stdout) == (2, "")
    assert f"chmod 600 {config}" in ran.stderr
    config.chmod(0o600)
    ran = qm("why", "team-a/train-3g", "-o", "yaml", home=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "name: train-3g" in ran.stdout
    # The context's cluster is the one asked about; --cluster names another.
    ran = qm("why", "team-a/train-3g", "--cluster", "nowhere", home=tmp_path)
    assert ran.returncode == 3
    assert "cluster: No such cluster: use one of default." in ran.stderr


def test_a_quota_request_approved_with_its_fingerprint_and_reported(
    portal: str, tmp_path: Path
) -> None:
    lead, approver = token("lead-a"), token("approver")
    ran = qm(
        "quota", "request", "--team", "team-a", "--kind", "namespace", "--namespace", "team-a",
        "--resource", "requests.nvidia.com/gpu", "--requested", "9", "--reason", "a sweep",
        "-o", "json", home=tmp_path, url=portal, token=lead,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    created = json.loads(ran.stdout)
    assert (created["state"], created["requested"]) == ("pending", "9")
    ident, fingerprint = str(created["id"]), created["assessment"]["fingerprint"]
    # What waits for the approver's decision, for a script: the request and its fingerprint.
    ran = qm("pending", "-o", "json", home=tmp_path, url=portal, token=approver)
    assert ran.returncode == 0, ran.stderr
    (waiting,) = [r for r in json.loads(ran.stdout) if r["id"] == created["id"]]
    assert (waiting["type"], waiting["requested_by"], waiting["fingerprint"]) == (
        "quota-request",
        "lead-a",
        fingerprint,
    )
    ran = qm("pending", home=tmp_path, url=portal, token=approver)
    assert ran.stdout.splitlines()[0].split()[:3] == ["TYPE", "ID", "CLUSTER"]
    # Another fingerprint than the assessment's: the API's 409 on stderr.
    ran = qm(
        "approve", "quota-request", ident, "--fingerprint", "0" * 16,
        home=tmp_path, url=portal, token=approver,
    )  # fmt: skip
    assert ran.returncode == 3
    assert "HTTP 409" in ran.stderr
    ran = qm(
        "approve", "quota-request", ident, "--fingerprint", fingerprint,
        home=tmp_path, url=portal, token=approver,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "state:" in ran.stdout and "approved" in ran.stdout
    # What runs on the demo cluster, sampled twice a day ago, then rolled up.
    yesterday = timezone.now() - dt.timedelta(days=1)
    take_sample(now=yesterday, force=True)
    take_sample(now=yesterday + dt.timedelta(minutes=5), force=True)
    roll_up(now=timezone.now())
    csv = ("report", "gpu-hours", "--days", "30", "-o", "csv")
    ran = qm(*csv, home=tmp_path, url=portal, token=approver)
    assert ran.returncode == 0, ran.stderr
    header, *lines = ran.stdout.splitlines()
    assert header.startswith("team,gpu_hours,device_hours")
    assert lines and all(line.split(",")[0].startswith("team-") for line in lines)
    ran = qm("report", "gpu-hours", "--days", "30", home=tmp_path, url=portal, token=approver)
    assert ran.stdout.splitlines()[0].startswith("TEAM  ")


def test_qm_wait_follows_the_seed_incidents_mig_change_to_succeeded(
    portal: str, portal_cluster: Any, tmp_path: Path
) -> None:
    lead, approver = token("lead-a"), token("approver")
    ran = qm(
        "mig", "create", "gpu-a100-03", "--team", "team-a", "--config", "all-3g.40gb",
        "--reason", "gpu-a100-03 was left on a test layout", "-o", "json",
        home=tmp_path, url=portal, token=lead,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    ident = str(json.loads(ran.stdout)["id"])
    ran = qm("get", "mig-change", ident, "-o", "json", home=tmp_path, url=portal, token=lead)
    fingerprint = json.loads(ran.stdout)["assessment"]["fingerprint"]
    ran = qm(
        "approve", "mig-change", ident, "--fingerprint", fingerprint, "--comment", "go",
        home=tmp_path, url=portal, token=approver,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith("QM_")}
    waiting = subprocess.Popen(
        [str(QM), "wait", "mig-change", ident, "--for", "succeeded", "--timeout", "2m",
         "--interval", "1s", "-o", "json"],
        env={**env, "HOME": str(tmp_path), "QM_URL": portal, "QM_TOKEN": lead},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    # The executor's steps, run here against the demo cluster (as the worker runs them).
    wait_for(
        lambda: advance(int(ident), gateway=portal_cluster).kind != "wait",
        timeout=60,
        what="the change to settle",
    )
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, err
    assert json.loads(out)["state"] == "succeeded"
    assert f"mig-change {ident}: succeeded" in err.splitlines()
    # Awaiting another final state of a change that ended: exit 1; a state never final: 2.
    ran = qm("wait", "mig-change", ident, "--for", "failed", home=tmp_path, url=portal, token=lead)
    assert ran.returncode == 1
    ran = qm("wait", "mig-change", ident, "--for", "running", home=tmp_path, url=portal, token=lead)
    assert ran.returncode == 2
    assert "a final state" in ran.stderr
    # Only platform admins roll back; theirs undoes the steps that ran.
    ran = qm("mig", "rollback", ident, home=tmp_path, url=portal, token=approver)
    assert (ran.returncode, ran.stdout) == (3, "")
    assert "HTTP 403" in ran.stderr
    admin = token("admin")
    ran = qm("mig", "abort", ident, home=tmp_path, url=portal, token=admin)
    assert ran.returncode == 3, ran.stdout  # nothing runs to abort
    ran = qm("mig", "rollback", ident, "-o", "json", home=tmp_path, url=portal, token=admin)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["state"] == "rolling_back"


def test_the_mig_plan_a_what_if_and_a_change_cancelled_on_the_fingerprint_read(
    portal: str, tmp_path: Path
) -> None:
    lead = token("lead-a")
    ran = qm("mig", "plan", home=tmp_path, url=portal, token=lead)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("MIG plan of default: highs")
    assert "train  all-3g.40gb    gpu-a100-03  breaks_quota" in ran.stdout
    assert "asked by: 2 Pending pods in team-b" in ran.stdout  # counted, never named
    # The what-if of a ClusterQueue entry, and of a namespace quota item without its value.
    what_if = (
        "what-if", "--cluster-queue", "cq-train", "--flavor", "a100-80gb-3g",
        "--resource", "nvidia.com/mig-3g.40gb", "--nominal-quota", "32",
    )  # fmt: skip
    ran = qm(*what_if, "--cluster", "default", home=tmp_path, url=portal, token=lead)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("Admitted, in order:\n")
    assert "Preempted:" in ran.stdout and "not modelled:" in ran.stdout
    ran = qm(
        "what-if", "--namespace", "team-a", "--resource", "requests.nvidia.com/gpu",
        home=tmp_path, url=portal, token=lead,
    )  # fmt: skip
    assert (ran.returncode, ran.stdout) == (3, "")
    assert "hard: This field is required." in ran.stderr
    ran = qm(
        "what-if", "--namespace", "team-a", "--resource", "requests.nvidia.com/gpu",
        "--hard", "24", home=tmp_path, url=portal, token=lead,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "eval-sweep" in ran.stdout
    # A change asked for, then cancelled on the fingerprint its requester read.
    ran = qm(
        "mig", "create", "gpu-a100-03", "--team", "team-a", "--config", "all-3g.40gb",
        "--reason", "back to its pool's layout", "-o", "json",
        home=tmp_path, url=portal, token=lead,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    created = json.loads(ran.stdout)
    ident, fingerprint = str(created["id"]), created["assessment"]["fingerprint"]
    ran = qm(
        "mig", "cancel", ident, "--fingerprint", "0" * 16, home=tmp_path, url=portal, token=lead
    )
    assert (ran.returncode, ran.stdout) == (3, "")
    assert f"changed since: its assessment's fingerprint is now {fingerprint}" in ran.stderr
    ran = qm(
        "mig", "cancel", ident, "--fingerprint", fingerprint, home=tmp_path, url=portal, token=lead
    )
    assert ran.returncode == 0, ran.stderr
    assert "cancelled" in ran.stdout
    ran = qm("mig", "create", "--team", "team-a", home=tmp_path, url=portal, token=lead)
    assert ran.returncode == 2  # argparse: the nodes, --config and --reason are missing
