"""Interleaved rounds of sentence-transformers ``encode`` and poolq's engine on identical texts."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from poolq.devtools.bench.corpora import build_corpora
from poolq.devtools.bench.peak import measure_matmul_gflops
from poolq.devtools.bench.roofline import encoder_flops
from poolq.devtools.bench.variant_timing import min_cosine, time_variants
from poolq.devtools.bench.variants import Variant


@dataclass
class CorpusResult:
    corpus: str
    texts: int
    tokens: int
    poolq_tokens_per_s: float
    baseline_tokens_per_s: float
    ratio: float
    poolq_peak_fraction: float
    baseline_peak_fraction: float
    min_cosine: float


def run_benchmark(model: str = "all-MiniLM-L6-v2", *, rounds: int = 3, num_mixed: int = 200,
                  batch_size: int = 32, threads: int | None = None, device: str = "cpu",
                  dtype: str = "float32") -> dict:
    """Medians over ``rounds`` interleaved rounds; every round runs both systems on each corpus.

    On CUDA the baseline runs in fp16 (sentence-transformers' usual GPU setting) and poolq in
    ``dtype``; the peak is the measured matmul throughput in that dtype.
    """
    import torch
    from sentence_transformers import SentenceTransformer

    from poolq.engine import LongDocumentMode, LongDocumentPolicy, ModelRegistry, PoolingEngine

    if threads:
        torch.set_num_threads(threads)
    registry = ModelRegistry.with_packaged_models()
    engine = PoolingEngine.from_pretrained(model, registry=registry, device=device, dtype=dtype)
    window = engine.spec.max_position_tokens
    baseline = SentenceTransformer(str(registry.resolve(model)), device=device)
    if device != "cpu":
        baseline.half()
    baseline.max_seq_length = window
    policy = LongDocumentPolicy(mode=LongDocumentMode.TRUNCATE, window_tokens=window)
    peak = measure_matmul_gflops(device=device, dtype=dtype)
    results = []
    variants = [Variant("poolq", dtype, lambda t: engine.embed(t, policy=policy)),
                Variant("ST", "float16" if device != "cpu" else "float32",
                        lambda t: baseline.encode(t, batch_size=batch_size, convert_to_numpy=True))]
    for corpus in build_corpora(engine.tokenizer, num_mixed=num_mixed, window=window):
        timed_ours, timed_theirs = time_variants(variants, corpus.texts, rounds)
        ours, theirs = timed_ours.median_s, timed_theirs.median_s
        seq_lens = [len(ids) + engine.tokenizer.num_special_tokens for ids in engine.tokenizer.count_and_tokenize(corpus.texts)]
        gflop = encoder_flops(engine.loaded.hf_config, seq_lens) / 1e9
        results.append(CorpusResult(
            corpus=corpus.name, texts=len(corpus.texts), tokens=corpus.num_tokens,
            poolq_tokens_per_s=corpus.num_tokens / ours, baseline_tokens_per_s=corpus.num_tokens / theirs,
            ratio=theirs / ours, poolq_peak_fraction=gflop / ours / peak, baseline_peak_fraction=gflop / theirs / peak,
            min_cosine=min_cosine(timed_ours.vectors, timed_theirs.vectors),
        ))
    return {"model": model, "device": device, "dtype": dtype, "rounds": rounds, "threads": torch.get_num_threads(),
            "matmul_peak_gflops": peak,
            "runner": type(engine.runner).__name__, "corpora": [asdict(r) for r in results]}
