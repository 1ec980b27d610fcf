"""Does the compiled layer stack make the packed forward faster here? Eager vs compiled, per compute dtype.

"Compiled" is the engine's own ``EngineConfig(compile_encoder=True)`` (engine/models/compiled_encoder.py:
the packed BERT layers as one inductor graph with frozen weights, dynamic token counts, attention the
engine's SDPA loop as one opaque op), compiled at the warm-up here (``compile_after_tokens=0``); "eager"
is ``compile_encoder=False``. Same texts (the bench's corpora, truncated at the model's window), one
process, interleaved rounds, medians; cosine to eager float32 per vector.

    python3 infra/bench/compile_probe.py [--dtypes float32,bfloat16] [--texts 120] [--rounds 3] [--corpus mixed|long]
"""
from __future__ import annotations

import argparse
import time


def run(model: str, dtypes: list[str], texts: int, rounds: int,
        corpus_name: str = "mixed") -> list[tuple[str, float, float, float]]:
    """(variant, median seconds, tokens/s, min cos vs eager float32) per variant."""
    from poolq.devtools.bench.corpora import build_corpora
    from poolq.devtools.bench.variant_timing import min_cosine, time_variants
    from poolq.devtools.bench.variants import Variant
    from poolq.engine import EngineConfig, LongDocumentMode, LongDocumentPolicy, PoolingEngine

    reference = PoolingEngine.from_pretrained(model, config=EngineConfig(dtype="float32", compile_encoder=False))
    window = reference.spec.max_position_tokens
    corpus = next(c for c in build_corpora(reference.tokenizer, num_mixed=texts, window=window) if c.name == corpus_name)
    policy = LongDocumentPolicy(mode=LongDocumentMode.TRUNCATE, window_tokens=window)
    variants = []
    for dtype in dtypes:
        for name, compiled in ((f"eager {dtype}", False), (f"compiled {dtype}", True)):
            config = EngineConfig(dtype=dtype, compile_encoder=compiled, compile_after_tokens=0)
            engine = PoolingEngine.from_pretrained(model, config=config)
            start = time.perf_counter()
            engine.embed(corpus.texts[:4], policy=policy)  # compiles, where compiled
            print(f"{name}: first call {time.perf_counter() - start:.1f} s")
            variants.append(Variant(name, dtype, lambda batch, engine=engine: engine.embed(batch, policy=policy)))
    float32 = reference.embed(corpus.texts, policy=policy)
    timed = time_variants(variants, corpus.texts, rounds)
    return [(t.variant.name, t.median_s, corpus.num_tokens / t.median_s, min_cosine(float32, t.vectors)) for t in timed]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--texts", type=int, default=120)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--corpus", choices=("mixed", "long"), default="mixed")
    args = parser.parse_args()
    import torch

    from poolq.engine.device.hardware import noted_flags

    print("CPU features:", ", ".join(noted_flags()) or "none of note", f"| threads {torch.get_num_threads()}")
    rows = run(args.model, args.dtypes.split(","), args.texts, args.rounds, args.corpus)
    print("| variant | median s | tok/s | vs eager | cos vs eager fp32, min |")
    print("|---|---|---|---|---|")
    for name, median_s, tok_s, cos in rows:
        eager = next(r[2] for r in rows if r[0] == name.replace("compiled", "eager"))
        print(f"| {name} | {median_s:.2f} | {tok_s:,.0f} | {tok_s / eager:.2f} | {cos:.5f} |")


if __name__ == "__main__":
    main()
