"""Settings shared by every environment. The environment is read here and only here.

Every variable is documented in the README ("Configuration").
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import dj_database_url

from portal.infra import embedded

BASE_DIR = Path(__file__).resolve().parent.parent.parent


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    if value.lower() in {"1", "true", "yes", "on"}:
        return True
    if value.lower() in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"{name}={value!r} is not a boolean (use true/false)")


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return default if value in (None, "") else int(value)


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def env_secret(name: str, default: str = "") -> str:
    """Read ``NAME`` or, for mounted Kubernetes Secrets, the file named by ``NAME_FILE``."""
    file_name = os.environ.get(f"{name}_FILE")
    if file_name:
        return Path(file_name).read_text().strip()
    return os.environ.get(name, default)


DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_secret("SECRET_KEY")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "mozilla_django_oidc",
    "template_partials",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    # The ground floor, then the apps in the order of the loop (see docs/architecture.md).
    "portal",
    "tenants",
    "queues",
    "fleet",
    "cluster",
    "loop",
    "changes",
    "health",
    "idle",
    "diagnostics",
    "usage",
    "costs",
    "budgets",
    "overview",
    "demo",
]

MIDDLEWARE = [
    "portal.infra.observability.RequestIdMiddleware",
    "portal.infra.middleware.RefuseNulMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "portal.access.permissions.RoleCacheMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",
]

# Content-Security-Policy on every answer (django-csp): scripts, styles, images and
# requests from the portal itself only; no inline script or style element, no eval (htmx
# runs with allowEval off), style attributes only as the CSSOM sets them; no framing; forms
# post to the portal (and the IdP's sign-in page, where single sign-on is on).
CSP_FORM_TARGETS = ["'self'"] + [
    f"{urlsplit(url).scheme}://{urlsplit(url).netloc}"
    for url in [env_str("OIDC_OP_AUTHORIZATION_ENDPOINT")]
    if url.startswith(("https://", "http://"))
]
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "frame-ancestors": ["'none'"],
        "form-action": CSP_FORM_TARGETS,
    }
}

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "portal.context_processors.portal",
                "overview.workspace.nav_counts",
                "portal.context_processors.notifications",
                "overview.freshness.clusters",
            ],
        },
    },
]

# --- PostgreSQL: DATABASE_URL, or the embedded server -------------------------------------
DATABASE_URL = env_str("DATABASE_URL")
DATABASES: dict[str, dict[str, Any]]
if DATABASE_URL:
    DATABASES = {"default": dict(dj_database_url.parse(DATABASE_URL))}
else:
    DATABASES = {"default": embedded.ensure_postgres()}
# Each web thread and worker keeps its connection (checked at the start of each request, so
# one the server closed is opened again): a new one costs a connect and a backend whose
# caches start cold, which made every page's first request on it twice as slow (the home:
# 13 -> 29 ms). DATABASE_CONN_MAX_AGE (seconds) closes them after that long instead.
_MAX_AGE = env_str("DATABASE_CONN_MAX_AGE")
DATABASES["default"]["CONN_MAX_AGE"] = int(_MAX_AGE) if _MAX_AGE else None
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# The pages' batched reads (portal/infra/round_trips.py) are prepared statements once seen a
# few times: PostgreSQL then skips planning them (about half of their cost). Set it to false
# behind a connection pooler in transaction mode that does not keep prepared statements (PgBouncer
# before 1.21, or max_prepared_statements = 0): the reads are then sent as one statement.
if env_bool("DATABASE_PREPARED_STATEMENTS", True):
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("prepare_threshold", 5)
# PostgreSQL compiles a statement whose estimated cost is above ``jit_above_cost`` with LLVM
# (on by default where the server has it, as the postgres images do). The pages' reads over
# JSON arrays are estimated at a hundred elements an array (a few are there), so several
# passed the threshold and spent 0.1-2.7 s compiling a statement that runs in milliseconds
# (a ClusterQueue's editor at the scale scenario: 700 ms, against 13 ms without). Every
# connection of the portal asks for it off; DATABASE_JIT=true leaves the server's setting
# (behind a pooler that refuses the ``options`` startup parameter: turn it off on the
# role instead, ``ALTER ROLE ... SET jit = off``).
if not env_bool("DATABASE_JIT", False):
    _OPTIONS = DATABASES["default"].setdefault("OPTIONS", {})
    _OPTIONS["options"] = " ".join(filter(None, [_OPTIONS.get("options", ""), "-c jit=off"]))
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis and Celery: REDIS_URL, or the embedded server ----------------------------------


def redis_db(url: str, db: int) -> str:
    """The same Redis server as ``url``, database ``db``."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{db}", parts.query, parts.fragment))


