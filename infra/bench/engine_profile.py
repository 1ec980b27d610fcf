"""Where the engine's time goes: torch.profiler's top operators for one pass over one of the bench's
corpora (mixed lengths, or long documents in full windows), per compute dtype (CPU).

    python3 infra/bench/engine_profile.py [--dtypes float32,int8] [--corpus mixed|long] [--compile on|off] [--rows 8]

Texts are truncated at the model's position window (512 tokens for MiniLM), as ``poolq bench`` runs
them; before 2026-12-05 this script truncated at the model's default window (256 for MiniLM). The layer
stack is compiled (``--compile on``: ``EngineConfig.compile_encoder``; off by default) before the
profiled pass, so the profile is the steady state of a long-running worker.
"""
from __future__ import annotations

import argparse

COMPILE = {"on": True, "off": False}  # --compile -> EngineConfig.compile_encoder


def profile(model: str, dtype: str, rows: int, texts: int = 200, corpus_name: str = "mixed", compile: str = "off") -> str:
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from poolq.devtools.bench.corpora import build_corpora
    from poolq.engine import EngineConfig, LongDocumentMode, LongDocumentPolicy, PoolingEngine

    config = EngineConfig(dtype=dtype, compile_encoder=COMPILE[compile], compile_after_tokens=0)
    engine = PoolingEngine.from_pretrained(model, config=config)
    window = engine.spec.max_position_tokens
    corpus = next(c for c in build_corpora(engine.tokenizer, num_mixed=texts, window=window) if c.name == corpus_name)
    policy = LongDocumentPolicy(mode=LongDocumentMode.TRUNCATE, window_tokens=window)
    engine.embed(corpus.texts[:8], policy=policy)  # warm-up (compiles, where the layers are compiled)
    with torch.inference_mode(), torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        engine.embed(corpus.texts, policy=policy)
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)
    encoder = type(getattr(engine.runner, "encoder", engine.runner)).__name__
    return (f"{corpus.name}: {len(corpus.texts)} texts, {corpus.num_tokens:,} tokens, threads={torch.get_num_threads()}, "
            f"{encoder}\n{table}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--dtypes", default="float32,int8")
    parser.add_argument("--corpus", choices=("mixed", "long"), default="mixed")
    parser.add_argument("--compile", choices=tuple(COMPILE), default="off")
    parser.add_argument("--rows", type=int, default=8)
    args = parser.parse_args()
    for dtype in args.dtypes.split(","):
        print(f"== {args.model} {dtype}")
        print(profile(args.model, dtype, args.rows, corpus_name=args.corpus, compile=args.compile))


if __name__ == "__main__":
    main()
