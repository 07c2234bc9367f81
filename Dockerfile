# One image for web, worker, beat, the migration Job and the demo cluster
# (deploy/docker/entrypoint.sh picks the role; web is the default).
#   docker build -t quartermaster:0.1.0 .

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
COPY deploy/docker/requirements.txt deploy/docker/requirements.txt
COPY . .
# The same script the test suite runs (tests/deploy/test_image.py): wheels only, no compiler.
RUN sh deploy/docker/build.sh /venv /static

FROM python:3.11-slim
RUN groupadd --gid 10001 portal && useradd --uid 10001 --gid 10001 --no-create-home portal
COPY --from=build /venv /venv
WORKDIR /app
COPY . .
COPY --from=build /static /app/staticfiles
ENV PATH=/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    DJANGO_SETTINGS_MODULE=portal.settings.production \
    STATIC_ROOT=/app/staticfiles \
    LOG_FORMAT=json
# The code is root's and read-only to the portal; it writes only to /tmp (and the database).
USER 10001:10001
EXPOSE 8000
ENTRYPOINT ["/app/deploy/docker/entrypoint.sh"]
CMD ["web"]
