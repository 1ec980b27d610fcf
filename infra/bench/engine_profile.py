"""Entry point: the code lives in poolq.api.bench.engine_profile (api/bench/engine_profile.py)."""
from poolq.api.bench.engine_profile import main

if __name__ == "__main__":
    main()
