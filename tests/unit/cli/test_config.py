"""Where ``qm`` finds the portal: the environment, the configuration file's contexts, and
the file refused while others may read its tokens."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.config import ConfigError, resolve
from cli.main import duration, main

CONFIG = """
current-context: training
contexts:
  - {name: training, url: "https://qm.example.org/", token: qm_train, cluster: training}
  - {name: inference, url: "https://qm.example.org", token: qm_infer}
"""


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("QM_URL", "QM_TOKEN", "QM_CLUSTER"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG)
    path.chmod(0o600)
    monkeypatch.setenv("QM_CONFIG", str(path))
    return path


def test_the_current_context_or_the_one_named(config: Path) -> None:
    current = resolve()
    assert (current.url, current.token, current.cluster) == (
        "https://qm.example.org",
        "qm_train",
        "training",
    )
    other = resolve(context="inference", cluster="gpu-b")
    assert (other.token, other.cluster) == ("qm_infer", "gpu-b")
    with pytest.raises(
        ConfigError, match=r"no context named 'nope' \(there are: inference, training\)"
    ):
        resolve(context="nope")


def test_the_environment_wins_and_needs_no_file(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QM_URL", "http://127.0.0.1:8000")
    monkeypatch.setenv("QM_TOKEN", "qm_env")
    config.chmod(0o644)  # not read at all
    assert resolve().token == "qm_env"
    assert resolve().cluster == ""


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660])
def test_a_file_group_or_others_may_read_is_refused(config: Path, mode: int) -> None:
    config.chmod(mode)
    with pytest.raises(ConfigError, match=f"chmod 600 {config}"):
        resolve()


def test_nothing_configured_says_what_to_set(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config.unlink()
    assert main(["why", "team-a/train-3g"]) == 2
    assert "set QM_URL and QM_TOKEN" in capsys.readouterr().err


def test_durations_and_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert [duration("90"), duration("90s"), duration("10m"), duration("2h")] == [90, 90, 600, 7200]
    assert main(["wait", "mig-change", "1", "--for", "succeeded", "--timeout", "soon"]) == 2
    assert "is no duration" in capsys.readouterr().err
    assert main(["approve", "namespace", "1"]) == 2
