"""`poolq bench jobpath`: the stand-in engine gives the real engine's outputs (shapes, dtypes, order) for
embed and token_embed without running the model; the host-read counter counts by line and thread;
the command runs end to end at a tiny size and prints every section; bad options are named."""
import json
import pstats
import threading

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from poolq.api.cli.main import main
from poolq.devtools.bench.jobpath.host_reads import HostReads
from poolq.devtools.bench.jobpath.jobpath_report import _estimate
from poolq.devtools.bench.jobpath.stand_in_engine import stand_in_for, stand_in_runner
from poolq.engine import PoolingTask

TEXTS = ["A short one.", "A somewhat longer sentence, with a clause or two, to make its token count differ.", "Three."]


@pytest.fixture(scope="module")
def stand_in(minilm_engine):
    return stand_in_for(minilm_engine)


@pytest.mark.parametrize("task", [PoolingTask.EMBED, PoolingTask.TOKEN_EMBED])
def test_the_stand_in_gives_the_real_engines_shapes_and_dtypes_without_running_the_model(minilm_engine, stand_in, task,
                                                                                          monkeypatch):
    real = minilm_engine.encode(TEXTS, task)

    def no_model(batch):
        raise AssertionError("the stand-in ran the model's forward")

    monkeypatch.setattr(minilm_engine.runner, "forward", no_model)
    steps = stand_in_runner(stand_in).steps
    fake = stand_in.encode(TEXTS, task)
    assert stand_in_runner(stand_in).steps > steps
    assert [(v.shape, v.dtype) for v in fake] == [(v.shape, v.dtype) for v in real]
    assert fake[0].shape[-1] == minilm_engine.dimensions == 384 and fake[0].dtype == np.float32
    assert all(np.isfinite(v).all() and np.abs(v).sum() > 0 for v in fake)
    assert not np.allclose(fake[0], real[0], atol=1e-3)  # fixed values, not the model's
    assert stand_in.scheduling_order == minilm_engine.scheduling_order  # the loop the real engine runs


def test_host_reads_counts_float_reads_as_device_reads_by_line_in_its_own_thread():
    states, bounds = torch.ones(4, 3), torch.tensor([0, 2, 4])
    elsewhere = threading.Thread(target=lambda: states.cpu())
    with HostReads() as reads:
        states[0].cpu()
        states.sum().item()
        bounds.tolist()
        elsewhere.start()
        elsewhere.join()
    assert (reads.device_reads(), reads.host_reads()) == (2, 1)
    sites = {(site.call, site.device_read) for site in reads.sites}
    assert sites == {("cpu", True), ("item", True), ("tolist", False)}
    assert all(site.file == "tests/devtools/bench/test_jobpath_bench.py" and site.line > 0 for site in reads.sites)


@pytest.mark.slow
def test_a_tiny_run_prints_every_section_and_writes_its_profiles(tmp_path):
    report_path, prefix = tmp_path / "jobpath.json", tmp_path / "profile"
    # 300 tokens: past MiniLM's 256-token window, so the jobs ask for a window that holds them
    run = CliRunner().invoke(main, ["bench", "jobpath", "--lengths", "32,300", "--tokens-per-run", "1200", "--rounds", "1",
                                    "--cores", "1", "--requests", "3", "--top", "5", "--profile-out", str(prefix),
                                    "--json", str(report_path)])
    assert run.exit_code == 0, run.output
    report = json.loads(report_path.read_text())
    (scaling,) = report["scaling"]
    assert (scaling["cores"], scaling["workers"]) == (1, 1)
    (rows,) = scaling["per_worker"]
    assert [(row["length"], row["documents"], row["tokens"]) for row in rows] == [(32, [9, 37], [288, 1184]),
                                                                               (300, [1, 4], [300, 1200])]
    assert rows[1]["policy"] == {"mode": "truncate", "window_tokens": 300}
    assert all(row["tokenizer"]["documents_per_s"] > 0 for row in rows)  # the tokenizer alone, on the probe's cores
    assert rows[0]["compute_thread_ms_per_document"] is None or rows[0]["compute_thread_ms_per_document"] > 0
    for profile in report["profiles"]:
        assert pstats.Stats(profile["file"]).get_stats_profile().total_tt > 0
        stages = {stage["stage"].strip(): stage["seconds"] for stage in profile["stages"]}
        assert stages["run the shard"] > 0 and stages["stand-in forward"] > 0
    short_syncs = report["syncs"][0]
    assert short_syncs["steps"] >= 1 and short_syncs["device_reads_per_step"] >= 1
    lane = report["lane"]
    assert lane["requests"]["count"] == 3 and lane["requests"]["p50_ms"] > 0 and lane["engine_alone"]["p50_ms"] > 0
    out = run.stdout
    assert "| cores | workers | tokens/document |" in out and "| 1 | 1 | 32 | 9, 37 |" in out
    for section in ("Host reads per engine step", "The tokenizer alone", "Where the time goes: 32-token",
                    "Where the time goes: 300-token", "/v1/embeddings in process", "poolq adds"):
        assert section in out, section
    assert "job path: 1 worker(s) on 1 core(s)" in run.stderr  # progress on stderr, the report alone on stdout


