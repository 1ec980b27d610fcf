"""Entry point: the benchmark's code lives in poolq.api.bench.packed_vs_padded (api/bench/packed_vs_padded.py)."""
from poolq.api.bench.packed_vs_padded import main

if __name__ == "__main__":
    main()
