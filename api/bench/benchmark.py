"""Interleaved rounds of sentence-transformers ``encode`` and poolq's engine on identical texts."""
from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass

import numpy as np

from poolq.api.bench.corpora import Corpus, build_corpora
from poolq.api.bench.peak import encoder_flops, measure_matmul_gflops


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
    for corpus in build_corpora(engine.tokenizer, num_mixed=num_mixed, window=window):
        ours, theirs, min_cos = _time_rounds(corpus, rounds, lambda t: engine.embed(t, policy=policy),
                                             lambda t: baseline.encode(t, batch_size=batch_size, convert_to_numpy=True))
        seq_lens = [len(ids) + engine.tokenizer.num_special_tokens for ids in engine.tokenizer.count_and_tokenize(corpus.texts)]
        gflop = encoder_flops(engine.loaded.hf_config, seq_lens) / 1e9
        results.append(CorpusResult(
            corpus=corpus.name, texts=len(corpus.texts), tokens=corpus.num_tokens,
            poolq_tokens_per_s=corpus.num_tokens / ours, baseline_tokens_per_s=corpus.num_tokens / theirs,
            ratio=theirs / ours, poolq_peak_fraction=gflop / ours / peak, baseline_peak_fraction=gflop / theirs / peak,
            min_cosine=min_cos,
        ))
    return {"model": model, "device": device, "dtype": dtype, "rounds": rounds, "threads": torch.get_num_threads(),
            "matmul_peak_gflops": peak,
            "runner": type(engine.runner).__name__, "corpora": [asdict(r) for r in results]}


def _time_rounds(corpus: Corpus, rounds: int, ours, theirs) -> tuple[float, float, float]:
    """Median seconds for each system, alternating which goes first; and the min cosine."""
    ours(corpus.texts[:4]), theirs(corpus.texts[:4])  # warm-up
    ours_s, theirs_s = [], []
    for round_index in range(rounds):
        order = [(ours, ours_s), (theirs, theirs_s)]
        for fn, times in order if round_index % 2 == 0 else reversed(order):
            start = time.perf_counter()
            vectors = fn(corpus.texts)
            times.append(time.perf_counter() - start)
            if fn is ours:
                ours_vectors = vectors
            else:
                theirs_vectors = vectors
    norms = np.linalg.norm(theirs_vectors, axis=1) * np.linalg.norm(ours_vectors, axis=1)
    cosines = (ours_vectors * theirs_vectors).sum(1) / norms
    return statistics.median(ours_s), statistics.median(theirs_s), float(cosines.min())
