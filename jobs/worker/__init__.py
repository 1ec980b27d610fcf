"""The worker edge: the Celery app, its tasks, worker start-up, the reconciler and beat."""
