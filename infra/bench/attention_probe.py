"""Which bf16 attention is faster on this CPU: SDPA's flash kernel, or two GEMMs and a softmax?

The engine takes the explicit path for bfloat16 sequences of up to ``EXPLICIT_MAX_TOKENS`` on
the CPU (``engine/attention.py``); this runs the bf16 engine both ways on ``poolq bench``'s
corpora (mixed lengths, 512-token windows), same texts, one process, interleaved rounds,
medians, and the lowest cosine to the float32 engine.

    python3 infra/bench/attention_probe.py [--texts 200] [--rounds 3]
"""
from __future__ import annotations

import argparse
from unittest.mock import patch


def run(model: str, texts: int, rounds: int) -> list[tuple[str, str, float, float]]:
    """(corpus, variant, tokens/s, min cos vs float32) per corpus and variant."""
    from poolq.devtools.bench.corpora import build_corpora
    from poolq.devtools.bench.variant_timing import min_cosine, time_variants
    from poolq.devtools.bench.variants import Variant
    from poolq.engine import LongDocumentMode, LongDocumentPolicy, PoolingEngine

    reference = PoolingEngine.from_pretrained(model, dtype="float32")
    engine = PoolingEngine.from_pretrained(model, dtype="bfloat16")
    policy = LongDocumentPolicy(mode=LongDocumentMode.TRUNCATE, window_tokens=engine.spec.max_position_tokens)

    def sdpa_only(batch: list[str]):
        with patch("poolq.engine.attention.explicit_attention_applies", return_value=False):
            return engine.embed(batch, policy=policy)

    variants = [Variant("bf16, two GEMMs + softmax (the engine's)", "bfloat16", lambda b: engine.embed(b, policy=policy)),
                Variant("bf16, SDPA flash kernel", "bfloat16", sdpa_only)]
    rows = []
    for corpus in build_corpora(engine.tokenizer, num_mixed=texts, window=engine.spec.max_position_tokens):
        float32 = reference.embed(corpus.texts, policy=policy)
        for timed in time_variants(variants, corpus.texts, rounds):
            rows.append((corpus.name, timed.variant.name, corpus.num_tokens / timed.median_s,
                         min_cosine(float32, timed.vectors)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--texts", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import torch

    from poolq.engine.device.hardware import noted_flags

    print("CPU features:", ", ".join(noted_flags()) or "none of note", f"| threads {torch.get_num_threads()}")
    print("| corpus | variant | tok/s | vs SDPA | cos vs float32, min |")
    print("|---|---|---|---|---|")
    rows = run(args.model, args.texts, args.rounds)
    for corpus, name, tok_s, cos in rows:
        sdpa = next(r[2] for r in rows if r[0] == corpus and "SDPA" in r[1])
        print(f"| {corpus} | {name} | {tok_s:,.0f} | {tok_s / sdpa:.2f} | {cos:.5f} |")


if __name__ == "__main__":
    main()
