"""Settings for the test suite: fast hashing, tasks never leave the process by accident."""

from .base import *  # noqa: F403
from .base import REDIS_URL, env_bool, redis_db

# Tests use their own Redis database, so a developer's running worker never sees them.
CELERY_BROKER_URL = redis_db(REDIS_URL, 15)
CACHES["default"]["LOCATION"] = redis_db(REDIS_URL, 14)  # noqa: F405
# No cluster unless a test points at its demo cluster (a test's worker gets it by env).
if not env_bool("QM_TEST_WORKER", False):
    KUBE_URL = ""
    KUBECONFIG = ""
    KUBE_IN_CLUSTER = False

SECRET_KEY = "test-only-key"
DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# Serve static files straight from the source folders (no collectstatic needed).
STATIC_ROOT = None
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
QM_METRICS_REDIS_URL = redis_db(REDIS_URL, 12)
QM_EXPLAINER_RECHECK_SECONDS = 0.0  # every test sees the fleet it just wrote
