"""The ledger: the job's objects in the store (layout, commits, manifest), recovery and cleanup."""
