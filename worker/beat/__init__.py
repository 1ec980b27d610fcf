"""celery beat for poolq: its process (the periodic reconciler, stored reindex schedules) and its scheduler."""
