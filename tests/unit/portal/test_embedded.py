"""Where the embedded servers keep their data."""

from __future__ import annotations

import pytest

from portal.infra import embedded
from tests.support import ROOT


def test_the_embedded_servers_keep_their_data_in_the_checkouts_data_folder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``.data/`` beside ``manage.py`` (git-ignored, what dev.py stops and the README names),
    wherever the module sits in the package."""
    monkeypatch.delenv("QM_DATA_DIR", raising=False)
    assert embedded.data_dir() == (ROOT / ".data").resolve()
    assert (ROOT / "manage.py").exists()
