"""Scheduled (incremental) reindex: schedules, their store, their RedBeat entries, their runs."""
