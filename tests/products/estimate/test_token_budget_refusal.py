"""The submit check's rule on an estimate: exact where every document was tokenized (refused one
token over), an extrapolation refused only past the stated margin, the message saying which."""
from poolq.products.estimate.job_estimate import Duplicates, EstimateSample, JobEstimate, Reuse, WorkerTime
from poolq.products.estimate.token_budget import budget_refusal


def _estimate(computed: int, documents: int, sampled: int, fraction_read: float = 1.0) -> JobEstimate:
    return JobEstimate(
        model="m", task="embed", long_documents_mode="error", documents=documents, characters=documents * 100,
        tokens=computed, computed_tokens=computed, document_tokens=computed, rows=documents, truncated=0, chunked=0,
        split=0, duplicates=Duplicates(documents=0, distinct=documents, rate=0.0, method="exact"),
        reuse=Reuse(tokens=0, source="none"), time=WorkerTime(workers_alive=0),
        sample=EstimateSample(documents=sampled, characters=sampled * 100, fraction_read=fraction_read,
                              scan_seconds=0.0, price_seconds=0.0),
    )


def test_a_whole_count_is_refused_one_token_over():
    assert budget_refusal(_estimate(1000, 10, 10), 1000, 0.1) is None
    assert "counted exactly" in budget_refusal(_estimate(1001, 10, 10), 1000, 0.1)


def test_a_sampled_estimate_is_refused_only_past_its_margin_and_says_so():
    sampled = _estimate(1100, 10_000, 500)
    assert budget_refusal(sampled, 1000, 0.1) is None  # 10 % less is 990: it may fit; the run stops it if not
    refused = budget_refusal(_estimate(1200, 10_000, 500, 0.5), 1000, 0.1)
    assert "estimated from 500 of 10000 documents (50% of the input read)" in refused
    assert "even 10% less (1080) exceeds the limit" in refused
