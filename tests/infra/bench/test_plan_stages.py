"""The planning-stages benchmark (infra/bench/plan_stages.py) on a small corpus: it plans in
several sections, and reports each stage; no timing is asserted."""
from plan_stages import main


def test_the_stage_benchmark_plans_every_document_in_sections_and_times_each_stage(capsys):
    result = main(["--documents", "3000", "--section-bytes", "20000"])
    assert result["documents"] == 3000 and result["sections"] > 5 and result["shards"] >= result["sections"]
    assert all(result[f"{stage}_s"] > 0 for stage in ("scan", "decide", "cut"))
    assert '"us_per_document"' in capsys.readouterr().out
