"""Entry point: the benchmark's code lives in poolq.api.bench.faq_retrieval (api/bench/faq_retrieval.py)."""
from poolq.api.bench.faq_retrieval import main

if __name__ == "__main__":
    main()
