"""The data report: what a job's input looked like (lengths, cuts, duplicates), accumulated per
shard with fixed bucket edges and merged exactly by the finalizer; also what an estimate counts."""
