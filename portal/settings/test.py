"""Settings for the test suite: fast hashing, tasks never leave the process by accident."""

import os

from .base import *  # noqa: F403
from .base import REDIS_URL, env_bool, env_secret, redis_db

# Tests use their own Redis databases, so a developer's running worker never sees them, and
# each test process of a parallel run (pytest-xdist's gw0, gw1, ...) has three of its own
# (its Celery worker processes inherit PYTEST_XDIST_WORKER, so they use the same).
_PROCESS = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
if _PROCESS > 3:  # databases 0-3 belong to a developer's own run
    raise RuntimeError("At most four test processes share one Redis (pytest -n 4).")
CELERY_BROKER_URL = redis_db(REDIS_URL, 15 - 3 * _PROCESS)
CACHES["default"]["LOCATION"] = redis_db(REDIS_URL, 14 - 3 * _PROCESS)  # noqa: F405
# No cluster unless a test points at its demo cluster (a test's worker gets it by env).
if not env_bool("QM_TEST_WORKER", False):
    KUBE_URL = ""
    KUBECONFIG = ""
    KUBE_IN_CLUSTER = False

SECRET_KEY = "test-only-key"
# A fixed key for the clusters' stored credentials (a test's worker may be given another).
QM_CREDENTIALS_KEY = env_secret(
    "QM_CREDENTIALS_KEY", "dGVzdC1vbmx5LWNsdXN0ZXItY3JlZGVudGlhbHMtayE="
)
DEBUG = False
# A fast hasher for the many users tests make (tests/unit/portal/test_password_hashing.py uses
# the real ones).
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# Serve static files straight from the source folders (no collectstatic needed).
STATIC_ROOT = None
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
QM_METRICS_REDIS_URL = redis_db(REDIS_URL, 13 - 3 * _PROCESS)
# Tests mint a token wherever they need one (tests/support.py bearer): the cap of a
# person's live tokens has a test of its own, with its own value.
QM_API_TOKENS_PER_USER = 10_000
# The suite's databases are thrown away after the run: a commit need not wait for its WAL to
# reach the disk (about a millisecond each, and the suite commits tens of thousands of times:
# every transactional test's flush and demo restore, every request of a live server). A
# crash loses only the last moments of a database nobody keeps.
_OPTIONS = DATABASES["default"].setdefault("OPTIONS", {})  # noqa: F405
_OPTIONS["options"] = f"{_OPTIONS.get('options', '')} -c synchronous_commit=off".strip()
# A flush deletes the rows a test wrote instead of truncating every table (tests/postgres).
DATABASES["default"]["ENGINE"] = "tests.postgres"  # noqa: F405
