"""Signed webhooks: a job's events POSTed to the URL it names (docs/webhooks.md)."""
