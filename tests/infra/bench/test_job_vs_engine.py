"""The jobs-vs-engine benchmark: its inputs, its marginal arithmetic and report, and a quick run."""
import pytest
from job_vs_engine import QUICK_SIZES, documents, main, report


def test_inputs_are_real_distinct_prose_and_chunk_documents_are_long():
    short, long = documents("short", 50, "a"), documents("chunks", 3, "b")
    assert len({d["text"] for d in short}) == 50 and len({d["id"] for d in short}) == 50
    assert min(len(d["text"]) for d in long) > 10 * max(len(d["text"]) for d in short[:3])


def test_the_report_flags_a_job_below_ninety_percent_of_the_engine():
    facts = {"cpu": "AMD EPYC", "usable_cores": 2, "flags": ["avx2"]}
    rows = [{"corpus": "short", "policy": {"mode": "truncate"}, "documents": [10, 50], "tokens": [1000, 5000],
             "engine_tokens_per_s": 2000.0, "job_tokens_per_s": 1900.0, "ratio": 0.95},
            {"corpus": "chunks", "policy": {"mode": "naive_chunks"}, "documents": [2, 6], "tokens": [9000, 27000],
             "engine_tokens_per_s": 2000.0, "job_tokens_per_s": 1700.0, "ratio": 0.85}]
    text = report(rows, facts, "float32", "local", 3)
    assert "| short (truncate) | 10, 50 | 4,000 | 2,000 | 1,900 | 0.95 |" in text
    assert "| chunks (naive_chunks) | 2, 6 | 18,000 | 2,000 | 1,700 | 0.85 (below 90%) |" in text
    assert "compute dtype float32" in text and "flags avx2" in text


@pytest.mark.slow
def test_a_quick_local_run_measures_both_corpora_and_profiles_the_job(monkeypatch, capsys):
    monkeypatch.setattr("job_vs_engine.QUICK_SIZES", {"short": (6, 18), "chunks": (1, 2)})
    output = main(["--quick", "--profile", "--dtype", "float32"])
    assert [r["corpus"] for r in output["results"]] == ["short", "chunks"]
    for result in output["results"]:
        assert result["tokens"][1] > result["tokens"][0] > 0
        assert result["engine_tokens_per_s"] > 0 and result["job_tokens_per_s"] > 0
    assert "### chunks: job (cProfile" in output["profile"] and "### short: engine alone" in output["profile"]
    assert output["profile"].count("ncalls") == 4  # each side's top functions, on each corpus
    assert "job / engine" in capsys.readouterr().out
    assert QUICK_SIZES["short"][0] < QUICK_SIZES["short"][1]
