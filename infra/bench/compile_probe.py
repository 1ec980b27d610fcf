"""Entry point: the code lives in poolq.api.bench.compile_probe (api/bench/compile_probe.py)."""
from poolq.api.bench.compile_probe import main

if __name__ == "__main__":
    main()
