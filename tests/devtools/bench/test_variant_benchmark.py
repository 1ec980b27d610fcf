"""`poolq bench`'s variants: interleaved rounds in rotated order, medians, and the report."""
import numpy as np
import pytest

from poolq.devtools.bench.variant_timing import min_cosine, time_variants
from poolq.devtools.bench.variants import Variant, st_variant


def test_rounds_rotate_which_variant_runs_first():
    calls: list[str] = []

    def encoder(name: str, vector: list[float]):
        def encode(texts):
            calls.append(name)
            return np.array([vector] * len(texts), dtype=np.float32)
        return encode

    variants = [Variant("a", "float32", encoder("a", [1, 0])), Variant("b", "int8", encoder("b", [1, 1])),
                Variant("c", "float32", encoder("c", [0, 1]))]
    timed = time_variants(variants, ["x"] * 6, rounds=3)
    assert calls[3:] == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]  # after one warm-up call each
    assert [t.variant.name for t in timed] == ["a", "b", "c"] and all(t.median_s >= 0 for t in timed)
    assert min_cosine(timed[0].vectors, timed[1].vectors) == pytest.approx(2 ** -0.5)


def test_a_dtype_option_sets_the_engine_config_and_an_unknown_one_is_refused_by_name():
    from poolq.devtools.bench.variants import poolq_variant
    from poolq.engine import ModelRegistry

    registry = ModelRegistry.with_packaged_models()
    with pytest.raises(ValueError, match="'auto\\+eagr': unknown option 'eagr' after '\\+' \\(one of fused, eager, compiled\\)"):
        poolq_variant("all-MiniLM-L6-v2", "auto+eagr", registry)
    variant = poolq_variant("all-MiniLM-L6-v2", "float32+eager", registry)
    assert isinstance(variant, Variant) and variant.name == "poolq float32+eager" and variant.dtype == "float32"


def test_a_backend_that_does_not_import_is_reported_not_run(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    absent = {"onnxruntime", "optimum"}
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in absent else real(name, *a))
    assert st_variant("unused", "onnx", 512, 32) == "ST onnx: not importable here (onnxruntime, optimum missing)"


@pytest.mark.slow
def test_the_report_names_the_cpu_the_dtypes_and_the_ratios():
    from poolq.devtools.bench.variant_benchmark import run_variants

    # One thread: under xdist each test process has a 1-core share (tests/conftest.py); two would spin.
    report = run_variants(dtypes=("float32", "int8"), backends=("torch",), rounds=1, num_mixed=8, threads=1,
                          num_long=6)
    assert report["auto_dtype"] in ("float32", "bfloat16") and isinstance(report["isa_flags"], list)
    assert set(report["gemm_peak_gflops"]) == {"float32", "int8"} and report["gemm_shape"] == [4096, 384, 1536]
    for corpus in report["corpora"]:
        assert corpus["gflop"] > 0 and all(0 < v["mfu"] for v in corpus["variants"])
        by_name = {v["name"]: v for v in corpus["variants"]}
        assert set(by_name) == {"poolq float32", "poolq int8", "ST torch"}
        assert by_name["ST torch"]["vs_st_fp32"] == 1.0 and by_name["poolq float32"]["min_cos_vs_st_fp32"] > 0.9999
        assert by_name["poolq int8"]["min_cos_vs_st_fp32"] > 0.99 and by_name["poolq int8"]["dtype"] == "int8"
