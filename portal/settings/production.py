"""Settings for production: everything from the environment, no defaults for secrets."""

from .base import *  # noqa: F403
from .base import SECRET_KEY, env_bool, env_int

if not SECRET_KEY:
    raise RuntimeError("SECRET_KEY (or SECRET_KEY_FILE) must be set in production")

# The demo's password is public: production never lists it, whatever the environment says.
QM_DEMO_LOGINS = False
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", True)
CSRF_COOKIE_SECURE = env_bool("SECURE_COOKIES", True)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# /metrics: a bearer token (QM_METRICS_TOKEN, in the Secret) or, where a NetworkPolicy keeps
# the port private, QM_METRICS_PUBLIC=true; neither: /metrics answers 403.
QM_METRICS_PUBLIC = env_bool("QM_METRICS_PUBLIC", False)
# Behind one ingress: the sign-in throttle takes the address it appended to X-Forwarded-For.
QM_TRUSTED_PROXIES = env_int("QM_TRUSTED_PROXIES", 1)
# Behind an ingress that terminates TLS: plain HTTP is redirected, except the probes and the
# metrics scrape, which reach the pod directly.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000)
# HSTS for sibling subdomains and the browsers' preload list are decisions for the whole
# domain, not for one portal: off unless set, and then `check --deploy` need not nag about it.
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SILENCED_SYSTEM_CHECKS = [
    *(() if SECURE_HSTS_INCLUDE_SUBDOMAINS else ("security.W005",)),
    *(() if SECURE_HSTS_PRELOAD else ("security.W021",)),
]
SECURE_CONTENT_TYPE_NOSNIFF = True
# People's webhook URLs are secrets: only over TLS.
QM_NOTIFY_HTTPS_ONLY = env_bool("QM_NOTIFY_HTTPS_ONLY", True)
SECURE_REFERRER_POLICY = "same-origin"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
