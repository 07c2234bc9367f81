"""WSGI entry point (gunicorn ``portal.wsgi:application``).

Once the portal is loaded (its settings, apps and every view module, imported here rather than
on the first request), what is in memory then lives as long as the process: ``gc.freeze()``
moves it out of the collector's sight. A full collection then walks what requests made, not
the whole of Django and the portal (about 170,000 objects): it took about 100 ms, a pause for
every thread of the process, and now takes a few."""

import gc
import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.production")
application = get_wsgi_application()
get_resolver().url_patterns  # noqa: B018 - imports every view module now, not on a request
gc.freeze()
