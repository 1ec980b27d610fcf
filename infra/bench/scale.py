"""Entry point: the benchmark's code lives in poolq.api.bench.scale (api/bench/scale/)."""
from poolq.api.bench.scale import main

if __name__ == "__main__":
    main()
