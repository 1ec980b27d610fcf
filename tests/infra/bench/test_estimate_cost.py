"""The estimate-cost benchmark (infra/bench/estimate_cost.py) in its smoke size: it estimates, runs
the job, and reports both sides; no timing is asserted (the lead measures on a quiet machine)."""
from estimate_cost import main


def test_the_estimate_cost_benchmark_reports_the_estimate_against_the_job(capsys):
    result = main(["--quick"])
    assert result["documents"] == 300 and result["tokens"] > 0 and result["rows"] >= 300
    assert result["estimate_s"] > 0 and result["job_s"] > 0 and result["estimate_peak_mib"] > 0
    assert abs(result["tokens_error"]) < 0.1 and abs(result["rows_error"]) < 0.1
    assert abs(result["computed_tokens_error"]) < 0.1  # repeats computed once (docs/reuse.md)
    assert '"estimate_over_job"' in capsys.readouterr().out
