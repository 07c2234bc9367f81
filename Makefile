# Shortcuts for the two commands in the README (they need only Python; make is optional).
.PHONY: run test stop lint export
run:
	python3 dev.py run
test:
	python3 dev.py test
stop:
	python3 dev.py stop
lint:
	.venv/bin/ruff check . && .venv/bin/ruff format --check . && .venv/bin/lint-imports
export:
	.venv/bin/python manage.py export_manifests
