"""Settings of ``bench/pages.py``'s server: production settings (DEBUG off, cached
templates, secure cookies off for plain HTTP), plus the baseline pages."""

import os

os.environ.setdefault("SECRET_KEY", "bench-only-secret")
os.environ.setdefault("SECURE_COOKIES", "false")
os.environ.setdefault("SECURE_SSL_REDIRECT", "false")  # plain HTTP on loopback
os.environ.setdefault("SECURE_HSTS_SECONDS", "0")
os.environ.setdefault("ACCESS_LOG", "false")  # a line per request would be the bench's noise

from portal.settings.production import *  # noqa: F403
from portal.settings.production import REDIS_URL, redis_db

ROOT_URLCONF = "pages_urls"
# Static files from the source folders (no collectstatic step for a benchmark).
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": redis_db(REDIS_URL, 13),
    }
}
