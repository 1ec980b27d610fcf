"""Entry point: the benchmark's code lives in poolq.api.bench.plan_stages (api/bench/plan_stages.py)."""
from poolq.api.bench.plan_stages import main

if __name__ == "__main__":
    main()
