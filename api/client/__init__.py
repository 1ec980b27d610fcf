"""The Python client of poolq's HTTP API, and reading a job's result files."""
