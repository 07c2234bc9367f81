"""Settings of ``bench/api.py``'s server: the test settings, plus the baseline list views."""

import os

os.environ.setdefault("ACCESS_LOG", "false")  # a line per request would be the bench's noise

from portal.settings.test import *  # noqa: F403

ROOT_URLCONF = "api_urls"
# A cache database of its own: the benchmark token's rate-limit history stays here.
CACHES["default"]["LOCATION"] = redis_db(REDIS_URL, 13)  # noqa: F405
