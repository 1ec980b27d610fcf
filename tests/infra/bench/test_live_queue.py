"""The live-queue benchmark's report (its measurements need a stack and minutes: run it by hand)."""
from live_queue import report


def test_the_report_names_every_measure_and_the_machine():
    results = {"small_idle_s": 1.5, "small_behind_large_s": 4.0, "progress_gaps_s": [0.9, 1.1, 1.0],
               "rates_tokens_per_s": (900.0, 1100.0), "cancel_many_s": 1.2, "cancel_long_s": 1.9,
               "embeddings_idle_s": [0.02] * 30, "embeddings_busy_s": None}
    text = report(results, 5000)
    assert "cpu flags:" in text
    assert "| small job behind a 5,000-document job | 4.00 s (waited 2.50 s) |" in text
    assert "median 1.00 s, max 1.10 s" in text and "(ratio 0.82)" in text
    assert "p50 20 ms, p95 20 ms" in text and "n/a (no /v1/embeddings route)" in text
