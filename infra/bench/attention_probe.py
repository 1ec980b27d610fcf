"""Entry point: the code lives in poolq.api.bench.attention_probe (api/bench/attention_probe.py)."""
from poolq.api.bench.attention_probe import main

if __name__ == "__main__":
    main()
