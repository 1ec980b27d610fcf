"""``python -m poolq.api.bench.scale``: the benchmark's command line, and the ``--counted`` wrapper of its stack."""
from poolq.api.bench.scale.cli import main

if __name__ == "__main__":
    main()
