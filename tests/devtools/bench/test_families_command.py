"""`poolq bench families` end to end at a tiny size (hidden 64, 2 layers, two short documents, 1 round):
both families built and measured, both systems' speeds, their ratio and cosines in the report, as text,
Markdown and JSON. Also how `poolq bench` tells its own options from its suites'."""
import json

from click.testing import CliRunner

from poolq.api.cli.main import main

TINY_RUN = ["bench", "families", "--size", "tiny", "--lengths", "60,25", "--rounds", "1", "--vocab", "600",
            "--threads", "1", "--dtypes", "float32,bfloat16"]


def test_a_tiny_run_reports_both_systems_their_ratio_and_cosines(tmp_path):
    out = tmp_path / "families.json"
    run = CliRunner().invoke(main, [*TINY_RUN, "--json", str(out), "--markdown"])
    assert run.exit_code == 0, run.output
    report = json.loads(out.read_text())
    rows = {(row["family"], row["dtype"]): row for row in report["rows"]}
    assert set(rows) == {(family, dtype) for family in ("ModernBERT", "Qwen3") for dtype in ("float32", "bfloat16")}
    for row in rows.values():
        assert (row["layers"], row["hidden"], len(row["ratios"])) == (2, 64, 1)
        assert row["poolq_tok_s"] > 0 and row["st_tok_s"] > 0 and row["ratio"] > 0
        assert abs(row["tokens"] - 85) <= 2 and row["st_positions"] > row["tokens"]  # the short one padded
        floor = 0.999 if row["dtype"] == "float32" else 0.99
        assert row["min_centred_cosine"] >= floor and row["poolq_min_cos_to_st_fp32"] >= floor
    assert report["rounds"] == 1 and report["threads"] == 1 and report["machine"]["cpu"]
    assert isinstance(report["machine"]["flags"], list) and report["date"]
    # stdout: the paragraph naming machine, flags and date, then the Markdown table, one line per row
    paragraph, table = run.stdout.strip().split("\n\n")
    assert paragraph.startswith(f"Measured {report['date']} on {report['machine']['cpu']}") and "flags: " in paragraph
    lines = table.splitlines()
    assert lines[0].startswith("| model | dtype |") and "poolq packed tok/s | ST padded tok/s" in lines[0]
    assert len(lines) == 2 + 4 and lines[2].startswith("| ModernBERT (hidden 64, 2 layers) | float32 |")
    assert "round 1:" in run.stderr  # progress goes to stderr, the report alone to stdout


def test_bench_alone_still_runs_the_dtype_comparison_and_families_is_its_suite(monkeypatch):
    from poolq.devtools.bench import variant_benchmark

    calls = []
    monkeypatch.setattr(variant_benchmark, "run_variants", lambda model, **options: calls.append(model) or {"model": model})
    run = CliRunner().invoke(main, ["bench", "--model", "m", "--json"])
    assert run.exit_code == 0, run.output
    assert calls == ["m"] and json.loads(run.stdout) == {"model": "m"}
    assert "families" in CliRunner().invoke(main, ["bench", "--help"]).stdout


def test_options_of_bench_itself_before_the_suite_are_refused_not_ignored():
    run = CliRunner().invoke(main, ["bench", "--rounds", "2", "families"])
    assert run.exit_code == 2 and "--rounds: options of `poolq bench` itself" in run.output


def test_bad_input_is_named_before_anything_is_built():
    run = CliRunner().invoke(main, ["bench", "families", "--families", "modernbert,bert"])
    assert run.exit_code == 2 and "unknown bert; known: modernbert, qwen3" in run.output
    run = CliRunner().invoke(main, ["bench", "families", "--lengths", "8000,1k"])
    assert run.exit_code == 2 and "comma-separated token counts, got '8000,1k'" in run.output
    run = CliRunner().invoke(main, ["bench", "families", "--lengths", "60,99999", "--dtypes", "float32"])
    assert run.exit_code == 2 and "length 99999: each document must be 3..8192 tokens" in run.output
