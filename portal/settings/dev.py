"""Settings for the local run command: debug on, a fixed development secret."""

from .base import *  # noqa: F403
from .base import env_bool, env_secret

DEBUG = env_bool("DEBUG", True)
SECRET_KEY = env_secret("SECRET_KEY", "dev-only-insecure-key-change-me")
