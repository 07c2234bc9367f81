"""Notifications: what is sent, to whom, and its page and API."""
