"""Settings for the local run command: a fixed development secret, and the portal's own
error pages (debug off unless ``DEBUG=1``: Django's debug 404 lists every URL pattern,
and the run command's logs keep each 500's traceback)."""

from .base import *  # noqa: F403
from .base import BASE_DIR, env_bool, env_secret, env_str

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_secret("SECRET_KEY", "dev-only-insecure-key-change-me")
# A fixed development key for the clusters' stored credentials (never for production).
QM_CREDENTIALS_KEY = env_secret(
    "QM_CREDENTIALS_KEY", "ZGV2LW9ubHktY2x1c3Rlci1jcmVkZW50aWFscy1rZXk="
)

# Serve static files straight from the source folders (no collectstatic needed).
STATIC_ROOT = None
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True

# The sign-in page lists the demo logins once `load_demo` has run.
QM_DEMO_LOGINS = env_bool("QM_DEMO_LOGINS", True)
QM_DEMO_PASSWORD = "quartermaster-demo"  # demo/data.py's (tests/unit/portal/test_demo_logins.py)

# Mail goes to a local outbox, one file per message (the run command prints where): the
# demo users' addresses are at example.com, and nothing leaves the machine.
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.filebased.EmailBackend")
EMAIL_FILE_PATH = env_str("QM_MAIL_DIR", str(BASE_DIR / ".data" / "mail"))

# The run command's web server (Django's runserver) answers in two writes, the headers, then
# the body: with Nagle's algorithm on, the body waits up to 40 ms for the browser's delayed
# ACK of the headers, on every request and htmx swap. gunicorn, which serves the portal in
# production, sets TCP_NODELAY itself; the tests' live server is told so in tests/conftest.py.
from django.core.servers import basehttp  # noqa: E402

basehttp.WSGIRequestHandler.disable_nagle_algorithm = True
