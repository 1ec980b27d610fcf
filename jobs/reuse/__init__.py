"""Content-addressed reuse: a text computed once per job, and (opt-in) once per tenant (docs/reuse.md)."""
