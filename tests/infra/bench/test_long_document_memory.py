"""A very long document in chunked mode: peak memory grows with its token ids, not its states."""
import json
import subprocess
import sys

import pytest
from conftest import BENCH_DIR


def _peak_rss_mb(tokens: int) -> dict:
    out = subprocess.run([sys.executable, str(BENCH_DIR / "long_document_memory.py"), "--tokens", str(tokens)],
                         capture_output=True, text=True,
                         timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_four_times_the_tokens_costs_far_less_than_their_token_states():
    # The document is whole copies of the demo corpus (~28k tokens each): one copy, then four
    # (~113k tokens, 220 windows of 512). Both fill whole batches of windows, so what the larger
    # adds is its ~85k extra tokens, whose states would take ~125 MB if a document's were ever held.
    small, large = _peak_rss_mb(10_000), _peak_rss_mb(100_000)
    assert large["tokens"] > 3.5 * small["tokens"], (small, large)
    extra_tokens = large["tokens"] - small["tokens"]
    states_mb = extra_tokens * 384 * 4 / 2**20  # what holding the extra token states would take
    grown_mb = large["peak_rss_mb"] - small["peak_rss_mb"]
    assert grown_mb < states_mb / 3, (small, large, states_mb)
