"""PostgreSQL as the suite uses it (``portal/settings/test.py`` names it as the engine)."""
