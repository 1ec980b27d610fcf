"""A job's steps as plain functions: submit, plan, run shards, finalize, dispatch, cancel, give up."""
