"""The ETA-accuracy benchmark's report (its measurements need a stack and minutes: run it by hand)."""
from eta_accuracy import errors, report


def _job(given_at: float, eta_s: float, ended_at: float, ahead: int, measured: tuple[float, float] | None = None) -> dict:
    job = {"given_at": given_at, "eta_s": eta_s, "ended_at": ended_at, "state": "running", "jobs_ahead": ahead,
           "tenant_share": 0.5, "fleet_tokens_per_s": 1500.0, "tokens": 90_000}
    return job if measured is None else {**job, "measured_at": measured[0], "measured_eta_s": measured[1]}


def test_each_job_error_is_its_eta_against_the_time_it_actually_took():
    results: dict = {"documents": 400, "load_before": (1.0, 1.0, 1.0), "load_after": (2.0, 1.0, 1.0),
                     "jobs": {"a1": _job(100.0, 60.0, 150.0, 0, measured=(110.0, 36.0)), "a2": _job(101.0, 40.0, 141.0, 1),
                              "b1": _job(100.0, 80.0, 200.0, 0, measured=(120.0, 80.0))}}
    assert errors(results) == {"a1": 0.2, "a2": 0.0, "b1": -0.2}
    assert errors(results, "measured_at", "measured_eta_s") == {"a1": -0.1, "b1": 0.0}  # a2: never measured
    text = report(results)
    assert "load average 1.0 before, 2.0 after" in text
    assert "| a1 | dev | 90,000 | running | 0 | 50% | 1,500 | 60.0 s | 50.0 s | +20% | 36.0 s, 40.0 s, -10% |" in text
    assert "| a2 | dev | 90,000 | running | 1 | 50% | 1,500 | 40.0 s | 40.0 s | +0% | never measured while it ran |" in text
    assert "every job within ±30%, first ETA: yes" in text and "every job within ±30%, ETA once measured: yes" in text
    results["jobs"]["b1"]["eta_s"] = 50.0
    assert "every job within ±30%, first ETA: no" in report(results)