@pytest.mark.slow
@pytest.mark.integration
def test_on_the_real_stack_the_jobs_run_on_a_stand_in_compute_worker_and_are_reported(tmp_path):
    # A stack of its own (poolq dev up on free ports), its compute worker the stand-in: the run fails
    # if that worker's log does not say the stand-in served the model
    report_path = tmp_path / "jobpath.json"
    run = CliRunner().invoke(main, ["bench", "jobpath", "--lengths", "32", "--tokens-per-run", "1200", "--rounds", "1",
                                    "--cores", "1", "--requests", "3", "--top", "3", "--profile-out",
                                    str(tmp_path / "profile"), "--json", str(report_path), "--stack"])
    assert run.exit_code == 0, run.output
    (row,) = json.loads(report_path.read_text())["stack"]
    assert (row["length"], row["documents"], row["tokens"]) == (32, [9, 37], [288, 1184])
    assert all(seconds > 0 for values in row["rounds_s"].values() for seconds in values)
    assert "On the real stack" in run.stdout and "| 32 | 9, 37 |" in run.stdout
    assert "the real stack: 32-token documents, round 1, large input" in run.stderr


@pytest.mark.parametrize(("options", "message"), [
    (["--cores", "1,4096"], "4096 cores asked for; this process may use"),
    (["--lengths", "64,x"], "comma-separated token counts, got '64,x'"),
    (["--lengths", "0,64"], "positive whole numbers, comma-separated, got '0,64'"),
    (["--json", "/no/such/dir/r.json"], "/no/such/dir is not a directory"),
])
def test_bad_options_are_named_before_anything_runs(options, message):
    run = CliRunner().invoke(main, ["bench", "jobpath", *options])
    assert run.exit_code == 2 and message in run.output, run.output


def _report(thread_ms: float, tokenizer_1: float, tokenizer_2: float) -> dict:
    """One worker on 1 and on 2 cores; its thread took ``thread_ms`` on 2 cores, and more on one (taking turns)."""
    def row(tokenizer: float, compute_ms: float) -> dict:
        return {"length": 64, "documents": [1024, 4096], "whole_job_documents_per_s": 6000.0, "documents_per_s": 6400.0,
                "tokens_per_s": 409600.0, "documents_per_cpu_s": 6500.0, "compute_thread_ms_per_document": compute_ms,
                "tokenizer": {"length": 64, "documents_per_s": tokenizer}}

    return {"options": {"lengths": [64]},
            "scaling": [{"cores": 1, "workers": 1, "per_worker": [[row(tokenizer_1, 1.2 * thread_ms)]]},
                        {"cores": 2, "workers": 1,
                         "per_worker": [[{**row(tokenizer_2, thread_ms), "documents_per_s": 9000.0}]]}]}


def test_the_estimate_takes_the_compute_threads_cap_and_the_tokenizers_measured_scaling():
    # A thread at 0.05 CPU-ms per document caps a worker at 20,000 docs/s; the tokenizer scales x1.6 on 2 cores:
    # a parallel share of 75 %, so x3.33 on 15 cores (Amdahl)
    text = _estimate(_report(0.05, 13_000, 20_800))
    assert "one worker on 2 core(s)) spends 0.0500 CPU-ms per document: one worker tops out near 20,000 docs/s (80% of" in text
    assert "13,000 docs/s on 1 core, 20,800 on 2 (x1.60" in text and "tokenize ~43,333 docs/s" in text
    assert "One compute worker on a 16-core GPU host: ~20,000 docs/s (80% of the goal), its own thread the limit" in text
    assert "One worker (planning, shards and finalizing in one process), 1 -> 2 cores: x1.41" in text


def test_a_tokenizer_that_does_not_scale_is_the_limit_the_estimate_names():
    text = _estimate(_report(0.01, 10_000, 10_000))  # no gain from a second core: none from fifteen
    assert "tokenize ~10,000 docs/s" in text and "~10,000 docs/s (40% of the goal), the tokenizer the limit" in text
