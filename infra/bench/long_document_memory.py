"""Entry point: the benchmark's code lives in poolq.api.bench.long_document_memory (api/bench/long_document_memory.py)."""
from poolq.api.bench.long_document_memory import main

if __name__ == "__main__":
    main()
