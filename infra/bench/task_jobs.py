"""Entry point: the benchmark's code lives in poolq.api.bench.task_jobs (api/bench/task_jobs.py)."""
from poolq.api.bench.task_jobs import main

if __name__ == "__main__":
    main()
