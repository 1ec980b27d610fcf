"""Dry-run estimates: what a job would cost (tokens, rows, cuts, duplicates, time) before it is
submitted, from one streaming pass over its input and a bounded sample tokenized exactly."""