REDIS_URL = env_str("REDIS_URL") or embedded.ensure_redis()
CELERY_BROKER_URL = REDIS_URL
# The cache (API rate limits) is shared by every web process: Redis database 1.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": redis_db(REDIS_URL, 1),
        "KEY_PREFIX": "qm",
    }
}
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = False  # set per task, only on idempotent ones
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 300)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 360)
# Above the longest countdown a task schedules itself with, so no task is delivered twice.
# A task whose worker died unacknowledged is handed out again after visibility_timeout;
# workers look for such tasks every unacked_restore_interval seconds.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600),
    "unacked_restore_interval": env_int("CELERY_RESTORE_INTERVAL", 10),
    "unacked_restore_throttle": 1,
    # The lock around that look lasts milliseconds; a worker killed while holding it would
    # stop every worker's restoring for its expiry (kombu's default: five minutes).
    "unacked_mutex_expire": 10,
    # A broker that is down or hung costs a publish two seconds at most, never a hang (the
    # worker's BRPOP answers within its one-second timeout, well inside these).
    "socket_timeout": 2.0,
    "socket_connect_timeout": 1.0,
}
CELERY_BROKER_CONNECTION_TIMEOUT = 1.0
# One quick retry, then the publish gives up: what a request queues is in the outbox
# (portal/infra/outbox.py) and the relay sends it when the broker is back.
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 1,
    "interval_start": 0,
    "interval_step": 0.2,
    "interval_max": 0.2,
}
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]

# Argon2 (Django's recommendation, argon2-cffi) hashes new passwords; a PBKDF2 hash stored
# before is checked once more and replaced by an Argon2 one at that sign-in (Django upgrades a
# hash whose algorithm is not the first hasher's).
PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.Argon2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
    "django.contrib.auth.hashers.ScryptPasswordHasher",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "start"  # the workspace for deciders, the team home for the rest
LOGOUT_REDIRECT_URL = "login"

