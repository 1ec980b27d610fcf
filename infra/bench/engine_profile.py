"""Where the engine's time goes: torch.profiler's top operators for one pass over the bench's
mixed corpus, per compute dtype (CPU).

    python3 infra/bench/engine_profile.py [--dtypes float32,int8] [--rows 8]
"""
from __future__ import annotations

import argparse


def profile(model: str, dtype: str, rows: int, texts: int = 200) -> str:
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from poolq.devtools.bench.corpora import build_corpora
    from poolq.engine import LongDocumentMode, LongDocumentPolicy, PoolingEngine

    engine = PoolingEngine.from_pretrained(model, dtype=dtype)
    corpus = build_corpora(engine.tokenizer, num_mixed=texts, window=engine.spec.max_position_tokens)[0]
    policy = LongDocumentPolicy(mode=LongDocumentMode.TRUNCATE)
    engine.embed(corpus.texts[:8], policy=policy)  # warm-up
    with torch.inference_mode(), torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        engine.embed(corpus.texts, policy=policy)
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--dtypes", default="float32,int8")
    parser.add_argument("--rows", type=int, default=8)
    args = parser.parse_args()
    for dtype in args.dtypes.split(","):
        print(f"== {args.model} {dtype}")
        print(profile(args.model, dtype, args.rows))


if __name__ == "__main__":
    main()
