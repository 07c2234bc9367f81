#!/bin/sh
# One image, one role per container: web (default), worker, beat, migrate, demo-cluster, or
# any command (e.g. `python manage.py createsuperuser`).
set -eu
role=${1:-web}
case "$role" in
  web)
    # A stored cluster credential the key cannot open stops the start, with the cluster's
    # name (cluster.E001); the worker checks the same as it starts.
    python manage.py check --tag database --database default
    exec gunicorn portal.wsgi:application --bind "0.0.0.0:${PORT:-8000}" \
      --workers "${WEB_PROCESSES:-2}" --threads "${WEB_THREADS:-4}" --worker-class gthread \
      --worker-tmp-dir /tmp --timeout "${WEB_TIMEOUT:-60}" --graceful-timeout 30 \
      --forwarded-allow-ips "${FORWARDED_ALLOW_IPS:-*}" --no-control-socket ;;
  worker)
    exec celery -A portal worker --loglevel "${LOG_LEVEL:-INFO}" \
      --concurrency "${WORKER_CONCURRENCY:-2}" --without-mingle ;;
  beat)
    exec celery -A portal beat --loglevel "${LOG_LEVEL:-INFO}" --schedule /tmp/celerybeat-schedule ;;
  migrate)
    exec python manage.py migrate --no-input ;;
  demo-cluster)
    exec python -m devcluster --host 0.0.0.0 --port "${DEVCLUSTER_PORT:-6443}" ;;
  *)
    exec "$@" ;;
esac
