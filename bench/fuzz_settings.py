"""Settings of ``bench/fuzz.py``'s server: the test settings on the demo cluster of the run,
tasks kept in the process (no worker: nothing the fuzz asks for reaches the cluster)."""

import os

from portal.settings.test import *  # noqa: F403

KUBE_URL = os.environ.get("KUBE_URL", "")
# A cache database of its own (as bench/api.py's); a broker nobody reads.
CACHES["default"]["LOCATION"] = redis_db(REDIS_URL, 13)  # noqa: F405
CELERY_BROKER_URL = "memory://"
# Thousands of requests: the access log would drown the report (errors are still logged).
LOGGING["loggers"]["quartermaster.access"]["level"] = "WARNING"  # noqa: F405
