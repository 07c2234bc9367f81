"""Infrastructure: reads in one round trip, the outbox, metrics, readiness."""
