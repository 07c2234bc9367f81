"""The WSGI application with the settings already configured (for in-process API tests)."""

from django.core.wsgi import get_wsgi_application

application = get_wsgi_application()
