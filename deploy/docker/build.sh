#!/bin/sh
# The image's build steps: a virtual environment with the runtime dependencies (wheels only,
# so neither this stage nor the final image needs a compiler) and the collected static files.
# The Dockerfile runs this; tests/deploy/test_image.py runs the same script on this machine.
#   sh deploy/docker/build.sh VENV STATIC_ROOT
set -eu
venv=$1
static=$2
python3 -m venv "$venv"
"$venv/bin/pip" install --disable-pip-version-check --quiet --only-binary :all: \
    -r deploy/docker/requirements.txt
# Settings are read to find the static files only: no database or Redis is contacted.
DJANGO_SETTINGS_MODULE=portal.settings.production \
    SECRET_KEY=collectstatic-only DATABASE_URL=postgres://build@127.0.0.1:1/build \
    REDIS_URL=redis://127.0.0.1:1/0 STATIC_ROOT="$static" \
    "$venv/bin/python" manage.py collectstatic --no-input --verbosity 0
