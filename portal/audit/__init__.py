"""The audit log: recording an event, its sentences, its rows."""
