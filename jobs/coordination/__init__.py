"""Shared live state in Redis (or memory): the job status cache and leases on units of work."""
