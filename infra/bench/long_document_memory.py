"""Peak memory of one very long document in `chunked` mode: bounded by the batch, not the document.

Runs in its own process and prints one JSON line: tokens, windows, seconds, peak RSS (MB).
A random-weight encoder of MiniLM's width (hidden 384, one layer) keeps a 1M-token run short;
its token states would take 1.5 GB if a document's states were ever held at once.

    python infra/bench/long_document_memory.py   --tokens 1000000
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def build_model(directory: Path) -> Path:
    import torch
    from transformers import BertConfig, BertModel

    from poolq.engine import ModelRegistry

    torch.manual_seed(0)
    config = BertConfig(hidden_size=384, num_hidden_layers=1, num_attention_heads=6, intermediate_size=384,
                        max_position_embeddings=512)
    BertModel(config).save_pretrained(directory)
    minilm = ModelRegistry.with_packaged_models().resolve("all-MiniLM-L6-v2")
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(minilm / name, directory / name)
    return directory


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=1_000_000)
    args = parser.parse_args()
    from poolq.devtools.demo.sample_corpus import load_sample_corpus
    from poolq.engine import LongDocumentMode, LongDocumentPolicy, PoolingEngine, PoolingRequest

    with tempfile.TemporaryDirectory() as tmp:
        engine = PoolingEngine.from_pretrained(str(build_model(Path(tmp))))
        corpus = " ".join(doc["text"] for doc in load_sample_corpus())
        per_copy = len(engine.tokenizer.count_and_tokenize([corpus])[0])
        text = " ".join([corpus] * (args.tokens // per_copy + 1))
        baseline_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        start = time.perf_counter()
        (result,) = engine.run([PoolingRequest("doc", text)], LongDocumentPolicy(mode=LongDocumentMode.CHUNKED))
        seconds = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"tokens": result.num_tokens, "windows": -(-result.num_tokens // 512), "seconds": round(seconds, 1),
                      "rss_before_mb": round(baseline_mb), "peak_rss_mb": round(peak_mb),
                      "text_mb": round(len(text) / 1e6, 1)}))


if __name__ == "__main__":
    main()
