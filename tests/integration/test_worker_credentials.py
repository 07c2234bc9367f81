"""A real Celery worker refuses to start when the key it is given cannot decrypt a stored
cluster credential, and says which cluster and what to do; with the right key it starts."""

from __future__ import annotations

from typing import Any

import pytest
from cryptography.fernet import Fernet

from cluster.models import Cluster
from cluster.services import save_cluster
from tests.support import Worker

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_worker_with_the_wrong_key_refuses_to_start_and_says_why(
    platform_admin: Any,
) -> None:
    save_cluster(
        actor=platform_admin,
        cluster=Cluster(
            name="gpu-east",
            display_name="GPU east",
            connection="token",
            api_url="https://10.0.0.1:6443",
        ),
        credential="a-token",
        source="web",
    )
    wrong = Worker("http://127.0.0.1:1", QM_CREDENTIALS_KEY=Fernet.generate_key().decode())
    with pytest.raises(AssertionError, match="the worker did not start") as raised:
        wrong.start()
    assert wrong.process is not None and wrong.process.wait(timeout=10) != 0
    assert (
        "The worker does not start: The stored credentials of cluster 'gpu-east' cannot be "
        "decrypted with QM_CREDENTIALS_KEY"
    ) in str(raised.value)
    right = Worker("http://127.0.0.1:1")
    right.start()
    right.stop()