# --- Single sign-on (OpenID Connect), on when OIDC_RP_CLIENT_ID is set ----------------------
# The IdP's endpoints come from its discovery document (.well-known/openid-configuration).
OIDC_RP_CLIENT_ID = env_str("OIDC_RP_CLIENT_ID")
OIDC_RP_CLIENT_SECRET = env_secret("OIDC_RP_CLIENT_SECRET")
OIDC_OP_AUTHORIZATION_ENDPOINT = env_str("OIDC_OP_AUTHORIZATION_ENDPOINT")
OIDC_OP_TOKEN_ENDPOINT = env_str("OIDC_OP_TOKEN_ENDPOINT")
OIDC_OP_USER_ENDPOINT = env_str("OIDC_OP_USER_ENDPOINT")
OIDC_OP_JWKS_ENDPOINT = env_str("OIDC_OP_JWKS_ENDPOINT")
OIDC_RP_SIGN_ALGO = env_str("OIDC_RP_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = env_str("OIDC_RP_SCOPES", "openid email profile")
OIDC_VERIFY_SSL = env_bool("OIDC_VERIFY_SSL", True)
OIDC_TIMEOUT = env_int("OIDC_TIMEOUT", 10)
OIDC_CREATE_USER = True
OIDC_USE_PKCE = env_bool("OIDC_USE_PKCE", True)
LOGIN_REDIRECT_URL_FAILURE = "/login/?sso=failed"
QM_OIDC_ENABLED = bool(OIDC_RP_CLIENT_ID)
# What the sign-in button says, e.g. "Keycloak" or "Company SSO".
QM_OIDC_PROVIDER_NAME = env_str("QM_OIDC_PROVIDER_NAME", "single sign-on")
QM_OIDC_USERNAME_CLAIM = env_str("QM_OIDC_USERNAME_CLAIM", "preferred_username")
QM_OIDC_GROUPS_CLAIM = env_str("QM_OIDC_GROUPS_CLAIM", "groups")
# Groups that make someone a platform admin / an approver.
QM_OIDC_ADMIN_GROUPS = env_list("QM_OIDC_ADMIN_GROUPS", [])
QM_OIDC_APPROVER_GROUPS = env_list("QM_OIDC_APPROVER_GROUPS", [])
# Groups that make someone a lead, member or viewer of a team, e.g. quartermaster:team-a:lead.
QM_OIDC_TEAM_GROUP_PATTERN = env_str("QM_OIDC_TEAM_GROUP_PATTERN", "quartermaster:{team}:{role}")
# Username and password sign-in next to single sign-on (small installs, break-glass admin).
QM_LOCAL_LOGIN = env_bool("QM_LOCAL_LOGIN", True)
# The sign-in page lists the demo logins once the demo is loaded: on for the run command
# (settings/dev.py), off here and always off in production (the demo password is public).
QM_DEMO_LOGINS = env_bool("QM_DEMO_LOGINS", False)
QM_DEMO_PASSWORD = ""  # the demo's, where it is listed (settings/dev.py)
AUTHENTICATION_BACKENDS = [
    "portal.access.login_guard.LockoutBackend",  # refuses while an account or address is locked out
    *(["tenants.oidc.PortalOIDCBackend"] if QM_OIDC_ENABLED else []),
    *(
        ["django.contrib.auth.backends.ModelBackend"]
        if QM_LOCAL_LOGIN or not QM_OIDC_ENABLED
        else []
    ),
]

# Sign-in throttling (portal/access/login_guard.py): per account and per address, counted in
# PostgreSQL, so it holds with Redis down and across every web pod.
AXES_FAILURE_LIMIT = env_int("QM_LOGIN_FAILURE_LIMIT", 10)
AXES_COOLOFF_TIME = dt.timedelta(minutes=env_int("QM_LOGIN_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "portal.access.login_guard.locked_out"
AXES_CLIENT_IP_CALLABLE = "portal.access.login_guard.client_address"
AXES_DISABLE_ACCESS_LOG = True  # sign-ins themselves are in the web access log
AXES_VERBOSE = False
# Proxies in front of the portal that append to X-Forwarded-For (an ingress: 1).
QM_TRUSTED_PROXIES = env_int("QM_TRUSTED_PROXIES", 0)

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT: Path | None = Path(env_str("STATIC_ROOT", str(BASE_DIR / ".data" / "static")))

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the page, not the cookie
X_FRAME_OPTIONS = "DENY"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "portal.access.tokens.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # JSON bodies only: a form-encoded or multipart body is refused (415), never read as an
    # empty one (a form-encoded PUT of a quota once wiped it).
    "DEFAULT_PARSER_CLASSES": ["portal.api.parsers.BoundedJSONParser"],
    "DEFAULT_PAGINATION_CLASS": "portal.api.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": [
        "portal.api.filters.FilterBackend",
        "portal.api.filters.OrderingFilter",
    ],
    "EXCEPTION_HANDLER": "portal.api.views.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "portal.api.schema.AutoSchema",
    "URL_FORMAT_OVERRIDE": None,
    "DEFAULT_THROTTLE_CLASSES": [
        "portal.access.tokens.TokenRateThrottle",
        "portal.access.tokens.UserRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "token": env_str("QM_API_RATE", "1200/minute"),
        # one person over all their tokens and their session
        "user": env_str("QM_API_USER_RATE", "2400/minute"),
    },
}
# A person's live API tokens (neither revoked nor expired): creating one more is refused.
QM_API_TOKENS_PER_USER = env_int("QM_API_TOKENS_PER_USER", 10)

SPECTACULAR_SETTINGS = {
    "TITLE": "Quartermaster API",
    "DESCRIPTION": (
        "GPU quotas, queues and MIG changes. Authenticate with `Authorization: Bearer qm_…`."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "QuotaRequestKindEnum": "changes.models.QuotaChangeRequest.Kind",
        "DriftKindEnum": "cluster.models.Drift.Kind",
        "WorkloadStateEnum": "overview.workloads.STATES",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "portal.api.schema.add_error_responses",
        "portal.api.schema.query_values_are_not_empty",
        "portal.api.schema.nested_routes_name_the_cluster_once",
        "portal.api.schema.free_text_is_plain",
    ],
}

# --- Quartermaster --------------------------------------------------------------------------
# Which queueing system the portal renders objects for: "kueue" (default) or "volcano".
QM_QUEUE_BACKEND = env_str("QM_QUEUE_BACKEND", "kueue")
# Kueue API version to render: v1beta2 (Kueue >= 0.16) or v1beta1 (older clusters).
QM_KUEUE_API_VERSION = env_str("QM_KUEUE_API_VERSION", "v1beta2")
# Label prefix for the labels the portal stamps on everything it manages.
QM_LABEL_DOMAIN = env_str("QM_LABEL_DOMAIN", "quartermaster.io")

# --- The Kubernetes API -------------------------------------------------------------------
# One of: KUBE_URL (+ KUBE_TOKEN / KUBE_TOKEN_FILE), KUBECONFIG (+ KUBE_CONTEXT), or
# KUBE_IN_CLUSTER=true (the pod's service account). Nothing set: no cluster (sync is off).
KUBE_URL = env_str("KUBE_URL")
KUBE_TOKEN = env_secret("KUBE_TOKEN")
KUBECONFIG = env_str("KUBECONFIG")
KUBE_CONTEXT = env_str("KUBE_CONTEXT")
KUBE_IN_CLUSTER = env_bool("KUBE_IN_CLUSTER", False)
KUBE_VERIFY_TLS = env_bool("KUBE_VERIFY_TLS", True)
KUBE_CA_FILE = env_str("KUBE_CA_FILE")
QM_FIELD_MANAGER = env_str("QM_FIELD_MANAGER", "quartermaster")
# The name of the cluster the settings above connect to (a DNS label): an installation from
# before clusters were objects becomes this one cluster.
QM_CLUSTER_NAME = env_str("QM_CLUSTER_NAME", "default")
# Fernet keys encrypting the clusters' stored credentials, comma-separated: the first
# encrypts, every one decrypts (put a new key first, run `manage.py
# rotate_cluster_credentials`, then drop the old one). Make one with `python -c "from
# cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"`.
QM_CREDENTIALS_KEY = env_secret("QM_CREDENTIALS_KEY")
# The exec credential plugins a registered cluster's kubeconfig may run (exact command
# texts, e.g. "aws,gke-gcloud-auth-plugin"); none by default. Set by the operator only: a
# kubeconfig is otherwise inline data only (cluster/kubeconfig.py).
QM_KUBECONFIG_EXEC_ALLOWED = env_list("QM_KUBECONFIG_EXEC_ALLOWED", [])
# Seconds between polls of the cluster, and between full re-applies of desired state.
QM_POLL_SECONDS = env_int("QM_POLL_SECONDS", 30)
QM_REAPPLY_SECONDS = env_int("QM_REAPPLY_SECONDS", 300)
QM_POOL_LABEL = env_str("QM_POOL_LABEL", "quartermaster.io/pool")
QM_GPU_OPERATOR_NAMESPACE = env_str("QM_GPU_OPERATOR_NAMESPACE", "gpu-operator")
# GPU health from the DCGM exporter: "proxy" reads each exporter pod's /metrics through the
# API server (pods/proxy), "prometheus" asks QM_PROMETHEUS_URL (better for large fleets),
# "off" reads nothing.
QM_DCGM_SOURCE = env_str("QM_DCGM_SOURCE", "proxy")
QM_PROMETHEUS_URL = env_str("QM_PROMETHEUS_URL")
QM_DCGM_PORT = env_int("QM_DCGM_PORT", 9400)
QM_DCGM_EXPORTER_SELECTOR = env_str("QM_DCGM_EXPORTER_SELECTOR", "app=nvidia-dcgm-exporter")
QM_DCGM_CONCURRENCY = env_int("QM_DCGM_CONCURRENCY", 8)
QM_HEALTH_SECONDS = env_int("QM_HEALTH_SECONDS", 60)
QM_GPU_HOT_CELSIUS = env_int("QM_GPU_HOT_CELSIUS", 85)
# Usage history: a sample of every series at most this often (after a poll), a sample
# stands for at most QM_SAMPLE_MAX_GAP_SECONDS (a longer gap stays unknown), raw samples,
# hourly and daily rollups are kept this many days.
QM_SAMPLE_SECONDS = env_int("QM_SAMPLE_SECONDS", 300)
QM_SAMPLE_MAX_GAP_SECONDS = env_int("QM_SAMPLE_MAX_GAP_SECONDS", 900)
QM_SAMPLE_RETENTION_DAYS = env_int("QM_SAMPLE_RETENTION_DAYS", 3)
QM_HOURLY_RETENTION_DAYS = env_int("QM_HOURLY_RETENTION_DAYS", 35)
QM_DAILY_RETENTION_DAYS = env_int("QM_DAILY_RETENTION_DAYS", 800)

# MIG changes: how long to wait for evictions and for MIG Manager before giving up.
QM_EVICTION_TIMEOUT_SECONDS = env_int("QM_EVICTION_TIMEOUT_SECONDS", 600)
QM_MIG_STUCK_SECONDS = env_int("QM_MIG_STUCK_SECONDS", 900)
QM_MIG_POLL_SECONDS = env_int("QM_MIG_POLL_SECONDS", 5)
# Notifications of MIG change requests (new, decided, succeeded, failed).
QM_NOTIFY_WEBHOOK_URL = env_str("QM_NOTIFY_WEBHOOK_URL")
QM_NOTIFY_EMAILS = env_list("QM_NOTIFY_EMAILS", [])
# People's own webhooks (Slack, Teams, JSON): the seconds a send may take, and whether a
# subscription's URL must be https (on in production settings).
QM_NOTIFY_TIMEOUT_SECONDS = float(env_int("QM_NOTIFY_TIMEOUT_SECONDS", 10))
QM_NOTIFY_HTTPS_ONLY = env_bool("QM_NOTIFY_HTTPS_ONLY", False)
# Networks the portal may send notifications to although they are not public (an internal
# relay or chat server, e.g. "10.20.0.0/16,fd12::/64"): every other loopback, private,
# link-local, multicast or reserved address is refused (portal/infra/egress.py). Set by the
# operator only; a bad network stops the start.
QM_EGRESS_ALLOWED_NETWORKS = [
    str(ipaddress.ip_network(net, strict=False))
    for net in env_list("QM_EGRESS_ALLOWED_NETWORKS", [])
]
# Each poll first asks the API server its version, with this timeout (a hung server fails
# the poll quickly instead of at the 60-second read timeout of the lists).
QM_API_PROBE_SECONDS = float(env_int("QM_API_PROBE_SECONDS", 5))
# Seconds between relays of tasks the broker could not take when they were queued.
QM_OUTBOX_SECONDS = env_int("QM_OUTBOX_SECONDS", 15)
# The people a change concerns are told without subscribing (in the portal, and by e-mail
# at the address on their account): the person who asked, when it is decided and when it
# ends, and the members of the teams it hits (pods evicted, quotas moved). Each person may
# turn it off for themselves; off here: only subscriptions. The portal's own URL makes the
# link in each.
QM_NOTIFY_TEAMS = env_bool("QM_NOTIFY_TEAMS", True)
QM_PUBLIC_URL = env_str("QM_PUBLIC_URL", "http://127.0.0.1:8000")
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "quartermaster@localhost")
# The SMTP server (EMAIL_BACKEND=django.core.mail.backends.smtp.EmailBackend): its password
# is a secret (EMAIL_HOST_PASSWORD or EMAIL_HOST_PASSWORD_FILE). STARTTLS (EMAIL_USE_TLS,
# usually port 587) or TLS from the first byte (EMAIL_USE_SSL, usually 465), never both.
# Each connection may take EMAIL_TIMEOUT seconds: a dead server fails the send (the outbox
# tries again) instead of holding a worker.
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env_secret("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10)
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    raise RuntimeError(
        "EMAIL_USE_TLS and EMAIL_USE_SSL are both set: choose one (STARTTLS on the plain port, "
        "usually 587, or TLS from the start, usually 465)"
    )

CELERY_BEAT_SCHEDULE = {
    "relay-outbox": {
        "task": "portal.outbox.relay_outbox_task",
        "schedule": float(QM_OUTBOX_SECONDS),
    },
    "resume-mig-changes": {"task": "changes.tasks.resume_mig_changes_task", "schedule": 60.0},
    "expire-quota-grants": {"task": "changes.tasks.expire_quota_grants_task", "schedule": 300.0},
    # The loop fans out: one poll, apply or GPU health read per cluster, side by side.
    "poll-clusters": {
        "task": "cluster.tasks.poll_all_clusters_task",
        "schedule": float(QM_POLL_SECONDS),
    },
    # A sample after each successful poll, at most every QM_SAMPLE_SECONDS.
    "sample-usage": {"task": "usage.tasks.take_sample_task", "schedule": float(QM_POLL_SECONDS)},
    "roll-up-usage": {"task": "usage.tasks.roll_up_task", "schedule": 600.0},
    # Budgets: warnings at thresholds and holds where enforced, after each roll-up.
    "check-budgets": {"task": "budgets.tasks.check_budgets_task", "schedule": 600.0},
    "collect-gpu-health": {
        "task": "health.tasks.collect_all_gpu_health_task",
        "schedule": float(QM_HEALTH_SECONDS),
    },
    # The teams' busy GPU-hours, from the GPU health readings (costs/busy.py).
    "record-busy-gpu-hours": {
        "task": "costs.tasks.record_busy_task",
        "schedule": float(QM_HEALTH_SECONDS),
    },
    "reapply-desired-state": {
        "task": "cluster.tasks.apply_all_clusters_task",
        "schedule": float(QM_REAPPLY_SECONDS),
        "kwargs": {"full": True},
    },
}

if QM_QUEUE_BACKEND not in {"kueue", "volcano"}:
    raise ValueError(f"QM_QUEUE_BACKEND={QM_QUEUE_BACKEND!r}: use 'kueue' or 'volcano'")
if QM_KUEUE_API_VERSION not in {"v1beta2", "v1beta1"}:
    raise ValueError(f"QM_KUEUE_API_VERSION={QM_KUEUE_API_VERSION!r}: use v1beta2 or v1beta1")

# --- Operations ---------------------------------------------------------------------------
# Counters of requests and tasks, shared by every process (see portal/infra/metrics.py).
QM_METRICS_REDIS_URL = env_str("QM_METRICS_REDIS_URL") or redis_db(REDIS_URL, 2)
# When set, /metrics answers only with "Authorization: Bearer <token>". Without a token it
# answers anyone only when QM_METRICS_PUBLIC (on here, off in production).
QM_METRICS_TOKEN = env_secret("QM_METRICS_TOKEN")
QM_METRICS_PUBLIC = env_bool("QM_METRICS_PUBLIC", True)

# LOG_FORMAT=json: one JSON object per line (time, level, logger, message, request_id, ...).
LOG_FORMAT = env_str("LOG_FORMAT", "text")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "portal.infra.observability.RequestIdFilter"}},
    "formatters": {
        "json": {"()": "portal.infra.observability.JsonFormatter"},
        "text": {
            "()": "portal.infra.observability.TextFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s",
        },
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "json" if LOG_FORMAT == "json" else "text",
            "filters": ["request_id"],
        }
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "pgserver": {"level": "WARNING"},
        # One line per request (gunicorn's own access log stays off).
        "quartermaster.access": {"level": "INFO" if env_bool("ACCESS_LOG", True) else "WARNING"},
        # Django logs 4xx/5xx itself; the access line already says it.
        "django.request": {"level": "ERROR"},
        "django.server": {"level": "WARNING"},
    },
}
# Celery workers log through the same configuration (not Celery's own handlers).
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
