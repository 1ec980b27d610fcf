"""The benchmark scripts of ``infra/bench/`` are scripts, not modules of the package: their tests
import them from that folder, as ``python infra/bench/NAME.py`` runs them."""
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parents[3] / "infra" / "bench"
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))
