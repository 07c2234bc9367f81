# One image for web, worker and beat.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
RUN python -m venv /venv && /venv/bin/pip install --no-cache-dir .

FROM python:3.11-slim
RUN useradd --create-home --uid 10001 portal
COPY --from=build /venv /venv
WORKDIR /app
COPY --chown=portal:portal . .
ENV PATH=/venv/bin:$PATH PYTHONUNBUFFERED=1 DJANGO_SETTINGS_MODULE=portal.settings.production
USER portal
EXPOSE 8000
CMD ["gunicorn", "portal.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "2", "--threads", "4", "--worker-class", "gthread", "--access-logfile", "-"]
